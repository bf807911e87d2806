package tracereport

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"github.com/ptscope/ptscope/internal/perf"
	"github.com/ptscope/ptscope/internal/report"
	"github.com/ptscope/ptscope/internal/report/chart"
	"github.com/ptscope/ptscope/internal/report/rundir"
	"github.com/ptscope/ptscope/internal/units"
)

// maxBars bounds the steps drawn in the step chart (evenly picked, the
// slowest always in).
const maxBars = 120

// namedChart is one chart file.
type namedChart struct {
	file string
	c    chart.Chart
}

// RunFiles are the run folder's README.md and PNG charts (per rank, file
// names prefixed "rankN_" when there are several, "rankN_2_" for a second
// trace of rank N).
func (d *Document) RunFiles(o report.TextOptions) ([]rundir.File, error) {
	var files []rundir.File
	var list []string
	seen := map[int]int{} // traces so far per rank number
	for i := range d.Report.Ranks {
		r := &d.Report.Ranks[i]
		prefix := ""
		if len(d.Report.Ranks) > 1 {
			// traces of unrelated runs can share a rank number: the
			// second rank 0 is rank0_2_, as rundir numbers folders
			seen[r.Rank]++
			prefix = fmt.Sprintf("rank%d_", r.Rank)
			if n := seen[r.Rank]; n > 1 {
				prefix = fmt.Sprintf("rank%d_%d_", r.Rank, n)
			}
		}
		for _, nc := range Charts(r) {
			var b bytes.Buffer
			if err := chart.WritePNG(&b, nc.c); err != nil {
				return nil, fmt.Errorf("chart %s: %w", nc.file, err)
			}
			name := prefix + nc.file + ".png"
			files = append(files, rundir.File{Name: name, Data: b.Bytes()})
			list = append(list, name)
		}
	}
	readme := d.readme(list)
	return append([]rundir.File{{Name: "README.md", Data: []byte(readme)}}, files...), nil
}

