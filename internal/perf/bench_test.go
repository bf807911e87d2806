package perf

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/ptscope/ptscope/internal/kineto"
	"github.com/ptscope/ptscope/internal/kineto/gen"
)

// BenchmarkAnalyze analyses traces generated from the real with_stack
// fixture: 128 MB, and 360 MB as scripts/bench_trace.sh measures end to
// end; bytes are the trace's JSON bytes.
func BenchmarkAnalyze(b *testing.B) {
	for _, size := range []int64{128 << 20, 360e6} {
		b.Run(fmt.Sprintf("%dMB", size/1e6), func(b *testing.B) {
			benchAnalyze(b, size)
		})
	}
}

func benchAnalyze(b *testing.B, size int64) {
	src, err := os.ReadFile(fixture(b, "gpt2tiny_with_stack.pt.trace.json"))
	if err != nil {
		b.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := gen.Generate(&buf, src, size); err != nil {
		b.Fatal(err)
	}
	tr, err := kineto.Read(context.Background(), bytes.NewReader(buf.Bytes()), kineto.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(buf.Len()))
	buf = bytes.Buffer{}
	b.ReportAllocs()
	b.ResetTimer()
	cpu := processCPU()
	for i := 0; i < b.N; i++ {
		Analyze(tr, Options{})
	}
	b.StopTimer()
	b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
}

// BenchmarkAnalyzeSynthetic analyses a generated FSDP trace of 200 steps of
// 48 layers (no ../shared needed); bytes are the trace's JSON bytes.
func BenchmarkAnalyzeSynthetic(b *testing.B) {
	s := gen.Scenarios(0)["fsdp"]
	s.Steps, s.Layers = 200, 48
	var buf bytes.Buffer
	if _, err := s.Write(&buf); err != nil {
		b.Fatal(err)
	}
	n := int64(buf.Len())
	tr, err := kineto.Read(context.Background(), &buf, kineto.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(n)
	b.ReportAllocs()
	b.ResetTimer()
	cpu := processCPU()
	for i := 0; i < b.N; i++ {
		Analyze(tr, Options{})
	}
	b.StopTimer()
	b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
}
