package perf

import (
	"bytes"
	"context"
	"os"
	"testing"

	"github.com/ptscope/ptscope/internal/kineto"
	"github.com/ptscope/ptscope/internal/kineto/gen"
)

// BenchmarkAnalyze analyses a 128 MB trace generated from the real
// with_stack fixture; bytes are the trace's JSON bytes.
func BenchmarkAnalyze(b *testing.B) {
	src, err := os.ReadFile(fixture(b, "gpt2tiny_with_stack.pt.trace.json"))
	if err != nil {
		b.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := gen.Generate(&buf, src, 128<<20); err != nil {
		b.Fatal(err)
	}
	tr, err := kineto.Read(context.Background(), bytes.NewReader(buf.Bytes()), kineto.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(buf.Len()))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		Analyze(tr, Options{})
	}
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
	for i := 0; i < b.N; i++ {
		Analyze(tr, Options{})
	}
}
