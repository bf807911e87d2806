package kineto

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ptscope/ptscope/internal/kineto/gen"
)

// cutBatch and cutResult are what a splitter hands downstream.
type cutBatch struct {
	Seq          int
	Offset       int64
	Len          int
	Starts, Ends []int32
}

type cutResult struct {
	Header, Tail              []byte
	BareArray, Done           bool
	Batches                   []cutBatch
	Garbage, Damaged, Dropped int
	Warnings                  []string
	Err                       string
	Off                       int64
}

// parConfig forces the parallel index: k stretches, workers goroutines.
type parConfig struct{ k, workers int }

// cutAll runs a splitter over data (mapped) to the end; with par, the
// index is forced on. indexed is how many bytes the index covered.
func cutAll(data []byte, chunk, maxEvent int, par *parConfig) (r cutResult, indexed int64) {
	var warns []string
	s := &splitter{data: data, chunk: chunk, maxEvent: maxEvent, maxHeader: 1 << 20,
		warn: func(m string) { warns = append(warns, m) }}
	if err := s.start(); err != nil {
		r.Err = err.Error()
		return r, 0
	}
	if par != nil {
		s.parMin = 1
		s.parStretch = max(1, (len(data)-int(s.pendOff))/par.k+1)
		s.parWorkers = par.workers
		s.startIndex()
	}
	x := s.ix
	defer s.stopIndex()
	for {
		b, err := s.next()
		if err != nil {
			if err != io.EOF {
				r.Err = err.Error()
			}
			break
		}
		r.Batches = append(r.Batches, cutBatch{b.seq, b.offset, len(b.buf), b.starts, b.ends})
	}
	r.Header, r.Tail, r.BareArray, r.Done = s.header, s.tail, s.bareArray, s.done
	r.Garbage, r.Damaged, r.Dropped, r.Warnings, r.Off = s.garbage, s.damaged, s.dropped, warns, s.off
	if x != nil {
		indexed = x.limit - x.base
	}
	return r, indexed
}

// diffCut compares the indexed cut of data with the sequential one and
// returns how many bytes the index covered.
func diffCut(t *testing.T, name string, data []byte, chunk, maxEvent int, par parConfig) int64 {
	t.Helper()
	want, _ := cutAll(data, chunk, maxEvent, nil)
	got, indexed := cutAll(data, chunk, maxEvent, &par)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s, chunk %d, maxEvent %d, %+v: indexed cut differs from the sequential one:\n%s", name, chunk, maxEvent, par, firstDiff(got, want))
	}
	return indexed
}

func firstDiff(got, want cutResult) string {
	if len(got.Batches) != len(want.Batches) {
		return fmt.Sprintf("%d batches, want %d", len(got.Batches), len(want.Batches))
	}
	for i := range got.Batches {
		if !reflect.DeepEqual(got.Batches[i], want.Batches[i]) {
			g, w := got.Batches[i], want.Batches[i]
			return fmt.Sprintf("batch %d: seq %d off %d len %d events %d, want seq %d off %d len %d events %d",
				i, g.Seq, g.Offset, g.Len, len(g.Starts), w.Seq, w.Offset, w.Len, len(w.Starts))
		}
	}
	got.Batches, want.Batches = nil, nil
	return fmt.Sprintf("%+v\nwant %+v", got, want)
}

// splitInputs are real and generated traces, whole.
func splitInputs(t *testing.T) map[string][]byte {
	in := map[string][]byte{}
	if b, err := os.ReadFile(fixture(t, tinyStackTrace)); err == nil {
		in["with_stack"] = b
	}
	in["gpt2"] = readGz(t, fixture(t, gpt2Trace))
	for _, p := range []string{"ddp1.pt.trace.json.gz", "fsdp/rank0.pt.trace.json.gz", "dataloader.pt.trace.json.gz"} {
		in[p] = readGz(t, filepath.Join("..", "..", "testdata", "traces", p))
	}
	var buf bytes.Buffer
	if _, err := (gen.Scenario{Steps: 3, Layers: 4, KernelNS: 50_000, OpNS: 10_000, Memory: true, Backend: "nccl", Comm: gen.CommDDP, CommNS: 30_000}).Write(&buf); err != nil {
		t.Fatal(err)
	}
	in["synth"] = buf.Bytes()
	if src, ok := in["with_stack"]; ok {
		var g bytes.Buffer
		if _, err := gen.Generate(&g, src, 12<<20); err != nil {
			t.Fatal(err)
		}
		in["generated"] = g.Bytes()
	}
	return in
}

// TestSplitIndexMatchesSequential: the parallel index cuts exactly the
// batches the sequential scan cuts, and covers most of a clean trace.
func TestSplitIndexMatchesSequential(t *testing.T) {
	t.Parallel()
	for name, data := range splitInputs(t) {
		for _, chunk := range []int{4096, 100_000, 1 << 20} {
			for _, k := range []int{2, 3, 8} {
				indexed := diffCut(t, name, data, chunk, 16<<20, parConfig{k, 1 + k%3 + 1})
				// all but the last stretch of a clean trace is indexed
				if min := int64(len(data)) * int64(k-1) / int64(k) * 9 / 10; len(data) > 100_000 && indexed < min {
					t.Errorf("%s, chunk %d, k %d: index covered %d of %d bytes", name, chunk, k, indexed, len(data))
				}
			}
		}
	}
}

