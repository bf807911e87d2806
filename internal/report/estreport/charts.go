package estreport

import (
	"bytes"
	"fmt"
	"sort"

	"github.com/ptscope/ptscope/internal/estimate"
	"github.com/ptscope/ptscope/internal/report/chart"
	"github.com/ptscope/ptscope/internal/report/rundir"
)

// estimateCharts are stacked bars of what each phase holds (phases.svg,
// .png) and, for pipelines, of each stage's peak (ranks.svg, .png).
func estimateCharts(r *estimate.Result) ([]rundir.File, error) {
	top := r.Top()
	var labels []string
	var bars [][]estimate.Term
	for _, p := range top.Phases {
		labels = append(labels, p.Name.String())
		bars = append(bars, p.Terms)
	}
	files, err := barFiles("phases", fmt.Sprintf("%s: allocated memory by phase (%s)", r.Model.Name, top.Name), labels, bars)
	if err != nil || len(r.Ranks) < 2 {
		return files, err
	}
	labels, bars = nil, nil
	for _, rk := range r.Ranks {
		labels = append(labels, rk.Name)
		for _, p := range rk.Phases {
			if p.Name == rk.PeakPhase {
				bars = append(bars, p.Terms)
			}
		}
	}
	more, err := barFiles("ranks", r.Model.Name+": peak allocated memory per pipeline stage", labels, bars)
	return append(files, more...), err
}

// barFiles renders stacked bars (one layer per term name) as SVG and PNG.
func barFiles(name, title string, labels []string, bars [][]estimate.Term) ([]rundir.File, error) {
	idx := map[string]int{}
	var layers []chart.Series
	for i, terms := range bars {
		for _, t := range terms {
			if t.Bytes <= 0 {
				continue
			}
			j, ok := idx[t.Name]
			if !ok {
				j = len(layers)
				idx[t.Name] = j
				layers = append(layers, chart.Series{Name: t.Name, Y: make([]float64, len(labels))})
			}
			layers[j].Y[i] += float64(t.Bytes)
		}
	}
	sort.SliceStable(layers, func(a, b int) bool { return sum(layers[a].Y) > sum(layers[b].Y) })
	c := chart.Bars{Title: title, XLabel: name, Unit: chart.UnitBytes, Labels: labels, Stacks: layers}
	var svg, png bytes.Buffer
	if err := chart.WriteSVG(&svg, c); err != nil {
		return nil, err
	}
	if err := chart.WritePNG(&png, c); err != nil {
		return nil, err
	}
	return []rundir.File{{Name: name + ".svg", Data: svg.Bytes()}, {Name: name + ".png", Data: png.Bytes()}}, nil
}

func sum(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x
	}
	return s
}
