// Package diffreport renders a diff.Report: the terminal text of `ptscope
// diff` (every line within the width, both sides' numbers and the change in
// every row, the largest changes first) and its JSON, which is the report
// itself. It formats and trims; every number comes from the diff.
package diffreport

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/ptscope/ptscope/internal/diff"
	"github.com/ptscope/ptscope/internal/finding"
	"github.com/ptscope/ptscope/internal/memory"
	"github.com/ptscope/ptscope/internal/report"
	"github.com/ptscope/ptscope/internal/report/rundir"
	"github.com/ptscope/ptscope/internal/units"
)

// Document is a diff.Report as the output switch renders it.
type Document struct {
	Report *diff.Report
	Name   string // run folder name (default "diff_A_vs_B")
}

// New returns the document of rep.
func New(rep *diff.Report) *Document { return &Document{Report: rep} }

// MarshalJSON writes the report.
func (d *Document) MarshalJSON() ([]byte, error) { return json.Marshal(d.Report) }

// RunName names the run folder.
func (d *Document) RunName() string {
	if d.Name != "" {
		return d.Name
	}
	return "diff_" + base(d.Report.A.Path) + "_vs_" + base(d.Report.B.Path)
}

func base(p string) string {
	b := filepath.Base(strings.TrimRight(p, "/"))
	for _, ext := range []string{".gz", ".xz", ".zst", ".json", ".pickle", ".pkl", ".trace", ".pt", ".json", ".trace", ".pt"} {
		b = strings.TrimSuffix(b, ext)
	}
	return b
}

// RunFiles adds nothing to report.txt and report.json.
func (d *Document) RunFiles(report.TextOptions) ([]rundir.File, error) { return nil, nil }

// printer is the shared report.Printer (every line cut to the width),
// as the trace report's; with html set, the same sections go to an HTML
// page instead (WriteHTML).
type printer struct {
	*report.Printer
	html *htmlPage
}

// table writes t indented by two.
func (p *printer) table(t *report.Table) {
	if p.html != nil {
		p.html.table(t)
		return
	}
	p.Table(t, "  ")
}

// Line writes a line of text.
func (p *printer) Line(s string) {
	if p.html != nil {
		p.html.line(s)
		return
	}
	p.Printer.Line(s)
}

// Raw writes a line laid out already (a finding's).
func (p *printer) Raw(s string) {
	if p.html != nil {
		p.html.line(s)
		return
	}
	p.Printer.Raw(s)
}

// Title writes a section title.
func (p *printer) Title(s string) {
	if p.html != nil {
		p.html.title(s)
		return
	}
	p.Printer.Title(s)
}

// section opens a pair's section: its title, then the two inputs' paths
// when they differ.
func (p *printer) section(title, a, b string) {
	p.Title(title)
	if a != b {
		p.Line("  A " + report.CutMiddle(a, p.O.Width-4))
		p.Line("  B " + report.CutMiddle(b, p.O.Width-4))
	}
}

// WriteText writes the comparison: the inputs, what changed (findings),
// then each memory pair and each trace pair.
func (d *Document) WriteText(w io.Writer, o report.TextOptions) error {
	if o.Width <= 0 {
		o.Width = report.DefaultText().Width
	}
	return d.write(&printer{Printer: report.NewPrinter(w, o)})
}

// write writes the sections through p, as text or as HTML.
func (d *Document) write(p *printer) error {
	if p.O.Top <= 0 {
		p.O.Top = 10
	}
	o := p.O
	r := d.Report
	p.Line("ptscope diff")
	for _, s := range []struct {
		tag  string
		side diff.Side
	}{{"A", r.A}, {"B", r.B}} {
		var what []string
		if s.side.Devices > 0 {
			what = append(what, units.Plural(s.side.Devices, "snapshot device", "snapshot devices"))
		}
		if s.side.Ranks > 0 {
			what = append(what, units.Plural(s.side.Ranks, "trace rank", "trace ranks"))
		}
		suffix := " (" + strings.Join(what, ", ") + ")"
		room := o.Width - 5 - len(suffix)
		p.Line("  " + s.tag + "  " + report.CutMiddle(s.side.Path, max(room, 12)) + suffix)
	}
	p.Title("What changed")
	if len(r.Findings) == 0 {
		p.Line("  nothing beyond the thresholds (peak ±1%, step time ±5%, GPU utilisation -5 points)")
	}
	for _, f := range r.Findings {
		for _, l := range p.O.FindingLines(f, "  ") {
			p.Raw(l)
		}
	}
	for i := range r.Memory {
		writeMemory(p, &r.Memory[i])
	}
	for i := range r.Trace {
		writeTrace(p, &r.Trace[i])
	}
	if len(r.Unmatched) > 0 {
		p.Title("Only on one side")
		t := &report.Table{Header: []string{"side", "kind", "what", "path"}}
		for _, u := range r.Unmatched {
			t.Rows = append(t.Rows, []string{strings.ToUpper(u.Side), u.Kind, u.Key, u.Path})
		}
		p.table(t)
	}
	return p.Flush()
}

