package memory

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/ptscope/ptscope/internal/snapshot"
)

func fixture(t testing.TB, name string) *snapshot.Snapshot {
	t.Helper()
	p := filepath.Join("..", "..", "..", "shared", "fixtures", name)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("fixture %s not present", name)
	}
	s, err := snapshot.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Ground truth from the fixtures README: torch.cuda.max_memory_allocated and
// memory_allocated read in the process that wrote the snapshot.
func TestPeakMatchesTorch(t *testing.T) {
	cases := []struct {
		file         string
		maxAllocated int64
		endAllocated int64 // 0: not measured
	}{
		{"gpt2s_train_fp32_b4_ctx512.pickle", 5538270208, 1564872704},
		{"gpt2s_fwd_bf16_b4_ctx512.pickle", 1111965696, 0},
	}
	for _, c := range cases {
		s := fixture(t, c.file)
		a := Analyze(s, 0, Options{})
		got := a.Peak.AllocatedBytes
		rel := math.Abs(float64(got-c.maxAllocated)) / float64(c.maxAllocated)
		t.Logf("%s: peak %d vs torch %d (%.3f%%), end %d", c.file, got, c.maxAllocated, 100*rel, a.End.AllocatedBytes)
		if rel > 0.01 {
			t.Errorf("%s: peak allocated %d is %.2f%% from torch's %d", c.file, got, 100*rel, c.maxAllocated)
		}
		// The end of the replay equals the final segments' active blocks exactly.
		var active int64
		for _, g := range s.DeviceSegments(0) {
			for _, b := range g.Blocks {
				if b.State == snapshot.BlockActiveAllocated {
					active += b.Size
				}
			}
		}
		last := a.Replay.Timeline.Allocated[len(a.Replay.Timeline.Allocated)-1]
		if last != active || a.End.AllocatedBytes != active {
			t.Errorf("%s: replay ends at %d, final blocks hold %d", c.file, last, active)
		}
		if c.endAllocated != 0 && active != c.endAllocated {
			t.Errorf("%s: final active blocks %d, torch memory_allocated %d", c.file, active, c.endAllocated)
		}
	}
}

// The per-category series must add up to the allocated timeline exactly at
// every sampled entry.
func TestCategoryTimelineSumsToAllocated(t *testing.T) {
	s := fixture(t, "gpt2s_train_fp32_b4_ctx512.pickle")
	a := Analyze(s, 0, Options{})
	xs, layers := a.Replay.CategoryTimeline(500)
	for i, x := range xs {
		var sum int64
		for c := range layers {
			sum += layers[c][i]
		}
		if sum != a.Replay.Timeline.Allocated[x] {
			t.Fatalf("entry %d: categories sum to %d, allocated %d", x, sum, a.Replay.Timeline.Allocated[x])
		}
	}
}
