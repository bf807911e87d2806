package memreport

import (
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/ptscope/ptscope/internal/estimate"
	"github.com/ptscope/ptscope/internal/memory"
	"github.com/ptscope/ptscope/internal/report"
	"github.com/ptscope/ptscope/internal/units"
	"github.com/ptscope/ptscope/internal/whatif"
)

// WriteText writes the terminal report of every input, then the
// comparison of several. Every line fits o.Width.
func (d *Document) WriteText(w io.Writer, o report.TextOptions) error {
	return WriteText(w, d.Report, o)
}

// WriteText writes the terminal report of rep.
func WriteText(w io.Writer, rep *memory.Report, o report.TextOptions) error {
	o = normalize(o)
	p := &printer{w: w, o: o}
	first := true
	for _, in := range rep.Inputs {
		if in.Error != "" {
			continue
		}
		if !first {
			p.blank()
		}
		first = false
		writeInput(p, in)
	}
	if len(rep.Comparison) > 1 {
		p.blank()
		writeComparison(p, rep.Comparison)
	}
	return p.err
}

func normalize(o report.TextOptions) report.TextOptions {
	if o.Width <= 0 {
		o.Width = report.DefaultText().Width
	}
	o.Width = max(o.Width, 40)
	if o.Top <= 0 {
		o.Top = report.DefaultText().Top
	}
	return o
}

// printer writes lines that fit the width; a line that would not is cut
// (the layout avoids it: this is the last resort).
type printer struct {
	w   io.Writer
	o   report.TextOptions
	err error
}

func (p *printer) line(s string) {
	if p.err != nil {
		return
	}
	if visibleWidth(s) > p.o.Width && !strings.Contains(s, "\x1b") {
		s = report.CutEnd(s, p.o.Width)
	}
	_, p.err = io.WriteString(p.w, s+"\n")
}

func (p *printer) f(format string, a ...any) { p.line(fmt.Sprintf(format, a...)) }

func (p *printer) blank() { p.line("") }

// wrap writes s wrapped at the width, the first line after first, the
// others after indent.
func (p *printer) wrap(s, first, indent string) {
	for _, l := range report.Wrap(s, p.o.Width, first, indent) {
		p.line(l)
	}
}

func (p *printer) section(title string) {
	p.blank()
	p.line(p.o.Bold(report.CutEnd(title, p.o.Width)))
}

// table writes t indented by two spaces, fitted to the width.
func (p *printer) table(t *report.Table) {
	if p.err != nil {
		return
	}
	t.MaxWidth = p.o.Width - 2
	var b strings.Builder
	t.Write(&b)
	for _, l := range strings.Split(strings.TrimRight(b.String(), "\n"), "\n") {
		p.line("  " + l)
	}
}

// more says how many rows a ranked list left out, and how to see them
// (the text goes to a terminal and to a run folder's report.txt alike).
func (p *printer) more(n int, what string) {
	if n > 0 {
		p.f("  … %d more %s (--top N lists more)", n, what)
	}
}

func visibleWidth(s string) int {
	if !strings.Contains(s, "\x1b") {
		return utf8.RuneCountInString(s)
	}
	n, esc := 0, false
	for _, r := range s {
		switch {
		case esc:
			esc = r != 'm'
		case r == '\x1b':
			esc = true
		default:
			n++
		}
	}
	return n
}

func writeInput(p *printer, in *memory.Input) {
	o := p.o
	p.line(o.Bold("ptscope analyze " + report.CutMiddle(in.Path, o.Width-16)))
	extra := ""
	if b := in.Bundle; b != nil {
		extra = fmt.Sprintf(", rank %d", b.Rank)
		if b.GPU != "" {
			extra += ", " + b.GPU
		}
		if b.Simulated {
			extra += ", SIMULATED"
			if b.Mode != "" {
				extra += " (" + b.Mode + ")"
			}
		}
	}
	p.wrap(fmt.Sprintf("%s, %s%s", in.Format, units.Bytes(in.Bytes), extra), "", "  ")
	if in.Bundle != nil && in.Bundle.Simulation != "" {
		p.wrap(in.Bundle.Simulation, "", "")
	}
	if in.Bundle != nil && in.Bundle.Unfinished {
		p.wrap("The process had not finished (killed, or still running): nothing after its last record, no end snapshot.", "", "  ")
	}
	if len(in.StackWindows) > 0 {
		p.wrap(windowsLine(in, o.Width), "", "  ")
	}
	if in.Bundle != nil {
		for _, sk := range in.Bundle.SkippedSnapshots {
			p.wrap(fmt.Sprintf("Not analysed: %s, %s (analyze that file to read it).", filepath.Base(sk.Path), sk.Reason), "", "  ")
		}
	}
	if len(in.Devices) == 0 && len(in.Phases) == 0 {
		p.blank()
		p.line("No device has trace entries or segments.")
	}
	for _, d := range in.Devices {
		writeDevice(p, d)
	}
	if len(in.Phases) > 0 {
		writePhases(p, in.Phases)
	}
	if in.Advice != nil {
		writeAdvice(p, in.Advice)
	}
}

