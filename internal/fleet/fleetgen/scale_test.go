package fleetgen

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/ptscope/ptscope/internal/finding"
	"github.com/ptscope/ptscope/internal/input"
	"github.com/ptscope/ptscope/internal/load"
	"github.com/ptscope/ptscope/internal/memory"
	"github.com/ptscope/ptscope/internal/testfixture"
)

func readSnapshot(t testing.TB, name string) []byte {
	t.Helper()
	r, err := input.NewSource(0, nil, nil).Open(testfixture.Testdata(t, "snapshots", name))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func analyze(t *testing.T, data []byte) *memory.Result {
	t.Helper()
	set, err := load.SnapshotBytes(context.Background(), "x", data, load.SnapshotOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return set.Report.Inputs[0].Devices[0]
}

// Scaling a real snapshot scales what the analysis finds: every block and
// segment size and the peak by the size factor, the steps' durations by the
// time factor, with the allocator's state still consistent (no unmatched
// frees, the same entries and steps).
func TestScaleSnapshot(t *testing.T) {
	src := readSnapshot(t, "validate_gpt2tiny_fp32.pickle.xz")
	base := analyze(t, src)
	for _, c := range []struct{ size, time float64 }{{1, 1}, {1.25, 1}, {0.8, 1.5}, {2, 0.5}, {0.99, 1.01}} {
		var out bytes.Buffer
		size, tm := ScaleOf(c.size), ScaleOf(c.time)
		if err := ScaleSnapshot(&out, src, size, tm); err != nil {
			t.Fatal(err)
		}
		if c.size == 1 && c.time == 1 && out.Len() > len(src)+len(src)/50 {
			t.Errorf("identity rewrite grew %d -> %d bytes", len(src), out.Len())
		}
		got := analyze(t, out.Bytes())
		if finding.Has(got.Findings, "invalid-entries") {
			t.Errorf("%v: the scaled snapshot has malformed entries", c)
		}
		if got.Entries != base.Entries || len(got.Steps) != len(base.Steps) || got.UnmatchedFrees != base.UnmatchedFrees || got.Pattern != base.Pattern {
			t.Fatalf("%v: entries %d/%d, steps %d/%d, unmatched %d/%d, pattern %s/%s", c, got.Entries, base.Entries,
				len(got.Steps), len(base.Steps), got.UnmatchedFrees, base.UnmatchedFrees, got.Pattern, base.Pattern)
		}
		// Reserved memory is whole segments: exact. Allocated memory
		// rounds some requested sizes up to 512 bytes after they are scaled.
		if want := base.Peak.ReservedBytes * size.Num / ScaleDen; got.Peak.ReservedBytes != want {
			t.Errorf("%v: reserved peak %d, want %d", c, got.Peak.ReservedBytes, want)
		}
		if want := float64(base.Peak.AllocatedBytes) * size.Float(); abs(float64(got.Peak.AllocatedBytes)-want) > want*1e-4 {
			t.Errorf("%v: allocated peak %d, want %.0f", c, got.Peak.AllocatedBytes, want)
		}
		for i, st := range got.Steps {
			want := float64(base.Steps[i].DurationNS) * tm.Float()
			if abs(float64(st.DurationNS)-want) > 2000 { // time_us rounds to 1 us at each end
				t.Errorf("%v: step %d lasts %d ns, want %.0f", c, i, st.DurationNS, want)
			}
		}
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

func TestScaleSnapshotErrors(t *testing.T) {
	src := readSnapshot(t, "oom_capacity.pickle.xz")
	for _, bad := range [][]byte{nil, []byte("{}"), src[:len(src)/2], {0x80, 0x04, 'I', '1', '\n', '.'}} {
		if err := ScaleSnapshot(io.Discard, bad, One, One); err == nil {
			t.Errorf("%q...: no error", bad[:min(len(bad), 8)])
		}
	}
}

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	src := readSnapshot(t, "oom_fragmentation.pickle.xz")
	special := readSnapshot(t, "oom_capacity.pickle.xz")
	plan, err := Write(dir, Options{Ranks: 3, Snapshot: src, Special: map[int][]byte{2: special}, Traces: true, TraceSteps: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan) != 3 || plan[0].Size != ScaleOf(1.25) || !plan[2].Special || plan[2].Size != One {
		t.Fatalf("plan %+v", plan)
	}
	got, err := os.ReadFile(filepath.Join(dir, "rank2", SnapshotName))
	if err != nil || !bytes.Equal(got, special) {
		t.Errorf("special rank: %v, %d bytes", err, len(got))
	}
	for r := range 3 {
		if _, err := os.Stat(filepath.Join(dir, "rank"+string(rune('0'+r)), TraceName(r))); err != nil {
			t.Error(err)
		}
	}
}
