package memreport

import (
	"bytes"
	"fmt"
	"path"
	"path/filepath"
	"strconv"

	"github.com/ptscope/ptscope/internal/report/rundir"

	"github.com/ptscope/ptscope/internal/memory"
	"github.com/ptscope/ptscope/internal/report/chart"
	"github.com/ptscope/ptscope/internal/units"
)

// maxPoints bounds the points of time-series charts (the chart package
// decimates further per pixel, keeping minima and maxima).
const maxPoints = 4000

// WriteCharts writes the PNG charts of every analysed device into dir. With
// several inputs or devices, file names get a suffix per device.
func WriteCharts(dir string, doc *Document) error {
	n := 0
	for _, in := range doc.Inputs {
		n += len(in.Devices)
	}
	k := 0
	for _, in := range doc.Inputs {
		for _, d := range in.Devices {
			suffix := ""
			if n > 1 {
				suffix = "_" + strconv.Itoa(k)
			}
			k++
			if err := deviceCharts(dir, suffix, in, d); err != nil {
				return err
			}
		}
	}
	return nil
}

func deviceCharts(dir, suffix string, in *Input, d *memory.Device) error {
	title := filepath.Base(in.Path) + " (device " + strconv.Itoa(d.Device) + ")"
	t := &d.Replay.Timeline
	xs, xlabel, xunit := timeAxis(d)
	idx := sampleIdx(t.Len(), maxPoints)
	pick := func(v []int64) []float64 {
		out := make([]float64, len(idx))
		for i, j := range idx {
			out[i] = float64(v[j])
		}
		return out
	}
	px := make([]float64, len(idx))
	for i, j := range idx {
		px[i] = xs[j]
	}
	var markers []chart.Marker
	if d.Peak.EventIndex >= 0 {
		markers = append(markers, chart.Marker{X: xs[d.Peak.EventIndex], Label: "peak " + units.Bytes(d.Peak.AllocatedBytes)})
	}
	for _, s := range d.Steps {
		if s.StartIndex > 0 && s.StartIndex < len(xs) {
			markers = append(markers, chart.Marker{X: xs[s.StartIndex], Label: s.Name})
		}
	}
	var charts []named
	if t.Len() > 0 {
		charts = append(charts, named{"memory_timeline", chart.Line{Title: "Memory over time: " + title, XLabel: xlabel, XUnit: xunit,
			YLabel: "bytes", YUnit: chart.UnitBytes, Markers: markers, Series: []chart.Series{
				{Name: "reserved", X: px, Y: pick(t.Reserved)},
				{Name: "active", X: px, Y: pick(t.Active)},
				{Name: "allocated", X: px, Y: pick(t.Allocated)},
				{Name: "requested", X: px, Y: pick(t.Requested)},
			}}})
		cx, layers := d.Replay.CategoryTimeline(maxPoints)
		area := chart.StackedArea{Title: "Allocated by category, and cached: " + title, XLabel: xlabel, XUnit: xunit, YLabel: "bytes", YUnit: chart.UnitBytes}
		for _, j := range cx {
			area.X = append(area.X, xs[j])
		}
		for _, c := range memory.Categories() {
			ys := make([]float64, len(cx))
			var any bool
			for i := range cx {
				ys[i] = float64(layers[c][i])
				any = any || ys[i] != 0
			}
			if any {
				area.Layers = append(area.Layers, chart.Series{Name: c.String(), Y: ys})
			}
		}
		cached := make([]float64, len(cx))
		for i, j := range cx {
			cached[i] = float64(t.Reserved[j] - t.Allocated[j])
		}
		area.Layers = append(area.Layers, chart.Series{Name: "cached (reserved - allocated)", Y: cached})
		charts = append(charts, named{"overview", area})

		eff := make([]float64, len(idx))
		for i, j := range idx {
			if t.Reserved[j] > 0 {
				eff[i] = float64(t.Allocated[j]) / float64(t.Reserved[j])
			}
		}
		charts = append(charts, named{"efficiency", chart.Line{Title: "Allocated / reserved: " + title, XLabel: xlabel, XUnit: xunit,
			YLabel: "efficiency", YUnit: chart.UnitPercent, Series: []chart.Series{{Name: "allocated / reserved", X: px, Y: eff}}, Markers: markers}})
	}
	top := chart.Bars{Title: "Top consumers at the peak (by stack): " + title, Unit: chart.UnitBytes, Horizontal: true}
	var ys []float64
	for i, s := range d.StacksAtPeak {
		if i >= 30 {
			break
		}
		label := "<no stack recorded>"
		for k, f := range s.Frames {
			if k == 2 {
				break
			}
			part := path.Base(f.Filename) + ":" + strconv.Itoa(f.Line) + " " + f.Name
			if k == 0 {
				label = part
			} else {
				label += " < " + part
			}
		}
		top.Labels = append(top.Labels, fmt.Sprintf("[%s] %s", s.Category, label))
		ys = append(ys, float64(s.Bytes))
	}
	top.Stacks = []chart.Series{{Name: "bytes", Y: ys}}
	charts = append(charts, named{"top_consumers", top})

	cat := chart.Bars{Title: "Alive at the peak by category: " + title, Unit: chart.UnitBytes, Horizontal: true}
	ys = nil
	for _, c := range d.CategoriesAtPeak {
		cat.Labels = append(cat.Labels, c.Name)
		ys = append(ys, float64(c.Bytes))
	}
	cat.Stacks = []chart.Series{{Name: "bytes", Y: ys}}
	charts = append(charts, named{"categories", cat})

	f := d.Fragmentation
	sizes := chart.Bars{Title: "Block sizes at the end (count): " + title, XLabel: "block size", Unit: chart.UnitPlain}
	lo := map[int64]int{}
	var keys []int64
	for _, b := range f.ActiveSizes {
		if _, ok := lo[b.Lo]; !ok {
			lo[b.Lo] = len(keys)
			keys = append(keys, b.Lo)
		}
	}
	for _, b := range f.FreeSizes {
		if _, ok := lo[b.Lo]; !ok {
			lo[b.Lo] = len(keys)
			keys = append(keys, b.Lo)
		}
	}
	sortInt64(keys)
	for i, k := range keys {
		lo[k] = i
		sizes.Labels = append(sizes.Labels, "≥"+units.Bytes(k))
	}
	act, free := make([]float64, len(keys)), make([]float64, len(keys))
	for _, b := range f.ActiveSizes {
		act[lo[b.Lo]] = float64(b.Count)
	}
	for _, b := range f.FreeSizes {
		free[lo[b.Lo]] = float64(b.Count)
	}
	sizes.Stacks = []chart.Series{{Name: "active blocks", Y: act}, {Name: "free blocks", Y: free}}
	if len(keys) > 0 {
		charts = append(charts, named{"block_sizes", sizes})
	}

	for _, c := range charts {
		var buf bytes.Buffer
		if err := chart.WritePNG(&buf, c.c); err != nil {
			return fmt.Errorf("chart %s: %w", c.name, err)
		}
		if err := rundir.WriteFileAtomic(filepath.Join(dir, c.name+suffix+".png"), buf.Bytes()); err != nil {
			return err
		}
	}
	return nil
}