// writeAdvice lists the changes that fit a run that ran out of memory or
// came near its limit, as predicted from the run (ptscope estimate --from).
func writeAdvice(p *printer, a *whatif.Advice) {
	why := "ran out of memory"
	if a.Why == "near-limit" {
		why = "came within 10% of the device's memory"
	}
	p.section("What would fit (predicted from this run: ptscope estimate --from)")
	if a.Error != "" {
		p.wrap(fmt.Sprintf("The run %s; no prediction: %s (to ptscope estimate --from).", why, a.Error), "  ", "  ")
		return
	}
	p.wrap(fmt.Sprintf("The run %s. Its job needs %s allocated, %s on the device of %s.", why,
		units.Bytes(a.PeakAllocatedBytes), units.Bytes(a.DeviceTotalBytes), units.Bytes(a.DeviceMemoryBytes)), "  ", "  ")
	if len(a.Proposals) == 0 {
		p.wrap("No single change of micro-batch, precision, recompute or allocator setting makes it fit; see ptscope estimate --from "+a.Source+" --sweep auto.", "  ", "  ")
		return
	}
	t := &report.Table{Header: []string{"change (cheapest first)", "peak allocated", "device total", "headroom"},
		Align: []report.Align{report.Left, report.Right, report.Right, report.Right}}
	for _, pr := range a.Proposals {
		ch := pr.Flags
		if pr.Env != "" && pr.Flags == "--expandable-segments" {
			ch = pr.Env
		}
		if pr.Verdict == estimate.Tight {
			ch += " (tight)"
		}
		t.Rows = append(t.Rows, []string{ch, units.Bytes(pr.PeakAllocatedBytes), units.Bytes(pr.DeviceTotalBytes), units.Bytes(pr.HeadroomBytes)})
	}
	p.table(t)
	for _, pr := range a.Proposals {
		p.wrap(pr.Flags+": "+pr.Why, "  ", "    ")
	}
}

func bytesExact(n int64) string {
	return fmt.Sprintf("%s (%s B)", units.Bytes(n), units.Count(n))
}

func share(b, total int64) string {
	if total <= 0 {
		return "-"
	}
	return units.Percent(float64(b) / float64(total))
}

