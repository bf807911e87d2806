package load

import (
	"bytes"
	"context"
	"encoding/json"
	"runtime"
	"strings"
	"testing"

	"github.com/ptscope/ptscope/internal/testfixture"
)

// A snapshot above SpillAbove is read and analysed with its columns in a
// spill arena, says so, and gives the report the heap gives: for bare
// snapshots (compressed: read through a stream) and for ptscope run
// bundles, whose inventories give allocations their roles.
func TestSpilledReportMatches(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("spilling is implemented on Linux only")
	}
	spillMin = 1
	defer func() { spillMin = 0 }()
	inputs := []string{snap(t, "leak_gpt2_2l.pickle.xz"), snap(t, "oom_fragmentation.pickle.xz"),
		testfixture.TrainerBundle(t, "hf_trainer"), testfixture.TrainerBundle(t, "fsdp2")}
	for _, in := range inputs {
		heap, err := Snapshots(context.Background(), []string{in}, SnapshotOptions{SpillAbove: -1,
			Notify: func(msg string) { t.Errorf("notified without spilling: %s", msg) }})
		if err != nil {
			t.Fatal(err)
		}
		var notes []string
		spilled, err := Snapshots(context.Background(), []string{in}, SnapshotOptions{SpillAbove: 1,
			Notify: func(msg string) { notes = append(notes, msg) }})
		if err != nil {
			t.Fatal(err)
		}
		if len(notes) == 0 || !strings.Contains(notes[0], "spilled to a temporary file") {
			t.Errorf("%s: notes %q", in, notes)
		}
		for _, m := range spilled.Inputs {
			if a := m.Snapshot.Arena(); a == nil || a.Size() == 0 || a.Err() != nil {
				t.Fatalf("%s: %s was not spilled", in, m.Path)
			}
		}
		for _, m := range heap.Inputs {
			if m.Snapshot.Arena() != nil {
				t.Fatalf("%s: spilled with SpillAbove -1", in)
			}
		}
		x, _ := json.Marshal(heap.Report)
		arenas := spilled.arenas
		if err := spilled.Close(); err != nil || spilled.Inputs != nil {
			t.Fatalf("%s: Close: %v, %d inputs left", in, err, len(spilled.Inputs))
		}
		for _, a := range arenas {
			if a.Size() == 0 {
				t.Fatalf("%s: an empty arena was registered", in)
			}
		}
		runtime.GC() // nothing the report holds may point into the unmapped arenas
		y, _ := json.Marshal(spilled.Report)
		if !bytes.Equal(x, y) {
			t.Errorf("%s: the spilled report differs (%d and %d bytes)", in, len(x), len(y))
		}
	}
}