// Cells of a comparison row.

func signedBytes(n int64) string {
	if n > 0 {
		return "+" + units.Bytes(n)
	}
	if n == 0 {
		return "0 B"
	}
	return units.Bytes(n)
}

func signedDuration(n int64) string {
	if n > 0 {
		return "+" + units.Duration(n)
	}
	if n == 0 {
		return "0"
	}
	return units.Duration(n)
}

func changeCell(c *float64, a, b float64) string {
	switch {
	case c != nil:
		if math.Abs(*c) >= 10 {
			return fmt.Sprintf("%+.0fx", *c+1)
		}
		return fmt.Sprintf("%+.1f%%", *c*100)
	case b != 0:
		return "new"
	case a == 0:
		return "-"
	}
	return "gone"
}

func bytesRow(name string, v diff.Bytes) []string {
	return []string{name, units.Bytes(v.A), units.Bytes(v.B), signedBytes(v.Delta), changeCell(v.Change, float64(v.A), float64(v.B))}
}

func durationRow(name string, v diff.Duration) []string {
	return []string{name, units.Duration(v.A), units.Duration(v.B), signedDuration(v.Delta), changeCell(v.Change, float64(v.A), float64(v.B))}
}

func ratioRow(name string, v diff.Ratio) []string {
	return []string{name, units.Percent(v.A), units.Percent(v.B), fmt.Sprintf("%+.1f pts", v.Delta*100), ""}
}