// Charts lays out the charts of one rank from its result: the steps'
// breakdown, compute utilisation over time, the top operators and kernels,
// and the [memory] curve.
func Charts(r *perf.Rank) []namedChart {
	var out []namedChart
	if n := len(r.Steps); n > 0 {
		idx := make([]int, 0, min(n, maxBars+1))
		stride := (n + maxBars - 1) / maxBars
		for i := 0; i < n; i += stride {
			idx = append(idx, i)
		}
		if s := r.SlowestStep; s >= 0 && s%stride != 0 {
			idx = append(idx, s)
		}
		b := chart.Bars{Title: "Step time breakdown", XLabel: "step", Unit: chart.UnitDuration}
		if stride > 1 {
			b.Title += fmt.Sprintf(" (one step in %d of %d, and the slowest)", stride, n)
		}
		parts := r.Steps[0].Breakdown.Parts()
		stacks := make([]chart.Series, len(parts))
		for k, p := range parts {
			stacks[k].Name = p.Name
		}
		slices.Sort(idx)
		for _, i := range idx {
			s := r.Steps[i]
			b.Labels = append(b.Labels, s.Name)
			for k, p := range s.Breakdown.Parts() {
				stacks[k].Y = append(stacks[k].Y, float64(p.NS))
			}
		}
		b.Stacks = stacks
		out = append(out, namedChart{"step_breakdown", b})
	}
	if len(r.UtilTimeline) > 0 && len(r.Steps) > 0 {
		t0 := r.Steps[0].StartTimeNS
		l := chart.Line{Title: "GPU compute utilization over time", XLabel: "time from the first step", XUnit: chart.UnitDuration,
			YLabel: "compute busy", YUnit: chart.UnitPercent, YMin: 0, YMax: 1}
		byDev := map[int]int{}
		for _, p := range r.UtilTimeline {
			k, ok := byDev[p.Device]
			if !ok {
				k = len(l.Series)
				byDev[p.Device] = k
				l.Series = append(l.Series, chart.Series{Name: fmt.Sprintf("GPU %d", p.Device)})
			}
			s := &l.Series[k]
			s.X = append(s.X, float64(p.StartTimeNS-t0))
			s.Y = append(s.Y, p.UtilizationRatio)
		}
		out = append(out, namedChart{"gpu_utilization", l})
	}
	if n := min(15, len(r.Operators)); n > 0 {
		b := chart.Bars{Title: "Top operators by device self time", XLabel: "device self time", Unit: chart.UnitDuration, Horizontal: true}
		s := chart.Series{Name: "device self"}
		for _, o := range r.Operators[:n] {
			b.Labels = append(b.Labels, report.CutMiddle(o.Name, 50))
			s.Y = append(s.Y, float64(o.DeviceSelfNS))
		}
		b.Stacks = []chart.Series{s}
		out = append(out, namedChart{"top_operators", b})
	}
	if n := min(15, len(r.Kernels)); n > 0 {
		b := chart.Bars{Title: "Top kernels by total time", XLabel: "total time", Unit: chart.UnitDuration, Horizontal: true}
		s := chart.Series{Name: "total"}
		for _, k := range r.Kernels[:n] {
			b.Labels = append(b.Labels, report.CutMiddle(k.Name, 50))
			s.Y = append(s.Y, float64(k.TotalNS))
		}
		b.Stacks = []chart.Series{s}
		out = append(out, namedChart{"top_kernels", b})
	}
	var mem []chart.Series
	var t0 int64
	if len(r.Steps) > 0 {
		t0 = r.Steps[0].HostStartTimeNS
	}
	for _, d := range r.Memory.Devices {
		if !d.IsGPU || len(d.Curve) == 0 {
			continue
		}
		a := chart.Series{Name: d.Device + " allocated"}
		rs := chart.Series{Name: d.Device + " reserved"}
		for _, p := range d.Curve {
			a.X = append(a.X, float64(p.TimeNS-t0))
			a.Y = append(a.Y, float64(p.AllocatedBytes))
			rs.X = append(rs.X, float64(p.TimeNS-t0))
			rs.Y = append(rs.Y, float64(p.ReservedBytes))
		}
		mem = append(mem, a, rs)
	}
	if len(mem) > 0 {
		out = append(out, namedChart{"memory", chart.Line{Title: "GPU memory ([memory] events)", XLabel: "time from the first step", XUnit: chart.UnitDuration,
			YLabel: "bytes", YUnit: chart.UnitBytes, Series: mem}})
	}
	return out
}

// readme is the run folder's README.md: what was analysed, the headline
// numbers, the findings and the files.
func (d *Document) readme(charts []string) string {
	var b strings.Builder
	rep := d.Report
	fmt.Fprintf(&b, "# ptscope trace: %s\n\n", d.RunName())
	b.WriteString("| rank | trace | steps | average step | GPU compute | idle | DataLoader | findings |\n|---|---|---|---|---|---|---|---|\n")
	for _, r := range rep.Ranks {
		fmt.Fprintf(&b, "| %d | `%s` | %d (%s) | %s | %s | %s | %s | %d |\n", r.Rank, r.Path, len(r.Steps), r.StepSource,
			units.Duration(r.AverageStepNS), units.Percent(r.GPUUtilizationRatio), units.Percent(r.Idle.IdleRatio),
			units.Percent(r.DataLoaderRatio), len(r.Findings))
	}
	for _, r := range rep.Ranks {
		if len(r.Findings) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n## Findings, rank %d\n\n", r.Rank)
		for _, f := range r.Findings {
			fmt.Fprintf(&b, "- **%s** `%s`: %s", f.Severity, f.ID, f.Message)
			if f.Recommendation != "" {
				fmt.Fprintf(&b, "\n  %s", f.Recommendation)
			}
			b.WriteString("\n")
		}
	}
	if len(rep.Findings) > 0 {
		b.WriteString("\n## Findings across ranks\n\n")
		for _, f := range rep.Findings {
			fmt.Fprintf(&b, "- **%s** `%s`: %s\n", f.Severity, f.ID, f.Message)
		}
	}
	b.WriteString("\n## Files\n\n- `report.txt`: the text report (`ptscope trace`)\n- `report.json`: the complete result (`ptscope trace --json`; docs/json.md)\n")
	for _, c := range charts {
		fmt.Fprintf(&b, "- `%s`\n", c)
	}
	return b.String()
}