func writeDevice(p *printer, d *memory.Result) {
	o := p.o
	pk := d.Peak
	head := fmt.Sprintf("== device %d: %s trace entries", d.Device, units.Count(int64(d.Entries)))
	if !d.HasHistory {
		head = fmt.Sprintf("== device %d: no allocation history, segments at dump time", d.Device)
	}
	if d.Truncated {
		head += " (TRUNCATED)"
	}
	p.blank()
	p.line(o.Bold(head + " =="))

	at := "at the peak"
	if d.HasHistory {
		p.section("Peak")
		where := "before the first recorded entry"
		if pk.EventIndex >= 0 {
			where = "at entry " + units.Count(int64(pk.EventIndex))
			if pk.Step >= 0 && pk.Step < len(d.Steps) {
				where += ", " + d.Steps[pk.Step].Name
			}
			if pk.Phase != memory.PhaseUnknown {
				where += ", " + pk.Phase.String()
			}
			if d.HasTime {
				where += ", +" + units.Duration(pk.TimeNS-d.FirstTimeNS)
			}
		}
		p.wrap(bytesExact(pk.AllocatedBytes)+"  "+where, "  allocated  ", "             ")
		p.f("  reserved   %s at the peak, %s at most", units.Bytes(pk.ReservedAtPeakBytes), units.Bytes(pk.ReservedBytes))
		p.f("  start/end  allocated %s -> %s, reserved %s -> %s", units.Bytes(d.Start.AllocatedBytes), units.Bytes(d.End.AllocatedBytes),
			units.Bytes(d.Start.ReservedBytes), units.Bytes(d.End.ReservedBytes))
		if d.GhostBlocks > 0 || d.UnmatchedFrees > 0 {
			p.wrap(fmt.Sprintf("%d live blocks and %d frees without a recorded alloc", d.GhostBlocks, d.UnmatchedFrees), "  before recording: ", "    ")
		}
	} else {
		at = "at dump time"
		p.section("At dump time (no history was recorded)")
		p.f("  allocated  %s", bytesExact(d.End.AllocatedBytes))
		p.f("  reserved   %s, active %s", units.Bytes(d.End.ReservedBytes), units.Bytes(d.End.ActiveBytes))
	}

	p.section("Alive " + at + ", by category")
	t := &report.Table{Header: []string{"category", "bytes", "share", "count"}}
	for _, c := range d.Categories {
		t.Rows = append(t.Rows, []string{c.Category.String(), units.Bytes(c.Bytes), share(c.Bytes, pk.AllocatedBytes), units.Count(int64(c.Count))})
	}
	p.table(t)

	writeTopAllocations(p, d, at)

	p.section("By source location (first Python frame outside PyTorch)")
	groupTable(p, "source", d.Sources, pk.AllocatedBytes, o.Top, "sources")
	if len(d.Modules) > 0 {
		p.section("By module or file")
		groupTable(p, "module/file", d.Modules, pk.AllocatedBytes, o.Top, "modules")
	}
	if len(d.ModuleGroups) < len(d.Modules) {
		p.section("By module group (numbered layers as *)")
		groupTable(p, "module group", d.ModuleGroups, pk.AllocatedBytes, o.Top, "module groups")
	}
	p.section("By keyword group")
	groupTable(p, "group", d.Groups, pk.AllocatedBytes, o.Top, "groups")

	if d.HasHistory {
		writeSteps(p, d)
	}
	writeFragmentation(p, d)
	writeOOMs(p, d)

	p.section("Findings")
	if len(d.Findings) == 0 {
		p.line("  none")
	}
	for _, f := range d.Findings {
		for _, l := range o.FindingLines(f, "  ") {
			p.line(l)
		}
	}
}

func groupTable(p *printer, name string, gs []memory.Group, total int64, n int, what string) {
	t := &report.Table{Header: []string{name, "bytes", "share", "count"}}
	for i, g := range gs {
		if i >= n {
			break
		}
		t.Rows = append(t.Rows, []string{g.Name, units.Bytes(g.Bytes), share(g.Bytes, total), units.Count(int64(g.Count))})
	}
	p.table(t)
	p.more(len(gs)-n, what)
}

// shortDepth is how many frames short stacks show (the user's frame comes
// on top when it lies deeper).
const shortDepth = 3

// stackLines renders a stack for a table cell: innermost first, callers
// prefixed with "< ", the user's frame after "… " when frames between were
// left out; never empty.
func stackLines(st *memory.Stack, full bool) []string {
	var out []string
	if full {
		for i, f := range st.Frames {
			out = append(out, prefix(i)+memory.ShortFrame(f))
		}
		if len(st.Caller) > 0 {
			out = append(out, "backward called from:")
			for i, f := range st.Caller {
				out = append(out, prefix(i)+memory.ShortFrame(f))
			}
		}
	} else {
		head, user := st.Short(shortDepth)
		for i, f := range head {
			out = append(out, prefix(i)+memory.ShortFrame(f))
		}
		if user != nil {
			lead := "… "
			if st.UserFrame < 0 {
				lead = "… backward called at "
			}
			out = append(out, lead+memory.ShortFrame(*user))
		}
	}
	if len(out) == 0 {
		out = []string{memory.NoStack}
	}
	return out
}

func prefix(i int) string {
	if i == 0 {
		return ""
	}
	return "< "
}

