package snapshot

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"testing"

	"github.com/ptscope/ptscope/internal/input"
	"github.com/ptscope/ptscope/internal/snapshot/snapgen"
)

// sequential decodes with the streaming sequential reader (the oracle).
func sequential(data []byte) (*Snapshot, error) {
	return read(bytes.NewReader(data), 0, 0)
}

// parallelRead decodes with the parallel reader, splitting even small lists.
func parallelRead(data []byte, workers int) (*Snapshot, int, error) {
	s, env, err := readPickleParallelEnv(data, workers, 0, false)
	if workers > 1 && env.regions > 0 && len(env.frames) >= 8 && env.stretches < 2 {
		return s, env.regions, errors.New("the list was decoded as one stretch")
	}
	return s, env.regions, err
}

func fixtureBytes(t testing.TB) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	var paths []string
	for _, g := range []string{filepath.Join("..", "..", "..", "shared", "fixtures", "*.pickle"), filepath.Join("..", "..", "testdata", "snapshots", "*.pickle.xz")} {
		m, _ := filepath.Glob(g)
		paths = append(paths, m...)
	}
	for _, p := range paths {
		r, err := input.NewSource(0, nil, nil).Open(p)
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(r)
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(p)] = data
	}
	return out
}

func TestParallelMatchesSequentialFixtures(t *testing.T) {
	fx := fixtureBytes(t)
	if len(fx) == 0 {
		t.Skip("no fixtures")
	}
	for name, data := range fx {
		t.Run(name, func(t *testing.T) {
			want, err := sequential(data)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range []int{1, 2, 3, 8} {
				got, regions, err := parallelRead(data, w)
				if err != nil {
					t.Fatalf("workers %d: %v", w, err)
				}
				want.InputBytes = got.InputBytes
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("workers %d: parallel result differs from sequential (%s)", w, diff(got, want))
				}
				if data[1] >= 4 && want.Trace(0).Len() > 2000 && regions == 0 {
					t.Errorf("workers %d: the trace was not decoded in parallel", w)
				}
			}
		})
	}
}

// diff names the first part that differs.
func diff(a, b *Snapshot) string {
	switch {
	case !reflect.DeepEqual(a.Frames, b.Frames):
		return "frames"
	case !reflect.DeepEqual(a.Stacks, b.Stacks):
		return "stacks"
	case !reflect.DeepEqual(a.Strings, b.Strings):
		return "strings"
	case !reflect.DeepEqual(a.Streams, b.Streams):
		return "streams"
	case len(a.Traces) != len(b.Traces):
		return "traces"
	}
	for i := range a.Traces {
		x, y := a.Traces[i], b.Traces[i]
		for name, eq := range map[string]bool{
			"action": reflect.DeepEqual(x.Action, y.Action), "addr": reflect.DeepEqual(x.Addr, y.Addr),
			"size": reflect.DeepEqual(x.Size, y.Size), "stream": reflect.DeepEqual(x.Stream, y.Stream),
			"time": reflect.DeepEqual(x.TimeUS, y.TimeUS), "stack": reflect.DeepEqual(x.Stack, y.Stack),
			"cc": reflect.DeepEqual(x.CompileContext, y.CompileContext), "um": reflect.DeepEqual(x.UserMetadata, y.UserMetadata),
		} {
			if !eq {
				return "trace " + name
			}
		}
	}
	return "other fields"
}

func TestReadFileUsesSameResult(t *testing.T) {
	p := fixture(t, "gpt2s_train_fp32_b4_ctx512.pickle")
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	a, err := ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b, err := sequential(data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("ReadFile differs from the sequential reader: %s", diff(a, b))
	}
}

