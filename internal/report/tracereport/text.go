package tracereport

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/ptscope/ptscope/internal/finding"
	"github.com/ptscope/ptscope/internal/perf"
	"github.com/ptscope/ptscope/internal/report"
	"github.com/ptscope/ptscope/internal/units"
)

// printer is the shared report.Printer (every line cut to the width)
// with the trace report's own blocks.
type printer struct{ *report.Printer }

// label writes "  label  text" with text wrapped under itself.
func (p *printer) label(name, text string) {
	lead := "  " + name + strings.Repeat(" ", max(11-len(name), 1))
	p.Para(text, lead, strings.Repeat(" ", len(lead)))
}

func (p *printer) table(cols []column) {
	if p.Err == nil {
		p.Err = writeTable(p.W, p.O.Width, cols)
	}
}

func (p *printer) findings(fs []finding.Finding) {
	if len(fs) == 0 {
		p.Blank()
		p.Line("Findings: none")
		return
	}
	p.Title("Findings")
	for _, f := range fs {
		for _, l := range p.O.FindingLines(f, "  ") {
			p.Raw(l)
		}
	}
}

func dur(ns int64) string  { return units.Duration(ns) }
func pct(r float64) string { return units.Percent(r) }
func size(n int64) string  { return units.Bytes(n) }
func ratio(part, total int64) string {
	if total <= 0 {
		return "-"
	}
	return units.Percent(float64(part) / float64(total))
}

// WriteText writes the document's view of every rank, then the cross-rank
// comparison where the view shows it.
func (d *Document) WriteText(w io.Writer, o report.TextOptions) error {
	if o.Width <= 0 {
		o.Width = report.DefaultText().Width
	}
	p := &printer{report.NewPrinter(w, o)}
	rep := d.Report
	top := o.Top
	if top <= 0 {
		top = 10
	}
	for i := range rep.Ranks {
		r := &rep.Ranks[i]
		if i > 0 {
			p.Blank()
		}
		header(p, r)
		switch d.View {
		case Overview, "":
			if len(rep.Ranks) == 1 {
				stepsTable(p, r, false)
			}
			averages(p, r)
			p.findings(r.Findings)
			if len(rep.Ranks) == 1 {
				operators(p, r, top)
				kernels(p, r, top)
			}
		case Operators:
			operators(p, r, top)
		case Kernels:
			kernels(p, r, top)
		case Steps:
			stepsTable(p, r, true)
			userRanges(p, r, top)
		case Idle:
			idle(p, r)
		case Comm:
			comm(p, r)
			commOps(p, r)
		case Memory:
			memory(p, r)
			memoryOps(p, r, top)
		case Critical:
			critical(p, r, top)
		case Sequences:
			sequences(p, r, top)
		case Modules:
			modules(p, r, top)
		case Streams:
			streams(p, r, top)
		}
	}
	crossView := d.View == Overview || d.View == "" || d.View == Comm || d.View == Steps
	if c := rep.CrossRank; c != nil && crossView {
		cross(p, rep, top)
		if d.View == Comm {
			workers(p, c)
		}
	}
	// traces of several runs: each run's ranks compared on their own
	for k, j := range rep.Jobs {
		if j.CrossRank == nil || !crossView {
			continue
		}
		sub := &perf.Report{CrossRank: j.CrossRank, Findings: j.Findings}
		for _, i := range j.Traces {
			sub.Ranks = append(sub.Ranks, rep.Ranks[i])
		}
		p.Blank()
		p.Line(fmt.Sprintf("Run %d of %d: %s", k+1, len(rep.Jobs), BaseName(sub.Ranks[0].Path)))
		cross(p, sub, top)
	}
	for _, w := range rep.Warnings {
		p.Blank()
		p.Para("Note: "+w+".", "", "")
	}
	if len(rep.Ranks) > 1 && (d.View == Overview || d.View == "") {
		p.Blank()
		p.Para("With several ranks the overview leaves out each rank's steps, operators and kernels: --view steps, --view operators and --view kernels list them per rank.", "", "")
	}
	return p.Flush()
}

func header(p *printer, r *perf.Rank) {
	p.Line(report.CutMiddle(r.Path, p.O.Width))
	rank := fmt.Sprintf("rank %d", r.Rank)
	if r.WorldSize > 0 {
		rank += fmt.Sprintf(" of %d", r.WorldSize)
	}
	if r.Backend != "" {
		rank += " (" + r.Backend + ")"
	}
	var gpus []string
	for _, g := range r.GPUs {
		s := fmt.Sprintf("GPU %d", g.Device)
		if g.Name != "" {
			s += " " + g.Name
		}
		gpus = append(gpus, s)
	}
	if len(gpus) == 0 {
		gpus = []string{"no GPU work"}
	}
	p.Para(fmt.Sprintf("%s, %s events, %s; %s", size(r.Bytes), count(r.Events), rank, strings.Join(gpus, ", ")), "  ", "  ")
	var opts []string
	if r.Profiler.WithStack {
		opts = append(opts, "with_stack")
	}
	if r.Profiler.RecordShapes {
		opts = append(opts, "record_shapes")
	}
	if r.Profiler.ProfileMemory {
		opts = append(opts, "profile_memory")
	}
	src := map[perf.StepSource]string{
		perf.StepsProfiler:   "steps from ProfilerStep#N",
		perf.StepsOptimizer:  "no profiler schedule: one step per Optimizer.step",
		perf.StepsBundle:     "no step marker: steps from the bundle's phases",
		perf.StepsWholeTrace: "no step marker: the whole trace is one step",
	}[r.StepSource]
	if len(opts) > 0 {
		src += "; recorded with " + strings.Join(opts, ", ")
	}
	p.Para(src, "  ", "  ")
}

// pickSteps returns the indices of the steps to list: all, or the first,
// the last, the slowest and the outliers.
func pickSteps(r *perf.Rank, o report.TextOptions) []int {
	n := len(r.Steps)
	if o.Steps == report.StepsAll || n <= 8 {
		out := make([]int, n)
		for i := range out {
			out[i] = i
		}
		return out
	}
	idx := []int{0, n - 1}
	if r.SlowestStep >= 0 {
		idx = append(idx, r.SlowestStep)
	}
	// the outliers, slowest first, at most maxOutliers
	out := slices.Clone(r.OutlierSteps)
	slices.SortStableFunc(out, func(a, b int) int {
		return int(min(max(r.Steps[b].DurationNS-r.Steps[a].DurationNS, -1), 1))
	})
	idx = append(idx, out[:min(len(out), maxOutliers)]...)
	slices.Sort(idx)
	return slices.Compact(idx)
}

// maxOutliers bounds the outlier steps a summary lists.
const maxOutliers = 6
