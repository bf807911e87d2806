package memreport

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strconv"

	"github.com/ptscope/ptscope/internal/memory"
	"github.com/ptscope/ptscope/internal/report/chart"
	"github.com/ptscope/ptscope/internal/report/rundir"
	"github.com/ptscope/ptscope/internal/units"
)

// NamedChart is one chart of a device, named as its file without the
// extension.
type NamedChart struct {
	Name  string
	Chart chart.Chart
}

// ChartNames lists the charts a device with history gets, in order.
var ChartNames = []string{"memory_timeline", "overview", "efficiency", "top_consumers", "categories", "block_sizes"}

// Charts draws every device's charts as SVG files. With several devices
// in the report, names get a suffix per device ("_0", "_1", ...).
func Charts(rep *memory.Report) ([]rundir.File, error) {
	n := 0
	for _, in := range rep.Inputs {
		n += len(in.Devices)
	}
	var files []rundir.File
	k := 0
	for _, in := range rep.Inputs {
		for _, d := range in.Devices {
			suffix := ""
			if n > 1 {
				suffix = "_" + strconv.Itoa(k)
			}
			k++
			for _, c := range DeviceCharts(in, d) {
				var buf bytes.Buffer
				if err := chart.WriteSVG(&buf, c.Chart); err != nil {
					return nil, fmt.Errorf("chart %s: %w", c.Name, err)
				}
				files = append(files, rundir.File{Name: c.Name + suffix + ".svg", Data: buf.Bytes()})
			}
		}
	}
	return files, nil
}

// maxStepMarkers bounds the step markers of a time chart: more would hide
// the curve (and cost more to draw than the curve).
const maxStepMarkers = 24

// DeviceCharts builds the charts of one device from its result.
func DeviceCharts(in *memory.Input, d *memory.Result) []NamedChart {
	title := filepath.Base(in.Path) + " (device " + strconv.Itoa(d.Device) + ")"
	tl := &d.Timeline
	var out []NamedChart
	if tl.Len() > 0 {
		xs, xlabel, xunit := timeAxis(d)
		x := func(i int) float64 { return entryX(d, xs, i) }
		markers := stepMarkers(d, x)
		band := func(name string, lo, hi []int64) chart.Series {
			s := chart.Series{Name: name, X: make([]float64, 0, 2*len(lo)), Y: make([]float64, 0, 2*len(lo))}
			for k := range lo {
				s.X = append(s.X, xs[k], xs[k])
				s.Y = append(s.Y, float64(lo[k]), float64(hi[k]))
			}
			return s
		}
		out = append(out, NamedChart{"memory_timeline", chart.Line{Title: "Memory over time: " + title, XLabel: xlabel, XUnit: xunit,
			YLabel: "bytes", YUnit: chart.UnitBytes, Markers: markers, Series: []chart.Series{
				band("reserved", tl.ReservedMinBytes, tl.ReservedMaxBytes),
				band("active", tl.ActiveMinBytes, tl.ActiveMaxBytes),
				band("allocated", tl.AllocatedMinBytes, tl.AllocatedMaxBytes),
			}}})

		area := chart.StackedArea{Title: "Allocated by category, and cached: " + title, XLabel: xlabel, XUnit: xunit,
			YLabel: "bytes", YUnit: chart.UnitBytes, X: xs}
		for _, c := range tl.Categories {
			ys := make([]float64, len(c.Bytes))
			for i, v := range c.Bytes {
				ys[i] = float64(v)
			}
			area.Layers = append(area.Layers, chart.Series{Name: c.Category.String(), Y: ys})
		}
		cached := make([]float64, tl.Len())
		eff := make([]float64, tl.Len())
		for k := range cached {
			cached[k] = float64(max(tl.ReservedAtMaxBytes[k]-tl.AllocatedMaxBytes[k], 0))
			if tl.ReservedAtMaxBytes[k] > 0 {
				eff[k] = float64(tl.AllocatedMaxBytes[k]) / float64(tl.ReservedAtMaxBytes[k])
			}
		}
		area.Layers = append(area.Layers, chart.Series{Name: "cached (reserved - allocated)", Y: cached})
		out = append(out, NamedChart{"overview", area})
		out = append(out, NamedChart{"efficiency", chart.Line{Title: "Allocated / reserved where allocated peaks: " + title,
			XLabel: xlabel, XUnit: xunit, YLabel: "efficiency", YUnit: chart.UnitPercent, Markers: markers,
			Series: []chart.Series{{Name: "allocated / reserved", X: xs, Y: eff}}}})
	}

	top := chart.Bars{Title: "Top consumers at the peak (by stack): " + title, Unit: chart.UnitBytes, Horizontal: true}
	var ys []float64
	for i, s := range d.Stacks {
		if i >= 30 {
			break
		}
		head, user := s.Short(2)
		label := memory.NoStack
		for k, f := range head {
			part := memory.ShortFrame(f)
			if k == 0 {
				label = part
			} else {
				label += " < " + part
			}
		}
		if user != nil {
			label += " … " + memory.ShortFrame(*user)
		}
		top.Labels = append(top.Labels, fmt.Sprintf("[%s] %s", s.Category, label))
		ys = append(ys, float64(s.Bytes))
	}
	top.Stacks = []chart.Series{{Name: "bytes", Y: ys}}
	out = append(out, NamedChart{"top_consumers", top})

	cat := chart.Bars{Title: "Alive at the peak by category: " + title, Unit: chart.UnitBytes, Horizontal: true}
	ys = nil
	for _, c := range d.Categories {
		cat.Labels = append(cat.Labels, c.Category.String())
		ys = append(ys, float64(c.Bytes))
	}
	cat.Stacks = []chart.Series{{Name: "bytes", Y: ys}}
	out = append(out, NamedChart{"categories", cat})

	rows := sizeRows(d.Fragmentation)
	if len(rows) > 0 {
		sizes := chart.Bars{Title: "Block sizes at the end (count): " + title, XLabel: "block size", Unit: chart.UnitPlain}
		act, free := make([]float64, len(rows)), make([]float64, len(rows))
		for i, r := range rows {
			sizes.Labels = append(sizes.Labels, r.label)
			act[i], free[i] = float64(r.active.Count), float64(r.free.Count)
		}
		sizes.Stacks = []chart.Series{{Name: "active blocks", Y: act}, {Name: "free blocks", Y: free}}
		out = append(out, NamedChart{"block_sizes", sizes})
	}
	return out
}