func countCell(v float64) string {
	if v == math.Trunc(v) {
		return units.Count(int64(v))
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}

// callsCell is "153" when the calls per step did not change, else "153→160".
func callsCell(v diff.Count) string {
	if v.Delta == 0 {
		return countCell(v.A)
	}
	return countCell(v.A) + "→" + countCell(v.B)
}

func countRow(name string, v diff.Count) []string {
	d := countCell(math.Abs(v.Delta))
	if v.Delta > 0 {
		d = "+" + d
	} else if v.Delta < 0 {
		d = "-" + d
	}
	return []string{name, countCell(v.A), countCell(v.B), d, changeCell(v.Change, v.A, v.B)}
}

var metricHeader = []string{"", "A", "B", "change", "%"}

// aligned returns the column alignments of a table whose first column is
// a name, the next n numbers, and the rest text.
func aligned(n, rest int) []report.Align {
	a := []report.Align{report.Left}
	for i := 0; i < n; i++ {
		a = append(a, report.Right)
	}
	for i := 0; i < rest; i++ {
		a = append(a, report.Left)
	}
	return a
}

// changed keeps the rows whose value changed; more says how many were
// left out by the top limit.
func top[T any](rows []T, n int, changed func(*T) bool) (out []T, unchanged, more int) {
	for i := range rows {
		if !changed(&rows[i]) {
			unchanged++
			continue
		}
		if len(out) == n {
			more++
			continue
		}
		out = append(out, rows[i])
	}
	return out, unchanged, more
}

func restNote(p *printer, unchanged, more int) {
	var parts []string
	if more > 0 {
		parts = append(parts, fmt.Sprintf("%d more changed (--top)", more))
	}
	if unchanged > 0 {
		parts = append(parts, fmt.Sprintf("%d unchanged", unchanged))
	}
	if len(parts) > 0 {
		p.Line("  " + strings.Join(parts, "; "))
	}
}

func writeMemory(p *printer, d *diff.MemoryDiff) {
	p.section("Memory: "+d.Key, d.A.Path, d.B.Path)
	t := &report.Table{Header: metricHeader, Align: aligned(4, 0)}
	t.Rows = [][]string{
		bytesRow("peak allocated", d.PeakAllocated),
		bytesRow("peak reserved", d.PeakReserved),
		bytesRow("reserved at the peak", d.ReservedAtPeak),
		bytesRow("allocated at the end", d.EndAllocated),
		ratioRow("efficiency at the peak", d.EfficiencyAtPeak),
		bytesRow("cached free at the peak", d.CachedFreeAtPeak),
		bytesRow("largest free block (end)", d.LargestFree),
		bytesRow("rounding waste (end)", d.RoundingWaste),
		countRow("segments (end)", d.Segments),
		countRow("steps", d.Steps),
		bytesRow("median step peak", d.MedianStepPeak),
		durationRow("median step time", d.MedianStepTime),
		countRow("out-of-memory events", d.OOMs),
	}
	p.table(t)
	// the pattern is text ("leak 65.8 MiB/step"): on its own line, so that
	// it does not widen the numbers' columns
	p.Line("  step pattern: A " + patternCell(d.Pattern.A, d.LeakPerStep.A) + ", B " + patternCell(d.Pattern.B, d.LeakPerStep.B))

	groupTable(p, "By category at the peak", "category", d.Categories, p.O.Top)
	stackTable(p, d.Stacks, p.O.Top)
	groupTable(p, "By source line at the peak (first frame outside PyTorch)", "source", d.Sources, p.O.Top)
	groupTable(p, "By module or file at the peak", "module/file", d.Modules, p.O.Top)
	if len(d.Phases) > 0 {
		p.Title("Phases (median over full steps)")
		// two tables of few columns, so that both fit 60 columns
		peaks := &report.Table{Header: []string{"phase", "peak A", "peak B", "change", "%"}, Align: aligned(4, 0)}
		times := &report.Table{Header: []string{"phase", "growth A", "growth B", "time A", "time B"}, Align: aligned(4, 0)}
		for _, ph := range d.Phases {
			row := bytesRow(ph.Phase.String(), ph.Peak)
			peaks.Rows = append(peaks.Rows, row)
			times.Rows = append(times.Rows, []string{row[0], signedBytes(ph.Growth.A), signedBytes(ph.Growth.B),
				units.Duration(ph.Duration.A), units.Duration(ph.Duration.B)})
		}
		p.table(peaks)
		p.Blank()
		p.table(times)
	}
	analysisFindings(p, d.FindingsAppeared, d.FindingsResolved)
}

func patternCell(pt memory.Pattern, leak int64) string {
	if pt == memory.PatternLeak && leak > 0 {
		return "leak " + units.Bytes(leak) + "/step"
	}
	return pt.String()
}

func groupTable(p *printer, title, col string, rows []diff.GroupRow, n int) {
	shown, unchanged, more := top(rows, n, func(r *diff.GroupRow) bool { return r.Status != diff.Same })
	p.Title(title)
	if len(shown) == 0 {
		p.Line(fmt.Sprintf("  no change (%d)", len(rows)))
		return
	}
	t := &report.Table{Header: []string{col, "A", "B", "change", "%"}, Align: aligned(4, 0)}
	for _, r := range shown {
		t.Rows = append(t.Rows, bytesRow(r.Name, r.Bytes))
	}
	p.table(t)
	restNote(p, unchanged, more)
}

// stackLabel names a stack by the user's frame (else its source), the
// innermost Python frame below it (which tells apart stacks from the same
// line) and the backward node that ran it.
func stackLabel(s *diff.StackRow) string {
	label := s.Source
	if s.UserFrame >= 0 && s.UserFrame < len(s.Frames) {
		label = frameText(s.Frames[s.UserFrame])
		for _, f := range s.Frames[:s.UserFrame] {
			if f.Kind == memory.FrameTorch || f.Kind == memory.FrameLibrary {
				label += " → " + frameText(f)
				break
			}
		}
	}
	if label == "" {
		label = "<no stack recorded>"
	}
	if s.AutogradNode != "" {
		label += " [" + s.AutogradNode + "]"
	}
	return label
}

func frameText(f memory.Frame) string {
	return memory.TrimPath(f.Filename) + ":" + strconv.Itoa(f.Line) + " " + f.Name
}

// stackTable lists the stacks that changed most, each as a row of
// numbers followed by its label on a line of its own (labels are long).
func stackTable(p *printer, rows []diff.StackRow, n int) {
	shown, unchanged, more := top(rows, n, func(r *diff.StackRow) bool { return r.Status != diff.Same })
	p.Title("By stack at the peak (matched by frames: user frame → innermost library frame)")
	if len(shown) == 0 {
		p.Line(fmt.Sprintf("  no change (%d stacks)", len(rows)))
		return
	}
	t := &report.Table{Header: []string{"change", "%", "A", "B", "category"}, Align: []report.Align{report.Right, report.Right, report.Right, report.Right, report.Left}}
	for i := range shown {
		r := &shown[i]
		x := bytesRow("", r.Bytes)
		t.Rows = append(t.Rows, []string{x[3], x[4], x[1], x[2], r.Category.String()})
	}
	t.MaxWidth = p.O.Width - 2
	var b strings.Builder
	t.Write(&b)
	lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
	if p.html != nil {
		// one table, the label in a column of its own
		t.Header = append(t.Header, "stack")
		for i := range shown {
			t.Rows[i] = append(t.Rows[i], stackLabel(&shown[i]))
		}
		p.table(t)
		restNote(p, unchanged, more)
		return
	}
	p.Line("  " + lines[0])
	p.Line("  " + lines[1])
	for i := range shown {
		p.Line("  " + lines[i+2])
		p.Line("      " + report.CutMiddle(stackLabel(&shown[i]), p.O.Width-6))
	}
	restNote(p, unchanged, more)
}

// analysisFindings lists the findings of the two analyses that differ:
// those only B has (with their recommendation) and those B no longer has.
func analysisFindings(p *printer, appeared, resolved []finding.Finding) {
	for _, part := range []struct {
		title string
		fs    []finding.Finding
		rec   bool
	}{{"Findings that appeared in B", appeared, true}, {"Findings resolved in B (A had them)", resolved, false}} {
		if len(part.fs) == 0 {
			continue
		}
		p.Title(part.title)
		for _, f := range part.fs {
			if !part.rec {
				f.Recommendation = ""
			}
			for _, l := range p.O.FindingLines(f, "  ") {
				p.Raw(l)
			}
		}
	}
}

func writeTrace(p *printer, d *diff.TraceDiff) {
	p.section("Trace: "+d.Key, d.A.Path, d.B.Path)
	t := &report.Table{Header: metricHeader, Align: aligned(4, 0)}
	t.Rows = [][]string{
		countRow("steps", d.Steps),
		durationRow("average step", d.AverageStep),
		durationRow("median step", d.MedianStep),
		ratioRow("GPU utilization", d.GPUUtilization),
		ratioRow("SM efficiency", d.SMEfficiency),
		ratioRow("achieved occupancy", d.AchievedOccupancy),
		ratioRow("tensor-core share", d.TensorCore),
		ratioRow("DataLoader share", d.DataLoader),
		ratioRow("GPU idle", d.Idle.IdleRatio),
		durationRow("idle per step", d.Idle.Idle),
		durationRow("  host wait", d.Idle.HostWait),
		durationRow("  kernel wait", d.Idle.KernelWait),
		durationRow("communication per step", d.Communication.KernelTime),
		durationRow("  exposed", d.Communication.Exposed),
		bytesRow("peak allocated (trace)", d.PeakAllocated),
	}
	p.table(t)

	p.Title("Average step by part")
	bt := &report.Table{Header: metricHeader, Align: aligned(4, 0)}
	for _, r := range d.Breakdown {
		bt.Rows = append(bt.Rows, durationRow(r.Name, r.Time))
	}
	for _, r := range d.Phases {
		bt.Rows = append(bt.Rows, durationRow("phase: "+r.Name, r.Time))
	}
	p.table(bt)

	ops, unchanged, more := top(d.Operators, p.O.Top, func(r *diff.OpRow) bool {
		return r.Status != diff.Same || r.Calls.Delta != 0 || r.HostTotal.Delta != 0
	})
	p.Title("Operators per step (GPU time, else host time; regressions first)")
	if len(ops) == 0 {
		p.Line(fmt.Sprintf("  no change (%d operators)", len(d.Operators)))
	} else {
		ot := &report.Table{Header: []string{"operator", "A", "B", "change", "%", "calls"}, Align: aligned(5, 0)}
		for i := range ops {
			o := &ops[i]
			tm := o.DeviceTotal
			if tm.A == 0 && tm.B == 0 {
				tm = o.HostTotal
			}
			ot.Rows = append(ot.Rows, append(durationRow(o.Name, tm), callsCell(o.Calls)))
		}
		p.table(ot)
		restNote(p, unchanged, more)
	}

	ks, unchanged, more := top(d.Kernels, p.O.Top, func(r *diff.KernelRow) bool {
		return r.Status != diff.Same || r.Calls.Delta != 0
	})
	p.Title("Kernels per step (regressions first)")
	if len(ks) == 0 {
		p.Line(fmt.Sprintf("  no change (%d kernels)", len(d.Kernels)))
	} else {
		kt := &report.Table{Header: []string{"kernel", "A", "B", "change", "%", "calls"}, Align: aligned(5, 0)}
		for _, k := range ks {
			kt.Rows = append(kt.Rows, append(durationRow(k.Name, k.Time), callsCell(k.Calls)))
		}
		p.table(kt)
		restNote(p, unchanged, more)
	}
	if len(d.Communication.Collectives) > 0 {
		p.Title("Collectives per step")
		ct := &report.Table{Header: []string{"collective", "A", "B", "change", "%", "calls"}, Align: aligned(5, 0)}
		for _, c := range d.Communication.Collectives {
			ct.Rows = append(ct.Rows, append(durationRow(c.Name, c.Time), callsCell(c.Calls)))
		}
		p.table(ct)
	}
	analysisFindings(p, d.FindingsAppeared, d.FindingsResolved)
}
