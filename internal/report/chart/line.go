package chart

import (
	"fmt"
	"math"
)

func (l Line) plan() (*scene, error) {
	f, err := loadFaces()
	if err != nil {
		return nil, err
	}
	xlo, xhi := math.Inf(1), math.Inf(-1)
	ylo, yhi := math.Inf(1), math.Inf(-1)
	names := make([]string, len(l.Series))
	for i, s := range l.Series {
		if len(s.X) != len(s.Y) {
			return nil, fmt.Errorf("chart: line %q: series %d (%q) has %d x values and %d y values", l.Title, i, s.Name, len(s.X), len(s.Y))
		}
		names[i] = s.Name
		for k, x := range s.X {
			y := s.Y[k]
			if !finite(x) || !finite(y) {
				continue
			}
			xlo, xhi = math.Min(xlo, x), math.Max(xhi, x)
			ylo, yhi = math.Min(ylo, y), math.Max(yhi, y)
		}
	}
	empty := xlo > xhi
	if empty {
		xlo, xhi, ylo, yhi = 0, 1, 0, 1
	}
	ylo, yhi = valueRange(ylo, yhi)
	if l.YMax > l.YMin {
		ylo, yhi = math.Min(ylo, l.YMin), math.Max(yhi, l.YMax)
	}

	fr := newFrame(f, canvasW, canvasH, l.Title)
	fr.legend(names, pad, canvasW-pad, true)
	p, xa, ya := fr.xyAxes(xySpec{
		xlo: xlo, xhi: xhi, ylo: ylo, yhi: yhi, xu: l.XUnit, yu: l.YUnit,
		xlabel: l.XLabel, ylabel: l.YLabel, markerRoom: hasMarkerLabels(l.Markers), empty: empty,
	})
	if empty {
		fr.noData(p)
		return fr.s, nil
	}
	width := 1.5
	if len(l.Series) > 6 {
		width = 1.2
	}
	for i, s := range l.Series {
		pts := linePoints(s.X, s.Y, xa, ya, p)
		if len(pts) == 1 {
			// A lone point: draw a short tick so it is visible.
			pts = []pt{{pts[0].x - 1.5, pts[0].y}, {pts[0].x + 1.5, pts[0].y}}
		}
		fr.s.path(pts, seriesColor(i), width)
	}
	fr.markers(l.Markers, p, xa)
	return fr.s, nil
}

func hasMarkerLabels(ms []Marker) bool {
	for _, m := range ms {
		if m.Label != "" {
			return true
		}
	}
	return false
}

func (a StackedArea) plan() (*scene, error) {
	f, err := loadFaces()
	if err != nil {
		return nil, err
	}
	names := make([]string, len(a.Layers))
	for i, s := range a.Layers {
		if len(s.Y) != len(a.X) {
			return nil, fmt.Errorf("chart: stacked area %q: layer %d (%q) has %d values for %d x values", a.Title, i, s.Name, len(s.Y), len(a.X))
		}
		names[i] = s.Name
	}
	// One pass for the ranges: X and the stacked total.
	xlo, xhi := math.Inf(1), math.Inf(-1)
	ylo, yhi := 0.0, math.Inf(-1)
	for k, x := range a.X {
		if !finite(x) {
			continue
		}
		xlo, xhi = math.Min(xlo, x), math.Max(xhi, x)
		sum := 0.0
		for _, s := range a.Layers {
			sum += val(s.Y[k])
			ylo = math.Min(ylo, sum)
			yhi = math.Max(yhi, sum)
		}
	}
	empty := xlo > xhi || len(a.Layers) == 0
	if empty {
		xlo, xhi, ylo, yhi = 0, 1, 0, 1
	}
	fr := newFrame(f, canvasW, canvasH, a.Title)
	fr.legend(names, pad, canvasW-pad, false)
	p, xa, ya := fr.xyAxes(xySpec{
		xlo: xlo, xhi: xhi, ylo: ylo, yhi: yhi, xu: a.XUnit, yu: a.YUnit,
		xlabel: a.XLabel, ylabel: a.YLabel, empty: empty,
	})
	if empty {
		fr.noData(p)
		return fr.s, nil
	}
	idx := areaIndices(a.X, a.Layers, xa, p)
	// Boundaries at the kept points: lower[k] is layer l's bottom.
	lower := make([]float64, len(idx))
	upper := make([]float64, len(idx))
	for l, s := range a.Layers {
		for k, i := range idx {
			upper[k] = lower[k] + val(s.Y[i])
		}
		poly := make([]pt, 0, 2*len(idx))
		for k, i := range idx {
			poly = append(poly, pt{xa.pos(a.X[i], p.x0, p.x1), ya.pos(upper[k], p.y1, p.y0)})
		}
		edge := poly[:len(poly):len(poly)]
		for k := len(idx) - 1; k >= 0; k-- {
			poly = append(poly, pt{xa.pos(a.X[idx[k]], p.x0, p.x1), ya.pos(lower[k], p.y1, p.y0)})
		}
		c := seriesColor(l)
		fr.s.polygon(poly, c)
		fr.s.path(edge, c, 1)
		lower, upper = upper, lower
	}
	return fr.s, nil
}

// val treats non-finite layer values as zero.
func val(v float64) float64 {
	if finite(v) {
		return v
	}
	return 0
}

// areaIndices decimates a stacked area: the kept points are those holding
// the first, last, minimum or maximum of any layer boundary in each pixel
// column, shared by all layers so their edges stay aligned.
func areaIndices(xs []float64, layers []Series, xa axis, p plotBox) []int {
	ncols := int(p.x1-p.x0) + 1
	d := newDecimator(len(layers), 4*ncols)
	sums := make([]float64, len(layers))
	for i, x := range xs {
		if !finite(x) {
			continue
		}
		sum := 0.0
		for l, s := range layers {
			sum += val(s.Y[i])
			sums[l] = sum
		}
		d.add(i, columnOf(xa.pos(x, p.x0, p.x1), p.x0, ncols), sums)
	}
	return d.indices()
}
