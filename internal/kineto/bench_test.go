package kineto

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

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
	b.SetBytes(int64(len(plain)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := Read(context.Background(), bytes.NewReader(plain), Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReadFileWithStack reads the trace from a file, as the CLI does
// (mapped on Linux).
func BenchmarkReadFileWithStack(b *testing.B) {
	plain, _ := bigTrace(b)
	path := filepath.Join(b.TempDir(), "big.pt.trace.json")
	if err := os.WriteFile(path, plain, 0o644); err != nil {
		b.Fatal(err)
	}
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
	path := filepath.Join(b.TempDir(), "big.pt.trace.json")
	if err := os.WriteFile(path, plain, 0o644); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(plain)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r, err := input.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := Read(context.Background(), r, Options{}); err != nil {
			b.Fatal(err)
		}
		r.Close()
	}
}

// BenchmarkReadWithStackGzip counts decompressed bytes per second.
func BenchmarkReadWithStackGzip(b *testing.B) {
	plain, gz := bigTrace(b)
	b.SetBytes(int64(len(plain)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r, err := input.NewReader(bytes.NewReader(gz))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := Read(context.Background(), r, Options{}); err != nil {
			b.Fatal(err)
		}
	}
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
