package memory

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/ptscope/ptscope/internal/input"
	"github.com/ptscope/ptscope/internal/snapshot"
	"github.com/ptscope/ptscope/internal/snapshot/snapgen"
	"github.com/ptscope/ptscope/internal/spillmem"
)

// TestSpilledAnalysisMatches reads every snapshot fixture, and a generated
// snapshot large enough for the parallel decoder, twice: on the heap and
// with every column (the reader's and the analysis's) in a spill arena
// whose pages are dropped as the work goes on. The analyses must agree
// in every field of the result, the replay and the phases.
func TestSpilledAnalysisMatches(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("spilling is implemented on Linux only")
	}
	dir := t.TempDir()
	var files []string
	// Uncompressed copies, so that the larger ones take the mapped,
	// parallel path as big snapshots do.
	names, _ := filepath.Glob(filepath.Join("..", "..", "testdata", "snapshots", "*.pickle.xz"))
	if len(names) < 8 {
		t.Fatalf("%d snapshot fixtures", len(names))
	}
	for _, name := range names {
		r, err := input.NewSource(0, nil, nil).Open(name)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, strings.TrimSuffix(filepath.Base(name), ".xz"))
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(f, r); err != nil {
			t.Fatal(err)
		}
		r.Close()
		f.Close()
		files = append(files, p)
	}
	gen := filepath.Join(dir, "generated.pickle")
	f, err := os.Create(gen)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(f)
	if err := snapgen.Write(w, snapgen.Options{Entries: 120000, Devices: 2, SegmentEvery: 500, Seed: 7}); err != nil {
		t.Fatal(err)
	}
	w.Flush()
	f.Close()
	files = append(files, gen)

	for _, p := range files {
		t.Run(filepath.Base(p), func(t *testing.T) {
			t.Parallel()
			want, err := snapshot.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			a, err := spillmem.New(t.TempDir(), 0)
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			a.SetMin(1)
			got, err := snapshot.ReadFileWith(p, snapshot.ReadOptions{Arena: a})
			if err != nil {
				t.Fatal(err)
			}
			if got.Arena() != a {
				t.Fatal("the snapshot does not name its arena")
			}
			spilled := a.Size()
			entries := 0
			for _, tr := range want.Traces {
				entries += tr.Len()
			}
			if entries > 0 && spilled < int64(entries)*8 {
				t.Fatalf("%d entries, %d bytes in the arena", entries, spilled)
			}
			a.Trim() // what the arena keeps must not depend on what stays resident
			for d, tr := range want.Traces {
				g := &got.Traces[d]
				if !slices.Equal(tr.Action, g.Action) || !slices.Equal(tr.Addr, g.Addr) || !slices.Equal(tr.Size, g.Size) ||
					!slices.Equal(tr.Stream, g.Stream) || !slices.Equal(tr.TimeUS, g.TimeUS) || !slices.Equal(tr.Stack, g.Stack) ||
					!slices.Equal(tr.CompileContext, g.CompileContext) || !slices.Equal(tr.UserMetadata, g.UserMetadata) ||
					tr.HasTime != g.HasTime || tr.Invalid != g.Invalid {
					t.Fatalf("device %d: the spilled trace differs", d)
				}
			}
			devs := want.Devices()
			if !slices.Equal(devs, got.Devices()) {
				t.Fatalf("devices %v, spilled %v", devs, got.Devices())
			}
			for _, d := range devs {
				x, y := Analyze(want, d, Options{}), Analyze(got, d, Options{})
				a.Trim()
				jx, _ := json.Marshal(x.Result)
				jy, _ := json.Marshal(y.Result)
				if !bytes.Equal(jx, jy) {
					t.Errorf("device %d: the spilled analysis differs (%d and %d bytes of JSON)", d, len(jx), len(jy))
				}
				if !slices.Equal(x.Replay.Allocs, y.Replay.Allocs) || !slices.Equal(x.Replay.Timeline.Allocated, y.Replay.Timeline.Allocated) ||
					!slices.Equal(x.Replay.Timeline.Requested, y.Replay.Timeline.Requested) ||
					!slices.Equal(x.Replay.Timeline.Active, y.Replay.Timeline.Active) ||
					!slices.Equal(x.Replay.Timeline.Reserved, y.Replay.Timeline.Reserved) ||
					!slices.Equal(x.Phases.Of, y.Phases.Of) || !slices.Equal(x.Phases.StepOf, y.Phases.StepOf) {
					t.Errorf("device %d: the spilled replay or phases differ", d)
				}
			}
			if err := a.Err(); err != nil {
				t.Fatal(err)
			}
			if a.Size() <= spilled && entries > 0 {
				t.Errorf("the analysis placed nothing in the arena (%d bytes before it, %d after)", spilled, a.Size())
			}
		})
	}
}
