package cli

import (
	"bytes"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/ptscope/ptscope/internal/report/rundir"

	"github.com/ptscope/ptscope/internal/estimate"
	"github.com/ptscope/ptscope/internal/report/chart"
)

// writeEstimateOut writes a run folder: estimate.txt (the --explain text), estimate.json and
// phases.svg/.png (a stacked bar of what each phase holds; one bar per pipeline stage too).
func writeEstimateOut(e *env, outDir string, r *estimate.Result) error {
	dir, err := rundir.NewRunDir(outDir, "estimate_"+r.Model.Name)
	if err != nil && dir == "" {
		return err
	}
	var txt, js bytes.Buffer
	writeEstimateText(&txt, r, true)
	if err := writeEstimateJSON(&js, r); err != nil {
		return err
	}
	files := map[string][]byte{"estimate.txt": txt.Bytes(), "estimate.json": js.Bytes()}
	top := r.TopRank()
	var labels []string
	var phases [][]estimate.Term
	for _, p := range top.Phases {
		labels = append(labels, p.Name)
		phases = append(phases, p.Terms)
	}
	title := fmt.Sprintf("%s: allocated memory by phase (%s)", r.Model.Name, top.Name)
	if err := addBars(files, "phases", title, labels, phases); err != nil {
		return err
	}
	if len(r.Ranks) > 1 {
		labels, phases = nil, nil
		for _, rk := range r.Ranks {
			labels = append(labels, rk.Name)
			for _, p := range rk.Phases {
				if p.Name == rk.PeakPhase {
					phases = append(phases, p.Terms)
				}
			}
		}
		if err := addBars(files, "ranks", r.Model.Name+": peak allocated memory per pipeline stage", labels, phases); err != nil {
			return err
		}
	}
	for name, b := range files {
		if err := rundir.WriteFileAtomic(filepath.Join(dir, name), b); err != nil {
			return err
		}
	}
	fmt.Fprintf(e.stderr, "wrote %s\n", dir)
	return nil
}

// addBars renders stacked bars (one stack layer per term name) as SVG and PNG.
func addBars(files map[string][]byte, name, title string, labels []string, bars [][]estimate.Term) error {
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
	sort.SliceStable(layers, func(a, b int) bool { return estimateSum(layers[a].Y) > estimateSum(layers[b].Y) })
	c := chart.Bars{Title: title, XLabel: strings.ReplaceAll(name, "_", " "), Unit: chart.UnitBytes, Labels: labels, Stacks: layers}
	var svg, png bytes.Buffer
	if err := chart.WriteSVG(&svg, c); err != nil {
		return err
	}
	if err := chart.WritePNG(&png, c); err != nil {
		return err
	}
	files[name+".svg"], files[name+".png"] = svg.Bytes(), png.Bytes()
	return nil
}

func estimateSum(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x
	}
	return s
}
