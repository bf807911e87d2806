// Package chart draws the few static charts ptscope writes into run folders:
// line charts (memory and time timelines), stacked areas (memory by
// category) and bar charts (top-N tables, breakdowns).
//
// WriteSVG emits a small, deterministic SVG written by hand (no dependency),
// fit for golden tests and for embedding in reports. WritePNG rasterises the
// very same drawing with golang.org/x/image/vector and the embedded
// Liberation Sans outlines, so it needs neither cgo nor system fonts.
//
// Line, StackedArea and Bars implement Chart with value receivers, so both a
// value (chart.Line{...}) and a pointer (&chart.Line{...}) can be passed.
//
// Series are decimated per pixel column before drawing, keeping the first,
// minimum, maximum and last point of every column, so a chart of a million
// points stays small and single-sample spikes remain visible. Decimation
// assumes X ascending (as in timelines); unsorted X is drawn as given.
//
// Series colours are stable by index: series i always gets palette colour i
// (ten distinct colours, then ten lighter ones, then the cycle repeats).
package chart

import (
	"errors"
	"io"
)

// Unit says how axis ticks and value labels are formatted.
type Unit int

const (
	// UnitPlain formats plain numbers, with k/M/G suffixes for large values.
	UnitPlain Unit = iota
	// UnitBytes formats byte counts in binary units (KiB, MiB, GiB, TiB).
	UnitBytes
	// UnitDuration formats nanoseconds as ns, us, ms or s.
	UnitDuration
	// UnitPercent formats ratios in 0..1 as percentages.
	UnitPercent
)

// Series is one named sequence of points. X and Y must have equal length.
// NaN or infinite Y values break a line.
type Series struct {
	Name string
	X, Y []float64
}

// Marker is a vertical line across the plot at X, such as the peak or a step
// boundary. Labels that would overlap an earlier marker's label are omitted.
type Marker struct {
	X     float64
	Label string
}

// Line is a line chart of one or more series over a shared X axis.
type Line struct {
	Title, XLabel, YLabel string
	YUnit                 Unit
	XUnit                 Unit
	Series                []Series
	Markers               []Marker
	// YMin and YMax, when YMax > YMin, are the least the Y axis spans (0
	// and 1 for a utilisation that must not look like a swing when it moves
	// between 28% and 33%); by default the axis fits the data.
	YMin, YMax float64
}

// StackedArea stacks Layers (Layers[0] at the bottom) over X. Every
// Layers[i].Y must have len(X) values; Layers[i].X is ignored. Values are
// expected to be non-negative; NaN counts as 0.
type StackedArea struct {
	Title, XLabel, YLabel string
	YUnit                 Unit
	XUnit                 Unit
	X                     []float64
	Layers                []Series
}

// Bars is a bar chart with one bar per label. Each Series in Stacks is one
// layer of the stack and holds Y[i] for Labels[i] (its X is ignored); a
// single series gives a plain bar chart, in the first palette colour. XLabel
// names the horizontal axis: the values for Horizontal bars, the categories
// otherwise. Each bar is labelled with its total where there is room.
// Horizontal bars suit long labels such as operator names; pass a top-N
// selection, as every label gets a row (beyond 150, the rest are left out
// with a note).
type Bars struct {
	Title, XLabel string
	Unit          Unit
	Labels        []string
	Stacks        []Series
	Horizontal    bool
}

// Chart is a chart that WriteSVG and WritePNG can draw: Line, StackedArea or
// Bars, as a value or a pointer. The interface is sealed (its method is
// unexported); a nil pointer gives an error, not a panic.
type Chart interface {
	plan() (*scene, error)
}

var errNilChart = errors.New("chart: nil chart")

// WriteSVG writes c as a standalone SVG document.
func WriteSVG(w io.Writer, c Chart) error {
	s, err := build(c)
	if err != nil {
		return err
	}
	return writeSVG(w, s)
}

// WritePNG writes c as a PNG image (twice the SVG's pixel size, for sharp
// text on high-density screens).
func WritePNG(w io.Writer, c Chart) error {
	s, err := build(c)
	if err != nil {
		return err
	}
	return writePNG(w, s)
}

func build(c Chart) (*scene, error) {
	switch v := c.(type) {
	case nil:
		return nil, errNilChart
	case *Line:
		if v == nil {
			return nil, errNilChart
		}
	case *StackedArea:
		if v == nil {
			return nil, errNilChart
		}
	case *Bars:
		if v == nil {
			return nil, errNilChart
		}
	}
	return c.plan()
}
