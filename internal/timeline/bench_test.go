package timeline

import (
	"bytes"
	"sync"
	"testing"

	"github.com/ptscope/ptscope/internal/memory"
	"github.com/ptscope/ptscope/internal/snapshot"
	"github.com/ptscope/ptscope/internal/snapshot/snapgen"
)

var (
	bench1MOnce sync.Once
	bench1M     *Memory
	bench1MA    *memory.Analysis
)

// memory1M indexes a generated 1,000,000-entry snapshot (the size of the
// goals in docs/serve.md).
func memory1M(b *testing.B) *Memory {
	b.Helper()
	bench1MOnce.Do(func() {
		var buf bytes.Buffer
		if err := snapgen.Write(&buf, snapgen.Options{Entries: 1_000_000, Seed: 1}); err != nil {
			b.Fatal(err)
		}
		s, err := snapshot.Read(&buf)
		if err != nil {
			b.Fatal(err)
		}
		bench1MA = memory.Analyze(s, 0, memory.Options{})
		bench1M = NewMemory(s, 0, bench1MA.Replay, bench1MA.Phases)
	})
	return bench1M
}

// BenchmarkNewMemory1M builds the index (pyramids, block table,
// checkpoints) of a 1M-entry snapshot, after the analysis.
func BenchmarkNewMemory1M(b *testing.B) {
	m := memory1M(b)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		NewMemory(m.Snap, 0, m.Replay, m.Phases)
	}
}

func benchView(b *testing.B, x0, x1 int) {
	m := memory1M(b)
	b.ReportAllocs()
	b.ResetTimer()
	var v *View
	for i := 0; i < b.N; i++ {
		var err error
		if v, err = m.View(ViewQuery{X0: x0, X1: x1, Width: 1500, Height: 600}); err != nil {
			b.Fatal(err)
		}
	}
	edges := 0
	for _, bl := range v.Blocks {
		edges += len(bl.Edges)
	}
	b.ReportMetric(float64(len(v.Blocks)), "blocks")
	b.ReportMetric(float64(edges), "edges")
}

// BenchmarkView1MFull is the whole 1M-entry timeline in 1500x600 pixels.
func BenchmarkView1MFull(b *testing.B) { benchView(b, 0, 1_000_000) }

// BenchmarkView1MStep is about one training step (3,000 entries).
func BenchmarkView1MStep(b *testing.B) { benchView(b, 500_000, 503_000) }

// BenchmarkView1MTenth is a tenth of the trace.
func BenchmarkView1MTenth(b *testing.B) { benchView(b, 400_000, 500_000) }

// BenchmarkState1M is the allocator state at an entry mid-trace.
func BenchmarkState1M(b *testing.B) {
	m := memory1M(b)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		m.State(500_000 + i%1000)
	}
}