// timeAxis returns the x of every bucket of the thinned timeline: time
// since the first entry (ns) when the trace has times, else the entry
// index of the bucket's first entry.
func timeAxis(d *memory.Result) ([]float64, string, chart.Unit) {
	tl := &d.Timeline
	xs := make([]float64, tl.Len())
	if d.HasTime {
		for k := range xs {
			xs[k] = float64(tl.StartNS[k] - d.FirstTimeNS)
		}
		return xs, "time since the first entry", chart.UnitDuration
	}
	for k := range xs {
		xs[k] = float64(tl.FirstIndex[k])
	}
	return xs, "trace entry", chart.UnitPlain
}

// entryX is the x of entry i: the x of the bucket holding it.
func entryX(d *memory.Result, xs []float64, i int) float64 {
	tl := &d.Timeline
	lo, hi := 0, tl.Len()-1
	for lo < hi {
		m := (lo + hi + 1) / 2
		if tl.FirstIndex[m] <= i {
			lo = m
		} else {
			hi = m - 1
		}
	}
	return xs[lo]
}

// stepMarkers marks the peak and the starts of at most maxStepMarkers
// steps (every k-th when there are more).
func stepMarkers(d *memory.Result, x func(int) float64) []chart.Marker {
	var ms []chart.Marker
	if d.Peak.EventIndex >= 0 {
		ms = append(ms, chart.Marker{X: x(d.Peak.EventIndex), Label: "peak " + units.Bytes(d.Peak.AllocatedBytes)})
	}
	every := (len(d.Steps) + maxStepMarkers - 1) / maxStepMarkers
	for i, s := range d.Steps {
		if s.StartIndex > 0 && i%max(every, 1) == 0 {
			ms = append(ms, chart.Marker{X: x(s.StartIndex), Label: s.Name})
		}
	}
	return ms
}
