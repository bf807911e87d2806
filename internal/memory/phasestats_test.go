package memory

import (
	"testing"

	"github.com/ptscope/ptscope/internal/snapshot"
	"github.com/ptscope/ptscope/internal/testfixture"
)

// TestPhaseStats: on a real training snapshot every step has forward,
// backward and optimizer rows whose numbers are the replay's: allocated
// just before the first entry and after the last, and the highest in
// between; the step's peak is its highest phase peak.
func TestPhaseStats(t *testing.T) {
	s, err := snapshot.ReadFile(testfixture.Testdata(t, "snapshots", "validate_gpt2tiny_fp32.pickle.xz"))
	if err != nil {
		t.Fatal(err)
	}
	a := Analyze(s, 0, Options{})
	res, alloc := a.Result, a.Replay.Timeline.Allocated
	seen := map[int]map[Phase]bool{}
	for _, p := range res.PhaseStats {
		if p.StartIndex >= p.EndIndex || p.Phase == PhaseUnknown {
			t.Fatalf("bad row %+v", p)
		}
		before := a.Replay.Baseline.Allocated
		if p.StartIndex > 0 {
			before = alloc[p.StartIndex-1]
		}
		var peak int64
		for _, v := range alloc[p.StartIndex:p.EndIndex] {
			peak = max(peak, v)
		}
		if p.AllocatedBeforeBytes != before || p.AllocatedAfterBytes != alloc[p.EndIndex-1] || p.PeakBytes < peak {
			t.Errorf("%+v: before %d, after %d, peak at least %d", p, before, alloc[p.EndIndex-1], peak)
		}
		if seen[p.Step] == nil {
			seen[p.Step] = map[Phase]bool{}
		}
		if seen[p.Step][p.Phase] {
			t.Errorf("step %d has two %v rows", p.Step, p.Phase)
		}
		seen[p.Step][p.Phase] = true
	}
	for _, st := range res.Steps {
		if st.Partial {
			continue
		}
		var top int64
		for _, p := range res.PhaseStats {
			if p.Step == st.Index {
				top = max(top, p.PeakBytes)
			}
		}
		for _, ph := range []Phase{PhaseForward, PhaseBackward, PhaseOptimizer} {
			if !seen[st.Index][ph] {
				t.Errorf("step %d has no %v row", st.Index, ph)
			}
		}
		if top != st.PeakAllocatedBytes {
			t.Errorf("step %d peaks at %d B, its phases at %d B", st.Index, st.PeakAllocatedBytes, top)
		}
	}
}

// A forward-only recording (three inference steps, every entry forward)
// has one forward row per step, each within its step's entries: the review
// found one row for step 0 spanning all three.
func TestPhaseStatsSplitAtSteps(t *testing.T) {
	s, err := snapshot.ReadFile(testfixture.Testdata(t, "snapshots", "gpt2s_fwd_bf16_b4_ctx512.pickle.xz"))
	if err != nil {
		t.Fatal(err)
	}
	res := Analyze(s, 0, Options{}).Result
	if len(res.Steps) != 3 {
		t.Fatalf("%d steps, want 3", len(res.Steps))
	}
	var fwd []PhaseStat
	for _, p := range res.PhaseStats {
		if p.Phase == PhaseForward {
			fwd = append(fwd, p)
		}
	}
	if len(fwd) != len(res.Steps) {
		t.Fatalf("%d forward rows for %d steps: %+v", len(fwd), len(res.Steps), fwd)
	}
	for i, p := range fwd {
		st := res.Steps[i]
		if p.Step != st.Index || p.StartIndex < st.StartIndex || p.EndIndex > st.EndIndex || p.PeakBytes > st.PeakAllocatedBytes {
			t.Errorf("forward row %+v outside step %+v", p, st)
		}
	}
}
