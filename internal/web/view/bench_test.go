package view

import (
	"fmt"
	"sync"
	"testing"

	"github.com/ptscope/ptscope/internal/timeline"
)

var (
	benchGPT2Once sync.Once
	benchGPT2     *timeline.Memory
)

// BenchmarkMemView is the server's answer to the page's zoom sequence on a
// generated 1,000,000-entry GPT-2 small training (batch 8 x 512, the shape
// of scripts/gpu/bench_serve_real.sh's real recording): the whole trace at
// 1500x600 pixels, then halves around the peak. An answer is the view,
// its encoding and its gzip (what /api/v1/mem/view sends a browser); the
// metrics are the bytes sent and the blocks drawn.
func BenchmarkMemView(b *testing.B) {
	benchGPT2Once.Do(func() { benchGPT2 = gpt2Memory(b, 1_000_000) })
	m := benchGPT2
	n := m.Len()
	peak := 0
	for i, x := range m.Replay.Timeline.Allocated {
		if x > m.Replay.Timeline.Allocated[peak] {
			peak = i
		}
	}
	for span := n; span >= 1000; span /= 4 {
		x0 := max(0, min(n-span, peak-span/2))
		b.Run(fmt.Sprintf("entries=%d", span), func(b *testing.B) {
			var raw, sent []byte
			var v *timeline.View
			b.ReportAllocs()
			for b.Loop() {
				var err error
				if v, err = m.View(timeline.ViewQuery{X0: x0, X1: x0 + span, Width: 1500, Height: 600}); err != nil {
					b.Fatal(err)
				}
				raw = EncodeView(m, v, ViewEncoding{Color: timeline.ByCategory, Height: 600})
				sent = Gzip(raw)
			}
			b.ReportMetric(float64(len(sent)), "sent_B")
			b.ReportMetric(float64(len(raw)), "raw_B")
			b.ReportMetric(float64(len(v.Blocks)), "blocks")
		})
	}
}
