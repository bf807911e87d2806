package chart

import (
	"io"
	"math"
	"testing"
)

// benchLine is a 1M-point memory timeline: a sawtooth of allocations with
// noise and one spike, as an allocator replay produces.
func benchLine() Line {
	const n = 1_000_000
	x := make([]float64, n)
	y := make([]float64, n)
	for i := range x {
		x[i] = float64(i) * 1500 // ns
		y[i] = 2*gib + float64(i%50_000)*20_000 + 64*mib*math.Sin(float64(i)*0.37)
	}
	y[777_777] = 9 * gib
	return Line{
		Title: "GPU memory over time", XLabel: "time", YLabel: "allocated",
		YUnit: UnitBytes, XUnit: UnitDuration,
		Series:  []Series{{Name: "allocated", X: x, Y: y}},
		Markers: []Marker{{X: x[777_777], Label: "peak 9.00 GiB"}},
	}
}

func BenchmarkWriteSVGLine1M(b *testing.B) {
	l := benchLine()
	b.ReportAllocs()
	for b.Loop() {
		if err := WriteSVG(io.Discard, l); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkWritePNGLine1M(b *testing.B) {
	l := benchLine()
	b.ReportAllocs()
	for b.Loop() {
		if err := WritePNG(io.Discard, l); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkWriteSVGStackedArea1M(b *testing.B) {
	const n = 1_000_000
	a := StackedArea{Title: "Memory by category", YUnit: UnitBytes, XUnit: UnitDuration, X: make([]float64, n)}
	for l := 0; l < 6; l++ {
		a.Layers = append(a.Layers, Series{Name: "layer", Y: make([]float64, n)})
	}
	for i := range a.X {
		a.X[i] = float64(i) * 1000
		for l := range a.Layers {
			a.Layers[l].Y[i] = float64((i*(l+1))%10_000) * mib / 100
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := WriteSVG(io.Discard, a); err != nil {
			b.Fatal(err)
		}
	}
}
