package chart

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"
)

// spiky returns a flat, slightly noisy series of n points with a
// single-sample spike to up at index spike and a dip to down at index dip.
func spiky(n, spike, dip int, up, down float64) ([]float64, []float64) {
	x := make([]float64, n)
	y := make([]float64, n)
	for i := range x {
		x[i] = float64(i)
		y[i] = 10 + float64(i%7)*0.01
	}
	y[spike], y[dip] = up, down
	return x, y
}

// seriesPath returns the stroke of series i in a line chart's scene.
func seriesPath(t *testing.T, s *scene, i int) *item {
	t.Helper()
	for k := range s.items {
		if it := &s.items[k]; it.kind == kindPath && it.stroke == seriesColor(i) && it.width >= 1.2 && it.width < 3 && !it.closed {
			return it
		}
	}
	t.Fatalf("series %d not found in scene", i)
	return nil
}

func TestDecimationKeepsSpike(t *testing.T) {
	const n, spike, dip = 1_000_000, 654_321, 123_457
	x, y := spiky(n, spike, dip, 100, -50)
	s, err := Line{Series: []Series{{Name: "m", X: x, Y: y}}}.plan()
	if err != nil {
		t.Fatal(err)
	}
	line := seriesPath(t, s, 0)
	p, xa, ya := planAxes(t, x, y)
	if ya.min != -60 || ya.max != 100 {
		t.Fatalf("y axis [%v, %v], want [-60, 100]", ya.min, ya.max)
	}
	if len(line.pts) > 4*int(p.x1-p.x0+1) {
		t.Errorf("1M points decimated to %d; want at most 4 per pixel column (%d)", len(line.pts), 4*int(p.x1-p.x0+1))
	}
	// The spike and the dip are drawn at their own x, at full height.
	top, bottom := pt{y: math.Inf(1)}, pt{y: math.Inf(-1)}
	for _, q := range line.pts {
		if q.y < top.y {
			top = q
		}
		if q.y > bottom.y {
			bottom = q
		}
	}
	if want := ya.pos(100, p.y1, p.y0); math.Abs(top.y-want) > 1e-9 {
		t.Errorf("highest drawn y %v, want the spike at %v", top.y, want)
	}
	if want := xa.pos(spike, p.x0, p.x1); math.Abs(top.x-want) > 1e-9 {
		t.Errorf("spike drawn at x %v, want %v", top.x, want)
	}
	if want := ya.pos(-50, p.y1, p.y0); math.Abs(bottom.y-want) > 1e-9 {
		t.Errorf("lowest drawn y %v, want the dip at %v", bottom.y, want)
	}
	if want := xa.pos(dip, p.x0, p.x1); math.Abs(bottom.x-want) > 1e-9 {
		t.Errorf("dip drawn at x %v, want %v", bottom.x, want)
	}
	// And the SVG stays small.
	var buf bytes.Buffer
	if err := WriteSVG(&buf, Line{Series: []Series{{Name: "m", X: x, Y: y}}}); err != nil {
		t.Fatal(err)
	}
	if buf.Len() > 200<<10 {
		t.Errorf("SVG of 1M points is %d bytes", buf.Len())
	}
}

// planAxes reproduces the axes Line.plan lays out for one named series.
func planAxes(t *testing.T, x, y []float64) (plotBox, axis, axis) {
	t.Helper()
	f, err := loadFaces()
	if err != nil {
		t.Fatal(err)
	}
	fr := newFrame(f, canvasW, canvasH, "")
	fr.legend([]string{"m"}, pad, canvasW-pad, true)
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range y {
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	lo, hi = valueRange(lo, hi)
	return fr.xyAxes(xySpec{xlo: x[0], xhi: x[len(x)-1], ylo: lo, yhi: hi})
}

// TestDecimatorColumns checks on random data that every pixel column keeps
// its first, last, minimum and maximum point, and nothing out of order.
func TestDecimatorColumns(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const n, ncols = 20000, 97
	y := make([]float64, n)
	col := make([]int, n)
	for i := range y {
		y[i] = r.NormFloat64()
		col[i] = i * ncols / n
	}
	d := newDecimator(1, 0)
	for i := range y {
		d.add(i, col[i], y[i:i+1])
	}
	kept := map[int]bool{}
	prev := -1
	for _, i := range d.indices() {
		if i <= prev {
			t.Fatalf("indices not ascending: %d after %d", i, prev)
		}
		prev = i
		kept[i] = true
	}
	for c := 0; c < ncols; c++ {
		first, last, lo, hi := -1, -1, -1, -1
		for i := range y {
			if col[i] != c {
				continue
			}
			if first < 0 {
				first = i
			}
			last = i
			if lo < 0 || y[i] < y[lo] {
				lo = i
			}
			if hi < 0 || y[i] > y[hi] {
				hi = i
			}
		}
		for _, i := range []int{first, last, lo, hi} {
			if !kept[i] {
				t.Errorf("column %d: point %d (first/last/min/max) dropped", c, i)
			}
		}
	}
	if len(kept) > 4*ncols {
		t.Errorf("kept %d points for %d columns", len(kept), ncols)
	}
}

func TestDecimatorGaps(t *testing.T) {
	nan := math.NaN()
	x := []float64{0, 1, 2, 3, 4, 5}
	y := []float64{1, 2, nan, nan, 3, 4}
	xa := axis{min: 0, max: 5}
	ya := axis{min: 0, max: 4}
	pts := linePoints(x, y, xa, ya, plotBox{x0: 0, y0: 0, x1: 500, y1: 400})
	want := []pt{{0, 300}, {100, 200}, gap, {400, 100}, {500, 0}}
	if len(pts) != len(want) {
		t.Fatalf("got %v, want %v", pts, want)
	}
	for i := range want {
		if math.IsNaN(want[i].x) != math.IsNaN(pts[i].x) || (!math.IsNaN(want[i].x) && pts[i] != want[i]) {
			t.Errorf("point %d: got %v, want %v", i, pts[i], want[i])
		}
	}
}

// TestAreaDecimationKeepsSpike puts a one-sample spike into the middle
// layer of a 1M-point stacked area: the kept points must include it, and
// all layers share the kept points.
func TestAreaDecimationKeepsSpike(t *testing.T) {
	const n, spike = 1_000_000, 500_001
	x := make([]float64, n)
	layers := []Series{{Y: make([]float64, n)}, {Y: make([]float64, n)}, {Y: make([]float64, n)}}
	for i := range x {
		x[i] = float64(i)
		layers[0].Y[i], layers[1].Y[i], layers[2].Y[i] = 5, 1, 2
	}
	layers[1].Y[spike] = 40
	p := plotBox{x0: 50, y0: 20, x1: 930, y1: 500}
	idx := areaIndices(x, layers, axis{min: 0, max: n - 1}, p)
	found := false
	for _, i := range idx {
		found = found || i == spike
	}
	if !found {
		t.Errorf("spike at %d not kept among %d points", spike, len(idx))
	}
	if len(idx) > 8*int(p.x1-p.x0+1) {
		t.Errorf("kept %d points", len(idx))
	}
}
