package perf

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ptscope/ptscope/internal/kineto"
)

// bundleTrace is the real trace of the committed ptscope run bundle.
var bundleTrace = filepath.Join("..", "..", "testdata", "bundles", "lm_small_bf16", "rank0", "trace_step4.pt.trace.json.gz")

// rankTrace derives a rank's trace from a real one (raw JSON): distributedInfo
// names the rank, and six allreduce collectives are added from t0 (trace ns)
// on, every 20 ms, on thread pid/tid (a record_param_comms op, its launch and
// an NCCL kernel carrying the collective arguments, as Kineto writes them).
// Rank lateNS joins each collective late.
func rankTrace(t *testing.T, raw []byte, rank int, lateNS, t0 int64, pid, tid int32) []byte {
	t.Helper()
	key := []byte(`"traceEvents": [`)
	a := bytes.Index(raw, key)
	z := bytes.LastIndexByte(raw, ']')
	var b bytes.Buffer
	b.Write(raw[:a])
	fmt.Fprintf(&b, `"distributedInfo": {"backend": "nccl", "rank": %d, "world_size": 2},`+"\n  ", rank)
	b.Write(raw[a:z])
	for k := 0; k < 6; k++ {
		ts := t0 + int64(k)*20_000_000
		ext, corr := 900000+k, 800000+k
		args := fmt.Sprintf(`"Collective name": "allreduce", "dtype": "Float", "In msg nelems": 1048576, "Out msg nelems": 1048576, "Group size": 2, "Process Group Name": "0", "Seq": %d`, k)
		start := ts + int64(rank)*lateNS
		fmt.Fprintf(&b, `,
  {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": %d, "tid": %d, "ts": %s, "dur": 50, "args": {"External id": %d, %s}}`, pid, tid, us(ts-1_000_000), ext, args)
		fmt.Fprintf(&b, `,
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": %d, "tid": %d, "ts": %s, "dur": 10, "args": {"External id": %d, "cbid": 211, "correlation": %d}}`, pid, tid, us(ts-1_000_000+10_000), ext, corr)
		fmt.Fprintf(&b, `,
  {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "pid": 0, "tid": 20, "ts": %s, "dur": %s, "args": {"External id": %d, "device": 0, "stream": 20, "correlation": %d, "blocks per SM": 0.1, "est. achieved occupancy %%": 3, %s}}`,
			us(start), us(ts+3_000_000-start), ext, corr, args)
	}
	b.Write(raw[z:])
	return b.Bytes()
}

func us(ns int64) string { return fmt.Sprintf("%d.%03d", ns/1000, ns%1000) }

