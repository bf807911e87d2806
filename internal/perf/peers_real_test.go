package perf

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ptscope/ptscope/internal/kineto"
)

// readRanks reads every trace of a folder of testdata/peers/real.
func readRanks(t *testing.T, dir string) []*kineto.Trace {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(peersDir, "real", dir, "*.pt.trace.json.gz"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no traces in %s: %v", dir, err)
	}
	var out []*kineto.Trace
	for _, p := range paths {
		tr, err := kineto.ReadFile(context.Background(), p, kineto.Options{})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, tr)
	}
	return out
}

// TestRealStraggler: FSDP2 on 4 H100s under torchrun (scripts/gpu/peers_ranks.py),
// rank 0 sleeping 20 ms on the host before each forward: rank 0 is the
// straggler, every other rank waits for it at least the sleeps it saw
// with no compute to run, and their findings say so.
func TestRealStraggler(t *testing.T) {
	rep := AnalyzeTraces(readRanks(t, "fsdp2_slow0"), Options{})
	c := rep.CrossRank
	if len(rep.Ranks) != 4 || c == nil {
		t.Fatalf("%d ranks, cross %v", len(rep.Ranks), c)
	}
	var facts struct {
		Slept []float64 `json:"slept_s"`
	}
	b, err := os.ReadFile(filepath.Join(peersDir, "real", "fsdp2_slow0", "facts.rank0.json"))
	if err != nil || json.Unmarshal(b, &facts) != nil {
		t.Fatal(err)
	}
	var slept int64 // in the profiled steps (the 4th to the 6th of 8)
	for _, s := range facts.Slept[3:6] {
		slept += int64(s * 1e9)
	}
	if c.Straggler != 0 || c.StragglerWaitRatio < 0.25 {
		t.Errorf("straggler %d (wait ratio %.3f), want rank 0", c.Straggler, c.StragglerWaitRatio)
	}
	if f := findingOf(rep.Findings, "straggler"); f == nil || !strings.Contains(f.Message, "Rank 0 is the rank the others wait for") {
		t.Errorf("straggler finding %+v", f)
	}
	for k, s := range c.Ranks {
		if s.Rank == 0 {
			if s.CommunicationWaitNS > s.CommunicationTransferNS || s.CausedWaitNS < 3*slept {
				t.Errorf("rank 0 waits %d, causes %d (slept %d)", s.CommunicationWaitNS, s.CausedWaitNS, slept)
			}
			continue
		}
		if len(s.WaitsFor) == 0 || s.WaitsFor[0].Rank != 0 || s.WaitsFor[0].ExposedNS < slept || s.CommunicationWaitNS < 5*s.CommunicationTransferNS {
			t.Errorf("rank %d waits %+v (wait %d, transfer %d, slept %d)", s.Rank, s.WaitsFor, s.CommunicationWaitNS, s.CommunicationTransferNS, slept)
		}
		r := rep.Ranks[k]
		f := findingOf(r.Findings, "low-gpu-utilization")
		if f == nil || !strings.Contains(f.Message, "for rank 0, the straggler") || !strings.Contains(f.Recommendation, "rank 0") {
			t.Errorf("rank %d: %+v", r.Rank, f)
		}
		if f := findingOf(r.Findings, "communication"); f != nil && (f.Severity > costSeverity(f.Numbers["communication_ratio"]*0.5) || !strings.Contains(f.Recommendation, "rank 0")) {
			t.Errorf("rank %d communication finding %+v", r.Rank, f)
		}
	}
}
