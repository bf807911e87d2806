package perf

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/ptscope/ptscope/internal/kineto"
)

func readPeers(t *testing.T, rel string) *kineto.Trace {
	t.Helper()
	tr, err := kineto.ReadFile(context.Background(), filepath.Join(peersDir, "tbplugin", "test_profiler", rel), kineto.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// TestMemoryOpsAsPlugin checks the memory table against the values the
// TensorBoard plugin's test_memory_view asserts (test_profiler.py, the
// rows as [self increase, self allocated, self allocations, increase,
// allocated, allocations, calls]).
func TestMemoryOpsAsPlugin(t *testing.T) {
	t.Parallel()
	r := Analyze(readPeers(t, "test_memory_view.json"), Options{})
	want := map[string]map[string][7]int64{
		"GPU0": {
			"aten::to":                {104, 104, 2, 104, 204, 3, 4},
			"aten::nll_loss_backward": {0, 10, 1, 0, 10, 1, 1},
			"aten::copy_":             {0, 100, 1, 0, 100, 1, 1},
			"aten::addmm":             {0, 30, 1, 0, 30, 1, 1},
			"aten::tranas_stride":     {0, 50, 1, 0, 50, 1, 1},
			"aten::transpose":         {0, 50, 1, 0, 100, 2, 1},
			"aten::t":                 {0, 100, 1, 0, 200, 3, 1},
			"aten::liner":             {20, 130, 3, 20, 360, 7, 1},
		},
		"CPU": {
			"aten::to":            {4, 4, 1, 4, 4, 1, 4},
			"aten::liner":         {0, 100, 1, 50, 150, 2, 1},
			"aten::tranas_stride": {50, 50, 1, 50, 50, 1, 1},
			"aten::transpose":     {0, 0, 0, 50, 50, 1, 1},
			"aten::t":             {0, 0, 0, 50, 50, 1, 1},
		},
	}
	got := map[string]map[string][7]int64{}
	for _, m := range r.MemoryOps {
		if got[m.Device] == nil {
			got[m.Device] = map[string][7]int64{}
		}
		got[m.Device][m.Operator] = [7]int64{m.SelfIncreaseBytes, m.SelfAllocatedBytes, int64(m.SelfAllocations), m.IncreaseBytes,
			m.AllocatedBytes, int64(m.Allocations), int64(m.Calls)}
	}
	for dev, rows := range want {
		for op, w := range rows {
			if got[dev][op] != w {
				t.Errorf("%s %s: %v, plugin %v", dev, op, got[dev][op], w)
			}
		}
		if len(got[dev]) != len(rows) {
			t.Errorf("%s: %d rows, plugin %d: %v", dev, len(got[dev]), len(rows), got[dev])
		}
	}
}

// TestModulesAsPlugin checks the module hierarchy of the plugin's
// test_build_module_hierarchy (roots Conv2 and MyModule, Linear under
// MyModule, as it asserts) and the calls the trace holds.
func TestModulesAsPlugin(t *testing.T) {
	t.Parallel()
	r := Analyze(readPeers(t, "test_build_module_hierarchy.json"), Options{})
	var got []string
	for _, m := range r.Modules {
		got = append(got, fmt.Sprintf("%s %d calls", m.Path, m.Calls))
	}
	want := []string{"Conv2 1 calls", "MyModule 3 calls", "MyModule/Linear 3 calls"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("modules %q, plugin's hierarchy %q", got, want)
	}
	// Linear's three calls of 62 us hold one aten::addmm each (31, 32, 33 us)
	for _, m := range r.Modules {
		if m.Path == "MyModule/Linear" && (m.Operators != 3 || m.HostNS != 3*62_000 || m.HostSelfNS != 3*62_000-31_000-32_000-33_000) {
			t.Errorf("Linear: %+v", m)
		}
	}
}

// TestCommOpsAsPlugin checks the communication operators table against the
// plugin's distributed tests (test_distributed_nccl, _gloo_gpu, _gloo_cpu:
// name, calls, total size, mean size, latency, mean latency, transfer time,
// mean transfer time; times in us).
func TestCommOpsAsPlugin(t *testing.T) {
	t.Parallel()
	for test, want := range map[string][2][][8]any{
		"test_distributed_nccl": {
			{{"nccl:broadcast", 1, 212480, 212480, 75, 75, 36, 36}, {"nccl:all_reduce", 1, 8196000, 8196000, 1558, 1558, 1133, 1133}},
			{{"nccl:broadcast", 1, 212480, 212480, 39, 39, 36, 36}, {"nccl:all_reduce", 1, 8196000, 8196000, 1133, 1133, 1133, 1133}},
		},
		"test_distributed_gloo_gpu": {
			{{"gloo:broadcast", 3, 637440, 212480, 63, 21, 41, 14}, {"gloo:all_reduce", 2, 16392000, 8196000, 46, 23, 34, 17}},
			{{"gloo:broadcast", 3, 637440, 212480, 44, 15, 44, 15}, {"gloo:all_reduce", 2, 16392000, 8196000, 54, 27, 34, 17}},
		},
		"test_distributed_gloo_cpu": {
			{{"gloo:broadcast", 3, 637440, 212480, 63, 21, 41, 14}, {"gloo:all_reduce", 2, 16392000, 8196000, 46, 23, 34, 17}},
			{{"gloo:broadcast", 3, 637440, 212480, 44, 15, 44, 15}, {"gloo:all_reduce", 2, 16392000, 8196000, 54, 27, 34, 17}},
		},
	} {
		rep := AnalyzeTraces([]*kineto.Trace{readPeers(t, test+"/worker0.pt.trace.json"), readPeers(t, test+"/worker1.pt.trace.json")}, Options{})
		if len(rep.Ranks) != 2 {
			t.Fatalf("%s: %d ranks", test, len(rep.Ranks))
		}
		for w, rows := range want {
			got := map[string]CommOp{}
			for _, c := range rep.Ranks[w].CommOps {
				got[c.Name] = c
			}
			for _, row := range rows {
				c := got[row[0].(string)]
				// the plugin rounds means to whole us
				g := []int64{int64(c.Calls), c.Bytes, c.MeanBytes, c.LatencyNS / 1000, (c.MeanLatencyNS + 500) / 1000, c.TransferNS / 1000,
					(c.MeanTransferNS + 500) / 1000}
				for k, v := range g {
					if v != int64(row[k+1].(int)) {
						t.Errorf("%s worker %d %s: %v, plugin %v", test, w, row[0], g, row[1:])
						break
					}
				}
			}
			if len(got) != len(rows) {
				t.Errorf("%s worker %d: %d rows, plugin %d", test, w, len(got), len(rows))
			}
		}
	}
}