// bundleRaw returns the committed bundle trace's JSON and where its first
// step starts (trace ns) on which thread.
func bundleRaw(t *testing.T) (raw []byte, t0 int64, pid, tid int32) {
	t.Helper()
	f, err := os.Open(bundleTrace)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	if raw, err = io.ReadAll(zr); err != nil {
		t.Fatal(err)
	}
	tr, err := kineto.Read(context.Background(), bytes.NewReader(raw), kineto.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < tr.Events.Len(); i++ {
		if tr.Name(i) == "ProfilerStep#2" && tr.Events.Kind[i] == kineto.KindUserAnnotation {
			return raw, tr.Events.TS[i], tr.Events.PID[i], tr.Events.TID[i]
		}
	}
	t.Fatal("no ProfilerStep#2 in the bundle trace")
	return
}

func TestMultiRank(t *testing.T) {
	raw, t0, pid, tid := bundleRaw(t)
	const late = 2_000_000
	var traces []*kineto.Trace
	for r := 1; r >= 0; r-- {
		tr, err := kineto.Read(context.Background(), bytes.NewReader(rankTrace(t, raw, r, late, t0+10_000_000, pid, tid)), kineto.Options{})
		if err != nil {
			t.Fatal(err)
		}
		tr.Path = fmt.Sprintf("rank%d.1700000000.pt.trace.json", r)
		traces = append(traces, tr)
	}
	rep := AnalyzeTraces(traces, Options{})
	if len(rep.Ranks) != 2 || rep.Ranks[0].Rank != 0 || rep.Ranks[1].Rank != 1 || rep.Ranks[1].WorldSize != 2 {
		t.Fatalf("ranks %+v", rep.Ranks)
	}
	for _, r := range rep.Ranks {
		c := r.Comm
		// rank 1's kernels start 2 ms late and end with rank 0's
		want := int64(6 * 3_000_000)
		if r.Rank == 1 {
			want -= 6 * late
		}
		if c.Kernels != 6 || c.KernelNS != want || len(c.Collectives) != 1 || c.Collectives[0].Name != "allreduce" || c.Collectives[0].Bytes != 6*1048576*4 {
			t.Errorf("rank %d comm %+v", r.Rank, c)
		}
		if c.OverlapRatio <= 0 || c.OverlapRatio >= 1 || c.ExposedNS <= 0 || c.ExposedNS >= c.KernelNS {
			t.Errorf("rank %d: overlap %.3f, exposed %d of %d", r.Rank, c.OverlapRatio, c.ExposedNS, c.KernelNS)
		}
		if c.RecordParamComm != 6 {
			t.Errorf("rank %d: record_param_comms %d", r.Rank, c.RecordParamComm)
		}
		for _, s := range r.Steps {
			if s.Breakdown.Total() != s.DurationNS {
				t.Errorf("rank %d %s: breakdown %d != %d", r.Rank, s.Name, s.Breakdown.Total(), s.DurationNS)
			}
		}
		var comm bool
		for _, k := range r.Kernels {
			if k.Communication && k.Calls == 6 {
				comm = true
			}
		}
		if !comm {
			t.Errorf("rank %d: NCCL kernel row missing", r.Rank)
		}
		// NCCL kernels are not compute: the utilisation is the original trace's
		if r.Idle.ComputeNS != rep.Ranks[0].Idle.ComputeNS || r.Idle.CommunicationNS <= 0 {
			t.Errorf("rank %d idle %+v", r.Rank, r.Idle)
		}
	}
	c := rep.CrossRank
	if c == nil {
		t.Fatal("no cross-rank analysis")
	}
	if len(c.Collectives) != 6 {
		t.Fatalf("%d matched collectives, want 6", len(c.Collectives))
	}
	for _, x := range c.Collectives {
		if x.StartSkewNS != late || x.LastRank != 1 || x.SlowestRank != 0 || x.StartTimeNS != traces[1].Meta.BaseTimeNS+t0+10_000_000+int64(x.Index)*20_000_000 {
			t.Errorf("collective %+v", x)
		}
	}
	if c.Straggler != 1 || c.Ranks[1].LateArrivals != 6 || c.Ranks[0].LateArrivals != 0 {
		t.Errorf("straggler %d, ranks %+v", c.Straggler, c.Ranks)
	}
	if len(c.Steps) != 2 {
		t.Errorf("cross steps %+v", c.Steps)
	}
	found := false
	for _, f := range rep.Findings {
		if f.ID == "straggler" {
			found = true
		}
	}
	if !found {
		t.Errorf("straggler not reported: %+v", rep.Findings)
	}
}

func TestRankFallback(t *testing.T) {
	read := func() *kineto.Trace {
		tr, err := kineto.ReadFile(context.Background(), bundleTrace, kineto.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}
	a, b := read(), read()
	a.Path, b.Path = "x/worker_rank1.123.pt.trace.json", "x/other.pt.trace.json"
	rep := AnalyzeTraces([]*kineto.Trace{a, b}, Options{})
	if len(rep.Ranks) != 2 || rep.Ranks[0].Rank != 0 || rep.Ranks[1].Rank != 1 || rep.Ranks[1].Path != a.Path {
		t.Errorf("ranks %d %s / %d %s", rep.Ranks[0].Rank, rep.Ranks[0].Path, rep.Ranks[1].Rank, rep.Ranks[1].Path)
	}
	if rep.CrossRank == nil || len(rep.CrossRank.Steps) != 2 || rep.CrossRank.MaxSkewNS != 0 {
		t.Errorf("cross %+v", rep.CrossRank)
	}
	if len(rep.Ranks[0].Warnings) != 1 || !strings.Contains(rep.Ranks[0].Warnings[0], "numbered rank 0 by file order") {
		t.Errorf("warnings %v", rep.Ranks[0].Warnings)
	}
}
