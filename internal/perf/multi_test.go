package perf

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"testing"

	"github.com/ptscope/ptscope/internal/kineto"
)

// rankTrace derives a rank's trace from the real fixture: distributedInfo
// names the rank, and six allreduce collectives are added (a record_param_comms
// op, its launch and an NCCL kernel carrying the collective arguments, as
// Kineto writes them). Rank lateNS joins each collective late.
func rankTrace(t *testing.T, raw []byte, rank int, lateNS int64) []byte {
	t.Helper()
	key := []byte(`"traceEvents": [`)
	a := bytes.Index(raw, key)
	z := bytes.LastIndexByte(raw, ']')
	var b bytes.Buffer
	b.Write(raw[:a])
	fmt.Fprintf(&b, `"distributedInfo": {"backend": "nccl", "rank": %d, "world_size": 2},`+"\n  ", rank)
	b.Write(raw[a:z])
	for k := 0; k < 6; k++ {
		ts := int64(4415523430000000) + int64(k)*20_000_000 // ns, inside the steps' GPU work
		ext, corr := 900000+k, 800000+k
		args := fmt.Sprintf(`"Collective name": "allreduce", "dtype": "Float", "In msg nelems": 1048576, "Out msg nelems": 1048576, "Group size": 2, "Process Group Name": "0", "Seq": %d`, k)
		start := ts + int64(rank)*lateNS
		fmt.Fprintf(&b, `,
  {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 427, "tid": 427, "ts": %s, "dur": 50, "args": {"External id": %d, %s}}`, us(ts-1_000_000), ext, args)
		fmt.Fprintf(&b, `,
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 427, "tid": 427, "ts": %s, "dur": 10, "args": {"External id": %d, "cbid": 211, "correlation": %d}}`, us(ts-1_000_000+10_000), ext, corr)
		fmt.Fprintf(&b, `,
  {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "pid": 0, "tid": 20, "ts": %s, "dur": %s, "args": {"External id": %d, "device": 0, "stream": 20, "correlation": %d, "blocks per SM": 0.1, "est. achieved occupancy %%": 3, %s}}`,
			us(start), us(ts+3_000_000-start), ext, corr, args)
	}
	b.Write(raw[z:])
	return b.Bytes()
}

func us(ns int64) string { return fmt.Sprintf("%d.%03d", ns/1000, ns%1000) }

func TestMultiRank(t *testing.T) {
	f, err := os.Open(fixture(t, gpt2Trace))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	const late = 2_000_000
	var traces []*kineto.Trace
	for r := 1; r >= 0; r-- {
		tr, err := kineto.Read(context.Background(), bytes.NewReader(rankTrace(t, raw, r, late)), kineto.Options{})
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
		if c.Kernels != 6 || len(c.Collectives) != 1 || c.Collectives[0].Name != "allreduce" || c.Collectives[0].Bytes != 6*1048576*4 {
			t.Errorf("rank %d comm %+v", r.Rank, c)
		}
		if c.OverlapRatio <= 0.5 {
			t.Errorf("rank %d: overlap %.3f; the collectives run beside compute kernels", r.Rank, c.OverlapRatio)
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
	}
	c := rep.CrossRank
	if c == nil {
		t.Fatal("no cross-rank analysis")
	}
	if len(c.Collectives) != 6 {
		t.Fatalf("%d matched collectives, want 6", len(c.Collectives))
	}
	for _, x := range c.Collectives {
		if x.StartSkewNS != late || x.LastRank != 1 || x.SlowestRank != 0 {
			t.Errorf("collective %+v", x)
		}
	}
	if c.Straggler != 1 || c.Ranks[1].LateArrivals != 6 || c.Ranks[0].LateArrivals != 0 {
		t.Errorf("straggler %d, ranks %+v", c.Straggler, c.Ranks)
	}
	if len(c.Steps) != 3 {
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
	a := readTrace(t, gpt2Trace)
	b := readTrace(t, gpt2Trace)
	a.Path, b.Path = "x/worker_rank1.123.pt.trace.json", "x/other.pt.trace.json"
	rep := AnalyzeTraces([]*kineto.Trace{a, b}, Options{})
	if len(rep.Ranks) != 2 || rep.Ranks[0].Rank != 0 || rep.Ranks[1].Rank != 1 || rep.Ranks[1].Path != a.Path {
		t.Errorf("ranks %d %s / %d %s", rep.Ranks[0].Rank, rep.Ranks[0].Path, rep.Ranks[1].Rank, rep.Ranks[1].Path)
	}
	if rep.CrossRank == nil || len(rep.CrossRank.Steps) != 3 || rep.CrossRank.MaxSkewNS != 0 {
		t.Errorf("cross %+v", rep.CrossRank)
	}
}
