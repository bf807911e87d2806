package perf

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ptscope/ptscope/internal/kineto"
)

func readPeerTrace(t *testing.T, rel string) *kineto.Trace {
	t.Helper()
	tr, err := kineto.ReadFile(context.Background(), filepath.Join(peersDir, rel), kineto.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// TestJobs: traces are ranks of one job only when they can be: two
// profiles of one worker (the plugin's resnet50 samples, both worker0, a
// day apart), or two rank-0 traces, are separate runs with a warning and
// no cross-rank comparison; real ranks beside an unrelated trace are one
// job of their own, compared without it.
func TestJobs(t *testing.T) {
	w0 := "tbplugin/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz"
	w4 := "tbplugin/resnet50_num_workers_4/worker0.1623212756351.pt.trace.json.gz"
	rep := AnalyzeTraces([]*kineto.Trace{readPeerTrace(t, w0), readPeerTrace(t, w4)}, Options{})
	if len(rep.Jobs) != 2 || rep.CrossRank != nil || len(rep.Findings) != 0 || len(rep.Warnings) != 1 ||
		!strings.Contains(rep.Warnings[0], "2 separate runs") || !strings.Contains(rep.Warnings[0], "two profiles of worker0") {
		t.Errorf("two profiles of worker0: jobs %+v, cross %v, warnings %q", rep.Jobs, rep.CrossRank, rep.Warnings)
	}
	for _, r := range rep.Ranks {
		if r.Rank != 0 || len(r.Warnings) != 0 {
			t.Errorf("%s: rank %d, warnings %q", r.Path, r.Rank, r.Warnings)
		}
	}

	rank0 := "real/fsdp2_slow0/rank0.1795802810039621532.pt.trace.json.gz"
	rep = AnalyzeTraces([]*kineto.Trace{readPeerTrace(t, rank0), readPeerTrace(t, rank0)}, Options{})
	if len(rep.Jobs) != 2 || rep.CrossRank != nil || len(rep.Warnings) != 1 || !strings.Contains(rep.Warnings[0], "rank 0 twice") {
		t.Errorf("two rank-0 traces: jobs %+v, warnings %q", rep.Jobs, rep.Warnings)
	}

	traces := readRanks(t, "fsdp2_slow0")
	traces = append(traces, readPeerTrace(t, w0))
	rep = AnalyzeTraces(traces, Options{})
	if len(rep.Jobs) != 2 || len(rep.Ranks) != 5 || rep.CrossRank != nil {
		t.Fatalf("jobs %+v", rep.Jobs)
	}
	// jobs in start order: the 2021 sample first
	j := rep.Jobs[1]
	if len(rep.Jobs[0].Traces) != 1 || len(j.Traces) != 4 || j.CrossRank == nil || j.CrossRank.Straggler != 0 || findingOf(j.Findings, "straggler") == nil {
		t.Errorf("jobs %+v", rep.Jobs)
	}
	for k, i := range j.Traces {
		if rep.Ranks[i].Rank != k || rep.Ranks[i].WorldSize != 4 {
			t.Errorf("job trace %d: rank %d of %d", i, rep.Ranks[i].Rank, rep.Ranks[i].WorldSize)
		}
	}
}

// TestIncompleteTrace: a trace with no operator and no launch (a job that
// ended in the profiler's warm-up leaves one: metadata, a step annotation,
// stray GPU events) says so and judges nothing, rather than reporting an
// idle GPU.
func TestIncompleteTrace(t *testing.T) {
	raw := `{"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H200", "totalGlobalMem": 150000000000, "computeMajor": 9, "computeMinor": 0, "numSms": 132}],
  "distributedInfo": {"backend": "nccl", "rank": 1, "world_size": 4}, "baseTimeNanoseconds": 1790000000000000000, "traceEvents": [
  {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#3", "pid": 10, "tid": 10, "ts": 1000.0, "dur": 50.0, "args": {"External id": 1}},
  {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllGather_RING_LL", "pid": 0, "tid": 20, "ts": 1010.0, "dur": 30.0, "args": {"device": 0, "stream": 20, "correlation": 5}}
]}`
	tr, err := kineto.Read(context.Background(), strings.NewReader(raw), kineto.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := Analyze(tr, Options{})
	if len(r.Findings) != 1 || r.Findings[0].ID != "incomplete-trace" || findingOf(r.Findings, "low-gpu-utilization") != nil {
		t.Errorf("findings %+v", r.Findings)
	}
	if len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "no operator and no kernel launch") {
		t.Errorf("warnings %q", r.Warnings)
	}
}

// TestHTATraces: HTA's test traces (testdata/peers/hta) read and analyse;
// MTIA device events, which ptscope does not analyse, are said to be left
// out rather than dropped silently.
func TestHTATraces(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join(peersDir, "hta", "*", "*.json.gz"))
	if err != nil || len(paths) < 4 {
		t.Fatalf("%d traces: %v", len(paths), err)
	}
	more, _ := filepath.Glob(filepath.Join(peersDir, "hta", "*", "*", "*.json.gz"))
	for _, p := range append(paths, more...) {
		rel, _ := filepath.Rel(peersDir, p)
		r := Analyze(readPeerTrace(t, rel), Options{})
		mtia := strings.Contains(p, "mtia")
		warned := len(r.Warnings) == 1 && strings.Contains(r.Warnings[0], "1313 MTIA device events")
		if mtia != warned || len(r.Steps) == 0 || (!mtia && len(r.Warnings) > 0) {
			t.Errorf("%s: %d steps, warnings %q", rel, len(r.Steps), r.Warnings)
		}
	}
}