type named struct {
	name string
	c    chart.Chart
}

// timeAxis returns the x value of every entry: milliseconds since the first
// entry when the trace has times, else the entry index.
func timeAxis(d *memory.Device) ([]float64, string, chart.Unit) {
	t := &d.Replay.Timeline
	xs := make([]float64, t.Len())
	if d.HasTime && t.Len() > 0 {
		t0 := t.TimeUS[0]
		for i, v := range t.TimeUS {
			xs[i] = float64(v-t0) * 1000 // ns
		}
		return xs, "time since the first entry", chart.UnitDuration
	}
	for i := range xs {
		xs[i] = float64(i)
	}
	return xs, "trace entry", chart.UnitPlain
}

// sampleIdx picks up to n indices of [0, total), always keeping the extremes
// of each bucket would need the data; the chart package decimates with
// min/max itself, so here we only bound the work with an even stride that
// includes the last index.
func sampleIdx(total, n int) []int {
	if total <= n {
		out := make([]int, total)
		for i := range out {
			out[i] = i
		}
		return out
	}
	out := make([]int, 0, n)
	for i := 0; i < n; i++ {
		out = append(out, i*(total-1)/(n-1))
	}
	return out
}

func sortInt64(a []int64) {
	for i := 1; i < len(a); i++ {
		for j := i; j > 0 && a[j] < a[j-1]; j-- {
			a[j], a[j-1] = a[j-1], a[j]
		}
	}
}
