package fleetreport

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/ptscope/ptscope/internal/fleet"
	"github.com/ptscope/ptscope/internal/report"
	"github.com/ptscope/ptscope/internal/report/chart"
	"github.com/ptscope/ptscope/internal/report/rundir"
)

// RunFiles are the run folder's README.md and PNG charts of the ranks'
// peaks and steps.
func (d *Document) RunFiles(o report.TextOptions) ([]rundir.File, error) {
	var files []rundir.File
	var list []string
	for _, nc := range Charts(d.Report) {
		var b bytes.Buffer
		if err := chart.WritePNG(&b, nc.Chart); err != nil {
			return nil, fmt.Errorf("chart %s: %w", nc.File, err)
		}
		files = append(files, rundir.File{Name: nc.File + ".png", Data: b.Bytes()})
		list = append(list, nc.File+".png")
	}
	var txt strings.Builder
	if err := d.WriteText(&txt, o); err != nil {
		return nil, err
	}
	var md strings.Builder
	fmt.Fprintf(&md, "# Fleet of %d ranks\n\n", d.Report.Ranks)
	md.WriteString("The summary as `ptscope " + d.Report.Command + "` printed it; `report.json` holds every rank's row.\n\n```\n")
	md.WriteString(txt.String())
	md.WriteString("```\n")
	for _, f := range list {
		fmt.Fprintf(&md, "\n![%s](%s)\n", strings.TrimSuffix(f, ".png"), f)
	}
	return append([]rundir.File{{Name: "README.md", Data: []byte(md.String())}}, files...), nil
}

// NamedChart is a chart with its file name (without extension).
type NamedChart struct {
	File  string
	Chart chart.Chart
}

// Charts are a fleet's charts: peak memory by rank, and the average step and
// GPU utilisation by rank.
func Charts(rep *fleet.Report) []NamedChart {
	var out []NamedChart
	if m := rep.Memory; m != nil && m.PeakAllocated.Ranks > 0 {
		var x, alloc, res []float64
		for _, r := range m.Ranks {
			if !r.Measured() {
				continue
			}
			x = append(x, float64(r.Rank))
			alloc = append(alloc, float64(r.PeakAllocatedBytes))
			res = append(res, float64(r.PeakReservedBytes))
		}
		out = append(out, NamedChart{"peak_by_rank", chart.Line{Title: "Peak memory by rank", XLabel: "rank", YLabel: "bytes",
			YUnit: chart.UnitBytes, Series: []chart.Series{{Name: "peak allocated", X: x, Y: alloc}, {Name: "peak reserved", X: x, Y: res}}}})
	}
	if t := rep.Time; t != nil && t.StepTime.Ranks > 0 {
		var x, step, util []float64
		for _, r := range t.Ranks {
			if r.Steps == 0 {
				continue
			}
			x = append(x, float64(r.Rank))
			step = append(step, float64(r.AverageStepNS))
			util = append(util, r.GPUUtilizationRatio)
		}
		out = append(out, NamedChart{"step_by_rank", chart.Line{Title: "Average step by rank", XLabel: "rank", YLabel: "step",
			YUnit: chart.UnitDuration, Series: []chart.Series{{Name: "average step", X: x, Y: step}}}})
		out = append(out, NamedChart{"gpu_utilization_by_rank", chart.Line{Title: "GPU utilization by rank", XLabel: "rank",
			YLabel: "utilization", YUnit: chart.UnitPercent, YMin: 0, YMax: 1, Series: []chart.Series{{Name: "GPU utilization", X: x, Y: util}}}})
	}
	return out
}
