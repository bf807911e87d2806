package chart

import "sort"

// decimator picks which points of a long series to draw. Points arrive in
// order with the pixel column they fall in; for every run of consecutive
// points in one column it keeps the first and last point and, for each of
// the value columns, the points holding the minimum and the maximum. Lines
// drawn through the kept points look the same as lines through all points:
// every column still spans its full vertical extent, so single-sample spikes
// survive. A stacked area passes one value column per layer boundary, so all
// layers keep the same points.
type decimator struct {
	col         int
	first, last int
	minI, maxI  []int
	minV, maxV  []float64
	out         []int
	scratch     []int
	nvals       int
	open        bool
}

// gapIndex in a decimator's output marks a break in the line.
const gapIndex = -1

func newDecimator(nvals, sizeHint int) *decimator {
	return &decimator{
		nvals: nvals,
		minI:  make([]int, nvals), maxI: make([]int, nvals),
		minV: make([]float64, nvals), maxV: make([]float64, nvals),
		out: make([]int, 0, sizeHint),
	}
}

// add records point i in pixel column col with the given values.
func (d *decimator) add(i, col int, vals []float64) {
	if d.open && col != d.col {
		d.flush()
	}
	if !d.open {
		d.open, d.col, d.first = true, col, i
		for k := 0; k < d.nvals; k++ {
			d.minI[k], d.maxI[k], d.minV[k], d.maxV[k] = i, i, vals[k], vals[k]
		}
	} else {
		for k := 0; k < d.nvals; k++ {
			v := vals[k]
			if v < d.minV[k] {
				d.minV[k], d.minI[k] = v, i
			}
			if v > d.maxV[k] {
				d.maxV[k], d.maxI[k] = v, i
			}
		}
	}
	d.last = i
}

// brk ends the current line: the next point starts a new one.
func (d *decimator) brk() {
	d.flush()
	if n := len(d.out); n > 0 && d.out[n-1] != gapIndex {
		d.out = append(d.out, gapIndex)
	}
}

func (d *decimator) flush() {
	if !d.open {
		return
	}
	d.open = false
	s := append(d.scratch[:0], d.first, d.last)
	s = append(s, d.minI...)
	s = append(s, d.maxI...)
	sort.Ints(s)
	prev := -2
	for _, i := range s {
		if i != prev {
			d.out = append(d.out, i)
			prev = i
		}
	}
	d.scratch = s
}

// indices ends the input and returns the kept indices in ascending order,
// with gapIndex where the line breaks.
func (d *decimator) indices() []int {
	d.flush()
	if n := len(d.out); n > 0 && d.out[n-1] == gapIndex {
		d.out = d.out[:n-1]
	}
	return d.out
}

// columnOf maps a pixel x in [x0, x1] to a column index in [0, ncols).
func columnOf(px, x0 float64, ncols int) int {
	c := int(px - x0)
	if c < 0 {
		return 0
	}
	if c >= ncols {
		return ncols - 1
	}
	return c
}

// linePoints maps a series to pixels, decimated to one column per pixel of
// the plot width. Non-finite points break the line.
func linePoints(xs, ys []float64, xa, ya axis, p plotBox) []pt {
	ncols := int(p.x1-p.x0) + 1
	d := newDecimator(1, 8*ncols)
	var v [1]float64
	for i := range xs {
		x, y := xs[i], ys[i]
		if !finite(x) || !finite(y) {
			d.brk()
			continue
		}
		v[0] = y
		d.add(i, columnOf(xa.pos(x, p.x0, p.x1), p.x0, ncols), v[:])
	}
	idx := d.indices()
	pts := make([]pt, 0, len(idx))
	for _, i := range idx {
		if i == gapIndex {
			pts = append(pts, gap)
			continue
		}
		pts = append(pts, pt{xa.pos(xs[i], p.x0, p.x1), ya.pos(ys[i], p.y1, p.y0)})
	}
	return pts
}
