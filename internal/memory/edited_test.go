package memory

import (
	"testing"

	"github.com/ptscope/ptscope/internal/snapshot"
)

// These tests edit the real GPT-2 training fixture (3 AdamW steps) to
// produce situations the fixtures do not contain.

// keepFrom drops the trace entries before i, as a wrapped ring buffer does.
func keepFrom(tr *snapshot.Trace, i int) {
	tr.Action, tr.Addr, tr.Size = tr.Action[i:], tr.Addr[i:], tr.Size[i:]
	tr.Stream, tr.TimeUS, tr.Stack = tr.Stream[i:], tr.TimeUS[i:], tr.Stack[i:]
	tr.CompileContext, tr.UserMetadata = tr.CompileContext[i:], tr.UserMetadata[i:]
}

func TestTruncationDetected(t *testing.T) {
	s := fixture(t, "gpt2s_train_fp32_b4_ctx512.pickle")
	full := Analyze(s, 0, Options{}).Result
	if full.Truncated {
		t.Fatal("the full fixture is not truncated")
	}
	// A ring buffer of max_entries=5000 keeps the last 5000 entries.
	tr := s.Trace(0)
	keepFrom(tr, tr.Len()-5000)
	a := Analyze(s, 0, Options{}).Result
	if !a.Truncated || a.UnmatchedFrees == 0 || !hasFinding(a, "truncated") {
		t.Errorf("truncated=%v unmatched=%d findings=%v", a.Truncated, a.UnmatchedFrees, a.Findings)
	}
	// Recording that merely started late is not called truncated: the same
	// cut at a length that no one would pick as max_entries.
	s3 := fixture(t, "gpt2s_train_fp32_b4_ctx512.pickle")
	keepFrom(s3.Trace(0), s3.Trace(0).Len()-5003)
	if c := Analyze(s3, 0, Options{}).Result; c.Truncated || c.UnmatchedFrees == 0 || c.TruncationEvidence == "" {
		t.Errorf("late start: truncated=%v unmatched=%d evidence=%q", c.Truncated, c.UnmatchedFrees, c.TruncationEvidence)
	}
	// The end state stays exact: it comes from the final segments.
	if a.End.AllocatedBytes != full.End.AllocatedBytes {
		t.Errorf("end %d, want %d", a.End.AllocatedBytes, full.End.AllocatedBytes)
	}

	// The allocator's own overflow flag (newer PyTorch) is enough.
	s2 := fixture(t, "gpt2s_train_fp32_b4_ctx512.pickle")
	s2.Settings.OverflowKnown, s2.Settings.TraceOverflowed = true, true
	if b := Analyze(s2, 0, Options{}).Result; !b.Truncated {
		t.Error("trace_alloc_overflowed not reported")
	}
}

// One step allocating an extra 2 GiB for a moment at its peak (5.15 GiB)
// is a spike; the others stay as they were.
func TestSpikeDetected(t *testing.T) {
	s := fixture(t, "gpt2s_train_fp32_b4_ctx512.pickle")
	an := Analyze(s, 0, Options{})
	base := an.Result
	if base.Pattern != PatternStable || len(base.Steps) < 3 {
		t.Fatalf("fixture pattern %q with %d steps", base.Pattern, len(base.Steps))
	}
	at := an.Phases.Steps[1].PeakIdx
	tr := s.Trace(0)
	insert := func(i int, a snapshot.Action) {
		tr.Action = append(tr.Action[:i], append([]snapshot.Action{a}, tr.Action[i:]...)...)
		tr.Addr = append(tr.Addr[:i], append([]uint64{0x1000}, tr.Addr[i:]...)...)
		tr.Size = append(tr.Size[:i], append([]int64{2 << 30}, tr.Size[i:]...)...)
		tr.Stream = append(tr.Stream[:i], append([]uint32{0}, tr.Stream[i:]...)...)
		tr.TimeUS = append(tr.TimeUS[:i], append([]int64{tr.TimeUS[i]}, tr.TimeUS[i:]...)...)
		tr.Stack = append(tr.Stack[:i], append([]snapshot.StackID{0}, tr.Stack[i:]...)...)
		tr.CompileContext = append(tr.CompileContext[:i], append([]uint32{0}, tr.CompileContext[i:]...)...)
		tr.UserMetadata = append(tr.UserMetadata[:i], append([]uint32{0}, tr.UserMetadata[i:]...)...)
	}
	insert(at+1, snapshot.ActionFreeCompleted)
	insert(at+1, snapshot.ActionFreeRequested)
	insert(at+1, snapshot.ActionAlloc)
	a := Analyze(s, 0, Options{}).Result
	if a.Pattern != PatternSpike || !hasFinding(a, "spike") {
		t.Errorf("pattern %q, findings %v", a.Pattern, a.Findings)
	}
	if got, want := a.Steps[1].PeakAllocatedBytes, base.Steps[1].PeakAllocatedBytes+(2<<30); got != want {
		t.Errorf("step 1 peak %d, want %d", got, want)
	}
	if a.Steps[2].PeakAllocatedBytes != base.Steps[2].PeakAllocatedBytes {
		t.Errorf("step 2 peak changed: %d vs %d", a.Steps[2].PeakAllocatedBytes, base.Steps[2].PeakAllocatedBytes)
	}
}

// Without record_function annotations, steps come from the optimizer's
// frames: the same 3 full steps as with the annotations.
func TestStepsFromOptimizerFrames(t *testing.T) {
	s := fixture(t, "gpt2s_train_fp32_b4_ctx512.pickle")
	with := Analyze(s, 0, Options{}).Result
	s.Annotations = nil
	a := Analyze(s, 0, Options{}).Result
	if a.StepSource != StepsOptimizerFrames {
		t.Fatalf("step source %v", a.StepSource)
	}
	full := 0
	for _, st := range a.Steps {
		if !st.Partial {
			full++
		}
	}
	if full != 3 || a.Pattern != PatternStable {
		t.Errorf("%d full steps, pattern %q", full, a.Pattern)
	}
	// Categories hardly move without the annotations.
	if got, want := a.Categories[0], with.Categories[0]; got != want {
		t.Errorf("top category %+v, with annotations %+v", got, want)
	}
}

func hasFinding(a *Result, id string) bool {
	for _, f := range a.Findings {
		if f.ID == id {
			return true
		}
	}
	return false
}