// TestSplitIndexDamage: damage anywhere ends the index where it can no
// longer prove the sequential state; the batches stay identical.
func TestSplitIndexDamage(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(fixture(t, tinyStackTrace))
	if err != nil {
		t.Skip("fixture not available")
	}
	edits := map[string]func(b []byte, at int) []byte{
		"garbage":    func(b []byte, at int) []byte { return splice(b, at, "x") },
		"newline":    func(b []byte, at int) []byte { return splice(b, bytes.IndexByte(b[at:], '"')+at+1, "\n") },
		"quote":      func(b []byte, at int) []byte { return splice(b, at, `"`) },
		"open brace": func(b []byte, at int) []byte { return splice(b, at, "{") },
		"close":      func(b []byte, at int) []byte { return splice(b, at, "}") },
		"bracket":    func(b []byte, at int) []byte { return splice(b, at, "]") },
		"deep":       func(b []byte, at int) []byte { return splice(b, at, strings.Repeat("[", 70)) },
		"backslash":  func(b []byte, at int) []byte { return splice(b, at, `\`) },
		"truncated":  func(b []byte, at int) []byte { return b[:at] },
		"seam in string": func(b []byte, at int) []byte {
			return splice(b, bytes.IndexByte(b[at:], '"')+at+1, "\n  {")
		},
		"nested seam": func(b []byte, at int) []byte {
			return splice(b, bytes.Index(b[at:], []byte(`"args": {`))+at+len(`"args":`), "\n  {\"a\": 1},")
		},
		"compact": func(b []byte, at int) []byte { return bytes.ReplaceAll(b, []byte("\n  {"), []byte("{")) },
	}
	rng := rand.New(rand.NewPCG(1, 2))
	partly := 0 // cuts that went from the index to the sequential scan
	for name, edit := range edits {
		for range 4 {
			at := len(data)/10 + rng.IntN(len(data)*8/10)
			d := edit(bytes.Clone(data), at)
			for _, k := range []int{3, 8} {
				if n := diffCut(t, name, d, 65536, 16<<20, parConfig{k, 3}); n > 0 && n < int64(at) {
					partly++
				}
			}
		}
	}
	if partly < len(edits) {
		t.Errorf("only %d damaged cuts were partly indexed", partly)
	}
	// events of maxEvent bytes or more are dropped by the sequential scan
	for _, maxEvent := range []int{300, 700, 2000} {
		diffCut(t, "small maxEvent", data, 65536, maxEvent, parConfig{8, 4})
	}
}

func splice(b []byte, at int, s string) []byte {
	return append(b[:at:at], append([]byte(s), b[at:]...)...)
}

// TestReadFileIndexed: ReadFile on a mapped trace above the index's
// threshold gives what Read gives.
func TestReadFileIndexed(t *testing.T) {
	if testing.Short() {
		t.Skip("generates a 40 MB trace")
	}
	t.Parallel()
	src, err := os.ReadFile(fixture(t, tinyStackTrace))
	if err != nil {
		t.Skip("fixture not available")
	}
	var g bytes.Buffer
	if _, err := gen.Generate(&g, src, parMinArray+8<<20); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "big.json")
	if err := os.WriteFile(p, g.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	opt := Options{Workers: 2}
	want, err := Read(t.Context(), bytes.NewReader(g.Bytes()), opt)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ReadFile(t.Context(), p, opt)
	if err != nil {
		t.Fatal(err)
	}
	want.Path = p
	if !reflect.DeepEqual(got, want) {
		t.Fatal("ReadFile (indexed) differs from Read")
	}
}

func FuzzSplitIndex(f *testing.F) {
	f.Add([]byte("{\"traceEvents\": [\n  {\"ph\": \"X\", \"ts\": 1},\n  {\"a\": [1, {\"b\": \"c\\\"\"}]},\n  {\"ph\": \"i\"}\n], \"x\": 1}"), uint16(16), uint8(3), uint16(0))
	f.Add([]byte("[\n  {\"a\": 1},\n  {\"b\": \"\n  {\"},\n  {\"c\": 3}\n]"), uint16(7), uint8(4), uint16(9))
	f.Add([]byte("{\"traceEvents\": [\n  {\"a\": 1},\n  x{\"b\": 2},\n  {\"c\": {\"d\": 3}}"), uint16(5), uint8(8), uint16(12))
	if p := fixturePath(f, tinyStackTrace); p != "" {
		if b, err := readFileHead(p, 8192); err == nil {
			f.Add(b, uint16(512), uint8(8), uint16(0))
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, chunk uint16, k uint8, maxEvent uint16) {
		me := 16 << 20
		if maxEvent > 0 {
			me = int(maxEvent)
		}
		diffCut(t, "fuzz", data, int(chunk%4096)+1, me, parConfig{int(k%8) + 1, int(k/8%3) + 2})
	})
}