func writeTopAllocations(p *printer, d *memory.Result, at string) {
	o := p.o
	p.section("Largest allocations alive " + at)
	t := &report.Table{Header: []string{"#", "size", "requested", "category", "group", "age"}}
	if !d.HasHistory {
		t.Header = t.Header[:5]
	}
	n := min(o.Top, len(d.TopAllocations))
	stacks := make([][]string, n)
	for i, a := range d.TopAllocations[:n] {
		age := units.Duration(a.AgeNS)
		if a.AgeNS < 0 {
			age = "before recording"
		}
		row := []string{strconv.Itoa(i + 1), units.Bytes(a.Bytes), units.Bytes(a.RequestedBytes), a.Category.String(), a.Group, age}
		t.Rows = append(t.Rows, row[:len(t.Header)])
		if a.Stack >= 0 && a.Stack < len(d.Stacks) {
			stacks[i] = stackLines(&d.Stacks[a.Stack].Stack, o.Stacks == report.StacksFull)
		} else {
			stacks[i] = []string{memory.NoStack}
		}
	}
	// Each row is followed by its stack, indented, at nearly the full
	// width: frames are the longest text of the report.
	var b strings.Builder
	t.MaxWidth = o.Width - 2
	t.Write(&b)
	lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
	for i, l := range lines {
		p.line("  " + l)
		if k := i - 2; k >= 0 && k < n {
			for _, f := range stacks[k] {
				p.line(report.CutMiddle("      "+f, o.Width))
			}
		}
	}
	p.more(len(d.TopAllocations)-n, "allocations")
}

// writeComparison writes one row per device result. Inputs are named
// without the folder they share; when the names would not fit, rows carry
// a number and the names are listed above the table. The device column is
// left out when every row is of the same device.
func writeComparison(p *printer, rows []memory.CompareRow) {
	dir, names := inputNames(rows)
	title := fmt.Sprintf("Comparison of %d inputs", len(rows))
	if dir != "" {
		title += " in " + dir
	}
	p.line(p.o.Bold(report.CutMiddle(title, p.o.Width)))
	dev := false
	for _, r := range rows {
		dev = dev || r.Device != rows[0].Device
	}
	table := func(label string, ids []string) *report.Table {
		t := &report.Table{Header: []string{label, "dev", "peak", "reserved", "end", "eff.", "pattern", "top category", "steps", "OOMs"}}
		for i, r := range rows {
			t.Rows = append(t.Rows, []string{ids[i], strconv.Itoa(r.Device), units.Bytes(r.PeakAllocatedBytes), units.Bytes(r.PeakReservedBytes),
				units.Bytes(r.EndAllocatedBytes), units.Percent(r.EfficiencyAtPeakRatio), r.Pattern.String(), r.TopCategory.String(),
				strconv.Itoa(r.Steps), strconv.Itoa(r.OOMs)})
		}
		if !dev {
			t.Header = append(t.Header[:1], t.Header[2:]...)
			for i, row := range t.Rows {
				t.Rows[i] = append(row[:1], row[2:]...)
			}
		}
		return t
	}
	t := table("input", names)
	var b strings.Builder
	t.Write(&b)
	if w, _, _ := strings.Cut(b.String(), "\n"); visibleWidth(w) > p.o.Width-2 {
		// numbered rows, the inputs listed first
		ids := make([]string, len(rows))
		k, w := 0, len(strconv.Itoa(len(rows)))
		for i := range rows {
			if i == 0 || names[i] != names[i-1] {
				k++
				p.line(report.CutMiddle(fmt.Sprintf("  %*d  %s", w, k, names[i]), p.o.Width))
			}
			ids[i] = strconv.Itoa(k)
		}
		t = table("#", ids)
	}
	p.table(t)
}

// inputNames names the comparison's inputs without the folder they all
// share (returned, with its trailing separator; "" when none): what tells
// them apart is what the narrow input column keeps.
func inputNames(rows []memory.CompareRow) (string, []string) {
	parts := make([][]string, len(rows))
	common := -1 // folders shared by every input
	for i, r := range rows {
		parts[i] = strings.Split(filepath.ToSlash(r.Input), "/")
		n := len(parts[i]) - 1 // the base name always stays
		if common < 0 || n < common {
			common = n
		}
		if i > 0 {
			for k := 0; k < common; k++ {
				if parts[i][k] != parts[0][k] {
					common = k
					break
				}
			}
		}
	}
	names := make([]string, len(rows))
	for i := range rows {
		names[i] = strings.Join(parts[i][max(common, 0):], "/")
	}
	if common <= 0 {
		return "", names
	}
	return strings.Join(parts[0][:common], "/") + "/", names
}
