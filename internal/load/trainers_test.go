package load

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/ptscope/ptscope/internal/memory"
	"github.com/ptscope/ptscope/internal/testfixture"
)

// trainer is one real trainer bundle (testdata/bundles/trainers) analysed
// as `ptscope analyze` does, with the facts its process measured.
type trainer struct {
	name  string
	dir   string
	facts testfixture.Facts
	set   *SnapshotSet
}

// analyzeTrainer extracts and analyses one trainer bundle.
func analyzeTrainer(t *testing.T, name string) *trainer {
	t.Helper()
	dir := testfixture.TrainerBundle(t, name)
	set, err := Snapshots(context.Background(), []string{dir}, SnapshotOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return &trainer{name: name, dir: dir, facts: testfixture.ReadFacts(t, dir), set: set}
}

// result returns the analysis of the named snapshot of rank 0.
func (tr *trainer) result(t *testing.T, snapshot string) *memory.Result {
	t.Helper()
	for _, in := range tr.set.Report.Inputs {
		if filepath.Base(in.Path) == snapshot && len(in.Devices) == 1 {
			return in.Devices[0]
		}
	}
	t.Fatalf("%s: no analysed %s", tr.name, snapshot)
	return nil
}

// mainSnapshot is the snapshot that covers the whole run: the OOM's for
// the trainer that ran out of memory, else the one written at exit.
func (tr *trainer) mainSnapshot() string {
	if tr.name == "oom" {
		return "snapshot_oom.pickle"
	}
	return "snapshot_end.pickle"
}

// The peak of every real trainer's snapshot is the process's own
// torch.cuda.max_memory_allocated to the byte: large blocks are counted as
// the allocator handed them out (unsplit remainders included), not as the
// rounded requests the trace records.
func TestTrainerPeaks(t *testing.T) {
	for _, name := range testfixture.TrainerBundles {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tr := analyzeTrainer(t, name)
			r := tr.result(t, tr.mainSnapshot())
			if r.Truncated {
				t.Fatalf("trace truncated: %s", r.TruncationEvidence)
			}
			if got, want := r.Peak.AllocatedBytes, tr.facts.MaxMemoryAllocated; got != want {
				t.Errorf("peak %d, the process's max_memory_allocated %d (%+.3f%%)", got, want, 100*(float64(got)/float64(want)-1))
			}
		})
	}
}
