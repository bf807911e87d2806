package load

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/ptscope/ptscope/internal/kineto"
	"github.com/ptscope/ptscope/internal/kineto/gen"
	"github.com/ptscope/ptscope/internal/perf"
	"github.com/ptscope/ptscope/internal/testfixture"
)

// benchTrace writes a trace of about size bytes in Kineto's layout
// (gentrace -sections) from the real with_stack fixture.
func benchTrace(b *testing.B, size int64) string {
	data, err := os.ReadFile(testfixture.Path(b, "gpt2tiny_with_stack.pt.trace.json"))
	if err != nil {
		b.Fatal(err)
	}
	p := filepath.Join(b.TempDir(), "big.pt.trace.json")
	f, err := os.Create(p)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := gen.GenerateWith(f, data, gen.Options{Target: size, Sections: true}); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	return p
}

// BenchmarkStreamTrace measures the streaming path on a 256 MB trace with
// windows of about 200,000 events (a 10 GB trace's windows hold more; the
// cost per byte is the same), against BenchmarkWholeTrace, the in-memory
// path on the same file. scripts/bench_huge.sh measures a 10 GB trace.
func BenchmarkStreamTrace(b *testing.B) {
	p := benchTrace(b, 256<<20)
	st, _ := os.Stat(p)
	b.SetBytes(st.Size())
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := streamTrace(context.Background(), p, kineto.Options{}, perf.Options{}, streamOptions{windowEvents: 200_000}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkWholeTrace(b *testing.B) {
	p := benchTrace(b, 256<<20)
	st, _ := os.Stat(p)
	b.SetBytes(st.Size())
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t, err := kineto.ReadFile(context.Background(), p, kineto.Options{})
		if err != nil {
			b.Fatal(err)
		}
		perf.Analyze(t, perf.Options{})
	}
}