func TestParallelMatchesSequentialGenerated(t *testing.T) {
	for _, c := range []struct {
		entries int
		seed    uint64
		devices int
		segs    int
	}{{3000, 1, 1, 0}, {20000, 2, 1, 0}, {60000, 3, 1, 997}, {150000, 4, 1, 0}, {90000, 5, 2, 1500}, {120000, 6, 3, 700}} {
		var buf bytes.Buffer
		if err := snapgen.Write(&buf, snapgen.Options{Entries: c.entries, Seed: c.seed, Devices: c.devices, SegmentEvery: c.segs}); err != nil {
			t.Fatal(err)
		}
		data := buf.Bytes()
		want, err := sequential(data)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range []int{1, 2, 5, 16} {
			got, regions, err := parallelRead(data, w)
			if err != nil {
				t.Fatalf("%d entries, workers %d: %v", c.entries, w, err)
			}
			if regions != c.devices {
				t.Errorf("%d entries, workers %d: %d lists decoded in parallel, want %d", c.entries, w, regions, c.devices)
			}
			if len(want.Traces) != c.devices {
				t.Fatalf("%d devices in the snapshot, want %d", len(want.Traces), c.devices)
			}
			want.InputBytes = got.InputBytes
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%d entries, workers %d: parallel result differs (%s)", c.entries, w, diff(got, want))
			}
		}
	}
}

// TestReadFileMapped covers the memory-mapped parallel path of ReadFile
// (large uncompressed pickles) against the sequential reader.
func TestReadFileMapped(t *testing.T) {
	var buf bytes.Buffer
	if err := snapgen.Write(&buf, snapgen.Options{Entries: 60000, Seed: 11, Devices: 2, SegmentEvery: 900}); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	if len(data) < 2*minRegion {
		t.Fatalf("generated %d bytes, too small for the mapped path", len(data))
	}
	p := filepath.Join(t.TempDir(), "big.pickle")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	got, ok, err := readMapped(p, nil, nil)
	if !ok || err != nil {
		t.Fatalf("readMapped: ok %v, err %v", ok, err)
	}
	want, err := sequential(data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("mapped read differs (%s)", diff(got, want))
	}
	viaFile, err := ReadFile(p)
	if err != nil || !reflect.DeepEqual(viaFile, want) {
		t.Fatalf("ReadFile: %v", err)
	}
}

// TestMappedFileCutShort: a file truncated while mapped gives an error, not
// a crash.
func TestMappedFileCutShort(t *testing.T) {
	var buf bytes.Buffer
	if err := snapgen.Write(&buf, snapgen.Options{Entries: 40000, Seed: 12}); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "cut.pickle")
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	data, unmap, err := mapFile(f, buf.Len(), 2)
	if err != nil {
		t.Fatal(err)
	}
	defer unmap()
	if err := os.Truncate(p, int64(buf.Len()/3)); err != nil {
		t.Fatal(err)
	}
	if s, err := decodeMapped(data, nil, nil); err == nil && runtime.GOOS == "linux" {
		t.Fatalf("decoded %d entries of a file cut to a third", s.Trace(0).Len())
	}
}

// TestParallelInPlace checks that the workers' rows land in the builder's
// columns without a copy when the scan counted them right (entries whose
// first opcodes straddle a FRAME header included), and that a wrong count
// (a window too small, or too large, shifting the later ones) still gives
// the sequential result, through the copying merge.
func TestParallelInPlace(t *testing.T) {
	fx := fixtureBytes(t)
	if len(fx) == 0 {
		t.Skip("no fixtures")
	}
	defer func() { rowSkew = 0 }()
	checked := 0
	for name, data := range fx {
		if data[1] < 4 {
			continue
		}
		want, err := sequential(data)
		if err != nil {
			t.Fatal(err)
		}
		for _, skew := range []int{0, -1, -100, 7} {
			rowSkew = skew
			got, env, err := readPickleParallelEnv(data, 2, 0, false)
			if err != nil {
				t.Fatalf("%s skew %d: %v", name, skew, err)
			}
			want.InputBytes = got.InputBytes
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%s skew %d: parallel result differs from sequential (%s)", name, skew, diff(got, want))
			}
			if env.regions == 0 {
				continue // a list too short to split
			}
			checked++
			if skew == 0 && env.inPlace != env.regions {
				t.Errorf("%s: %d of %d regions merged in place, want all", name, env.inPlace, env.regions)
			}
			if skew < 0 && env.inPlace != 0 {
				t.Errorf("%s skew %d: %d regions merged in place with a wrong row count", name, skew, env.inPlace)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no fixture was decoded in parallel")
	}
}
