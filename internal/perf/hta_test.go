package perf

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/ptscope/ptscope/internal/kineto"
)

// htaExpected is scripts/peers/hta_numbers.py's output: HTA's own numbers.
type htaExpected struct {
	Ranks map[string]struct {
		Temporal struct {
			KernelUS     float64 `json:"kernel_time(us)"`
			IdleUS       float64 `json:"idle_time(us)"`
			ComputeUS    float64 `json:"compute_time(us)"`
			NonComputeUS float64 `json:"non_compute_time(us)"`
			IdlePct      float64 `json:"idle_time_pctg"`
			ComputePct   float64 `json:"compute_time_pctg"`
		} `json:"temporal"`
		Overlap *float64                      `json:"comp_comm_overlap_pctg"`
		Idle    map[string]map[string]float64 `json:"idle_by_stream"`
	} `json:"ranks"`
}

// TestAsHTA: ptscope's "as HTA" numbers against HTA's own, run from its
// source on the same traces (testdata/peers/hta/expected, HTA 0.6 at
// f4d0062 with HTA_DISABLE_NS_ROUNDING=1): times to the microsecond (HTA
// keeps microseconds in floats), percentages to HTA's two decimals.
func TestAsHTA(t *testing.T) {
	for _, c := range []struct{ name, dir string }{
		{"trace_filter", "hta/trace_filter"}, {"simple_add", "hta/critical_path/simple_add"},
		{"amd_trace", "hta/amd_trace"}, {"fsdp2_slow0", "real/fsdp2_slow0"},
	} {
		b, err := os.ReadFile(filepath.Join(peersDir, "hta", "expected", c.name+".json"))
		if err != nil {
			t.Fatal(err)
		}
		var want htaExpected
		if err := json.Unmarshal(b, &want); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		paths, _ := filepath.Glob(filepath.Join(peersDir, c.dir, "*.json.gz"))
		var traces []*kineto.Trace
		for _, p := range paths {
			rel, _ := filepath.Rel(peersDir, p)
			traces = append(traces, readPeerTrace(t, rel))
		}
		rep := AnalyzeTraces(traces, Options{})
		if len(rep.Ranks) != len(want.Ranks) {
			t.Fatalf("%s: %d ranks, HTA %d", c.name, len(rep.Ranks), len(want.Ranks))
		}
		for _, r := range rep.Ranks {
			w, ok := want.Ranks[strconv.Itoa(r.Rank)]
			if !ok {
				t.Errorf("%s: rank %d not in HTA's", c.name, r.Rank)
				continue
			}
			h := r.HTA
			us := func(what string, got int64, want float64) {
				if math.Abs(float64(got)/1e3-want) > 1 {
					t.Errorf("%s rank %d %s: %.3f us, HTA %.3f", c.name, r.Rank, what, float64(got)/1e3, want)
				}
			}
			pct := func(what string, got, want float64) {
				if math.Abs(100*got-want) > 0.006 {
					t.Errorf("%s rank %d %s: %.4f%%, HTA %.2f%%", c.name, r.Rank, what, 100*got, want)
				}
			}
			us("kernel time", h.KernelTimeNS, w.Temporal.KernelUS)
			us("idle", h.IdleNS, w.Temporal.IdleUS)
			us("compute", h.ComputeNS, w.Temporal.ComputeUS)
			us("non-compute", h.NonComputeNS, w.Temporal.NonComputeUS)
			pct("idle", h.IdleRatio, w.Temporal.IdlePct)
			pct("compute", h.ComputeRatio, w.Temporal.ComputePct)
			if w.Overlap != nil {
				pct("overlap", h.CommCompOverlapRatio, *w.Overlap)
			} else if h.CommCompOverlapRatio != 0 {
				t.Errorf("%s rank %d: overlap %.4f without communication", c.name, r.Rank, h.CommCompOverlapRatio)
			}
			streams := map[string]HTAStream{}
			for _, s := range h.Streams {
				streams[strconv.Itoa(int(s.Stream))] = s
			}
			if len(streams) != len(w.Idle) {
				t.Errorf("%s rank %d: %d streams, HTA %d", c.name, r.Rank, len(streams), len(w.Idle))
			}
			for id, cats := range w.Idle {
				s := streams[id]
				us("stream "+id+" host wait", s.HostWaitNS, cats["host_wait"])
				us("stream "+id+" kernel wait", s.KernelWaitNS, cats["kernel_wait"])
				us("stream "+id+" other", s.OtherWaitNS, cats["other"])
			}
		}
	}
}
