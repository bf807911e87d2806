package kineto

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	json "github.com/goccy/go-json"
	"github.com/klauspost/compress/gzip"

	"github.com/ptscope/ptscope/internal/input"
	"github.com/ptscope/ptscope/internal/kineto/gen"
)

var (
	bigOnce         sync.Once
	bigPlain, bigGz []byte
)

// bigTrace generates a 128 MB trace from the real with_stack fixture (the
// event mix of a GPT-2 with_stack trace) and its gzip form, once.
func bigTrace(b *testing.B) ([]byte, []byte) {
	p := fixturePath(b, tinyStackTrace)
	if p == "" {
		b.Skip("fixture not available")
	}
	bigOnce.Do(func() {
		src, err := os.ReadFile(p)
		if err != nil {
			return
		}
		var buf bytes.Buffer
		if _, err := gen.Generate(&buf, src, 128<<20); err != nil {
			return
		}
		bigPlain = buf.Bytes()
		var z bytes.Buffer
		w, _ := gzip.NewWriterLevel(&z, gzip.DefaultCompression)
		w.Write(bigPlain)
		w.Close()
		bigGz = z.Bytes()
	})
	if bigPlain == nil {
		b.Fatal("generating the trace failed")
	}
	return bigPlain, bigGz
}

func BenchmarkReadWithStack(b *testing.B) {
	plain, _ := bigTrace(b)
	benchReads(b, plain, func() (io.Reader, func()) { return bytes.NewReader(plain), nil })
}

