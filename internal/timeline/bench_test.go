package timeline

import (
	"bytes"
	"strconv"
	"sync"
	"testing"

	"github.com/ptscope/ptscope/internal/memory"
	"github.com/ptscope/ptscope/internal/snapshot"
	"github.com/ptscope/ptscope/internal/snapshot/snapgen"
)

var (
	bench1MOnce, benchGPT2Once sync.Once
	bench1M, benchGPT2         *Memory
)

// memory1M indexes a generated 1,000,000-entry snapshot (the size of the
// goals in docs/serve.md).
func memory1M(b *testing.B) *Memory {
	b.Helper()
	bench1MOnce.Do(func() { bench1M = generated(b, snapgen.Options{Entries: 1_000_000, Seed: 1}) })
	return bench1M
}

// memoryGPT2 indexes a generated 1,000,000-entry GPT-2 small training
// (batch 8 x 512): blocks of 12-785 MiB, so that the whole-trace view
// draws thousands of blocks, as on the real recording.
func memoryGPT2(b *testing.B) *Memory {
	b.Helper()
	benchGPT2Once.Do(func() {
		benchGPT2 = generated(b, snapgen.Options{Entries: 1_000_000, Seed: 1, Model: snapgen.ModelGPT2Small})
	})
	return benchGPT2
}

func generated(b *testing.B, o snapgen.Options) *Memory {
	var buf bytes.Buffer
	if err := snapgen.Write(&buf, o); err != nil {
		b.Fatal(err)
	}
	s, err := snapshot.Read(&buf)
	if err != nil {
		b.Fatal(err)
	}
	a := memory.Analyze(s, 0, memory.Options{})
	return NewMemory(s, 0, a.Replay, a.Phases)
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

func benchView(b *testing.B, x0, x1 int) { benchViewOf(b, memory1M(b), x0, x1) }

func benchViewOf(b *testing.B, m *Memory, x0, x1 int) {
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

// BenchmarkViewGPT2 zooms into the GPT-2 small training as the page does
// from its first view: the whole trace, then halves around the middle.
func BenchmarkViewGPT2(b *testing.B) {
	for _, span := range []int{1_000_000, 500_000, 250_000, 125_000, 31_250, 3_906} {
		b.Run(strconv.Itoa(span), func(b *testing.B) {
			m := memoryGPT2(b)
			x0 := max(0, min(m.Len()-span, m.Len()/2-span/2))
			benchViewOf(b, m, x0, min(m.Len(), x0+span))
		})
	}
}
