package memory

import (
	"bytes"
	"testing"

	"github.com/ptscope/ptscope/internal/snapshot"
	"github.com/ptscope/ptscope/internal/snapshot/snapgen"
)

// TestGeneratedSnapshotShape holds snapgen to what its benchmarks claim: a
// training recording whose steps the analysis finds as on a real one. A step
// is 500-699 forward activations (each alloc, free_requested, free_completed),
// a temporary every 4th activation and every 3rd backward free, and 20-39
// AdamW temporaries: 2,435 to 3,450 entries.
func TestGeneratedSnapshotShape(t *testing.T) {
	var buf bytes.Buffer
	if err := snapgen.Write(&buf, snapgen.Options{Entries: 100_000, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	s, err := snapshot.Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	a := Analyze(s, 0, Options{}).Result
	if a.StepSource != StepsOptimizerFrames || a.Pattern != PatternStable {
		t.Errorf("steps from %v, pattern %v; want optimizer frames, stable", a.StepSource, a.Pattern)
	}
	full := 0
	for _, st := range a.Steps {
		if n := st.EndIndex - st.StartIndex; !st.Partial && (n < 2435 || n > 3450) {
			t.Errorf("%s: %d entries, want 2,435-3,450", st.Name, n)
		}
		if !st.Partial {
			full++
		}
	}
	if full < 100_000/3450-1 || len(a.Steps) > 100_000/2435+2 {
		t.Errorf("%d steps (%d full) in 100,000 entries", len(a.Steps), full)
	}
	if a.Peak.Phase != PhaseForward && a.Peak.Phase != PhaseBackward {
		t.Errorf("peak in %s, want forward or backward (activations)", a.Peak.Phase)
	}
	if act := a.bytesAt(CatActivation); act == 0 {
		t.Errorf("no activations at the peak: %+v", a.Categories)
	}
}