// benchReads times Read of the readers open returns (and calls their
// close, when not nil), at len(plain) bytes a read.
func benchReads(b *testing.B, plain []byte, open func() (io.Reader, func())) {
	b.SetBytes(int64(len(plain)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r, done := open()
		if _, err := Read(context.Background(), r, Options{}); err != nil {
			b.Fatal(err)
		}
		if done != nil {
			done()
		}
	}
}

// benchFile writes plain to a temporary file and returns its path.
func benchFile(b *testing.B, plain []byte) string {
	path := filepath.Join(b.TempDir(), "big.pt.trace.json")
	if err := os.WriteFile(path, plain, 0o644); err != nil {
		b.Fatal(err)
	}
	return path
}

// BenchmarkReadFileWithStack reads the trace from a file, as the CLI does
// (mapped on Linux).
func BenchmarkReadFileWithStack(b *testing.B) {
	plain, _ := bigTrace(b)
	path := benchFile(b, plain)
	b.SetBytes(int64(len(plain)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := ReadFile(context.Background(), path, Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReadFileUnmappedWithStack reads the same file through
// input.Open, as ReadFile does where it cannot map.
func BenchmarkReadFileUnmappedWithStack(b *testing.B) {
	plain, _ := bigTrace(b)
	path := benchFile(b, plain)
	benchReads(b, plain, func() (io.Reader, func()) {
		r, err := input.NewSource(0, nil, nil).Open(path)
		if err != nil {
			b.Fatal(err)
		}
		return r, func() { r.Close() }
	})
}

// BenchmarkReadWithStackGzip counts decompressed bytes per second.
func BenchmarkReadWithStackGzip(b *testing.B) {
	plain, gz := bigTrace(b)
	benchReads(b, plain, func() (io.Reader, func()) {
		r, err := input.NewSource(0, nil, nil).NewReader(bytes.NewReader(gz))
		if err != nil {
			b.Fatal(err)
		}
		return r, nil
	})
}

func TestGeneratedTrace(t *testing.T) {
	p := fixturePath(t, tinyStackTrace)
	if p == "" {
		t.Skip("fixture not available")
	}
	src, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	st, err := gen.Generate(&buf, src, 20<<20)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := Read(context.Background(), bytes.NewReader(buf.Bytes()), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if tr.Damage.Dropped != 0 || len(tr.Damage.Warnings) != 0 || int64(buf.Len()) != st.Bytes {
		t.Errorf("damage %+v", tr.Damage)
	}
	steps := 0
	ext := map[int64]bool{}
	for i := 0; i < tr.Events.Len(); i++ {
		k := tr.Events.Kind[i]
		if k == KindUserAnnotation && len(tr.Name(i)) > 13 && tr.Name(i)[:13] == "ProfilerStep#" {
			steps++
		}
		if k == KindCPUOp || k == KindUserAnnotation {
			if x := tr.Events.Ext[i]; x > 0 {
				if ext[x] {
					t.Fatalf("External id %d repeated across copies", x)
				}
				ext[x] = true
			}
		}
	}
	if steps != st.Copies || st.Copies < 2 {
		t.Errorf("%d steps for %d copies", steps, st.Copies)
	}
}

// cpuLoop runs body b.N times on one locked thread, at size bytes a run,
// and reports the MB per CPU second of that thread (cpu-MB/s), which a
// shared machine's load does not change as it changes the wall time.
func cpuLoop(b *testing.B, size int64, body func()) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.SetBytes(size)
	b.ResetTimer()
	cpu0 := threadCPU()
	for i := 0; i < b.N; i++ {
		body()
	}
	if cpu := threadCPU() - cpu0; cpu > 0 {
		b.ReportMetric(float64(size)*float64(b.N)/1e6/cpu.Seconds(), "cpu-MB/s")
	}
}

// benchSplitter is a splitter of mapped data with decode's sizes.
func benchSplitter(data []byte) *splitter {
	return &splitter{data: data, chunk: 1 << 20, maxEvent: 16 << 20, maxHeader: 64 << 20, warn: func(string) {}}
}

// splitAll cuts data into batches as decode does (mapped: in place).
func splitAll(b *testing.B, data []byte) []*batch {
	s := benchSplitter(data)
	if err := s.start(); err != nil {
		b.Fatal(err)
	}
	var out []*batch
	for {
		bt, err := s.next()
		if err != nil {
			if err != io.EOF {
				b.Fatal(err)
			}
			return out
		}
		out = append(out, bt)
	}
}

// BenchmarkSplit cuts the 128 MB trace into events, alone.
func BenchmarkSplit(b *testing.B) {
	plain, _ := bigTrace(b)
	cpuLoop(b, int64(len(plain)), func() {
		if n := len(splitAll(b, plain)); n < 100 {
			b.Fatalf("%d batches", n)
		}
	})
}

// BenchmarkDecode decodes the events of the 128 MB trace, cut beforehand,
// on one goroutine: with scanEvent (scan) and with go-json alone (go-json,
// the decoder scanEvent replaced).
func BenchmarkDecode(b *testing.B) {
	plain, _ := bigTrace(b)
	batches := splitAll(b, plain)
	for _, mode := range []struct {
		name   string
		goJSON bool
	}{{"scan", false}, {"go-json", true}} {
		b.Run(mode.name, func(b *testing.B) {
			p := newPart()
			p.stdJSONOnly = mode.goJSON
			b.ReportAllocs()
			cpuLoop(b, int64(len(plain)), func() {
				for _, bt := range batches {
					decodeBatch(bt, p)
					if p.damage.Dropped != 0 {
						b.Fatal("events dropped")
					}
				}
			})
		})
	}
}

// BenchmarkScanEvent parses the events of the real with_stack trace into
// rawEvents alone (no interning, no columns): scanEvent against go-json
// and view, the decoder it replaced.
func BenchmarkScanEvent(b *testing.B) {
	p := fixturePath(b, tinyStackTrace)
	if p == "" {
		b.Skip("fixture not available")
	}
	data, err := os.ReadFile(p)
	if err != nil {
		b.Fatal(err)
	}
	var events [][]byte
	size := 0
	for _, bt := range splitAll(b, data) {
		for k := range bt.starts {
			events = append(events, bt.buf[bt.starts[k]:bt.ends[k]])
			size += int(bt.ends[k] - bt.starts[k])
		}
	}
	b.Run("scan", func(b *testing.B) {
		var ev rawEvent
		var raw rawRefs
		var st scanState
		cpuLoop(b, int64(size), func() {
			for _, e := range events {
				if !scanEvent(e, &ev, &raw, &st) {
					b.Fatalf("%s left to go-json", e)
				}
			}
		})
	})
	b.Run("go-json", func(b *testing.B) {
		var ev rawEvent
		var w wireEvent
		cpuLoop(b, int64(size), func() {
			for _, e := range events {
				w.reset()
				if err := json.Unmarshal(e, &w); err != nil {
					b.Fatal(err)
				}
				w.view(&ev)
			}
		})
	})
}

// BenchmarkSplitIndexed cuts the 128 MB trace into batches, sequentially
// and with the parallel index (forced on, on at least two goroutines;
// decode does not index with GOMAXPROCS 1). Run with -cpu 1,2,8.
func BenchmarkSplitIndexed(b *testing.B) {
	plain, _ := bigTrace(b)
	for _, indexed := range []bool{false, true} {
		name := "sequential"
		if indexed {
			name = "indexed"
		}
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(plain)))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				s := benchSplitter(plain)
				if err := s.start(); err != nil {
					b.Fatal(err)
				}
				if indexed {
					s.parWorkers = max(2, runtime.GOMAXPROCS(0))
					s.startIndex()
					if s.ix == nil {
						b.Fatal("not indexed")
					}
				}
				n := 0
				for {
					bt, err := s.next()
					if err == io.EOF {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
					n += len(bt.starts)
				}
				s.stopIndex()
				if n < 100_000 {
					b.Fatalf("%d events", n)
				}
			}
		})
	}
}
