package memreport

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/ptscope/ptscope/internal/memory"
	"github.com/ptscope/ptscope/internal/report"
	"github.com/ptscope/ptscope/internal/units"
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

// more says how many rows a ranked list left out.
func (p *printer) more(n int, what string) {
	if n > 0 {
		p.f("  … %d more %s (all in report.json)", n, what)
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
	p.line(o.Bold("ptscope analyze  " + report.CutMiddle(in.Path, o.Width-17)))
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
}

func bytesExact(n int64) string {
	return fmt.Sprintf("%s (%s B)", units.Bytes(n), comma(n))
}

func comma(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	if neg {
		s = s[1:]
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
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
	head := fmt.Sprintf("== device %d: %s trace entries", d.Device, comma(int64(d.Entries)))
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
			where = "at entry " + comma(int64(pk.EventIndex))
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
		t.Rows = append(t.Rows, []string{c.Category.String(), units.Bytes(c.Bytes), share(c.Bytes, pk.AllocatedBytes), comma(int64(c.Count))})
	}
	p.table(t)

	writeTopAllocations(p, d, at)

	p.section("By source location (first Python frame outside PyTorch)")
	groupTable(p, "source", d.Sources, pk.AllocatedBytes, o.Top, "sources")
	if len(d.Modules) > 0 {
		p.section("By module or file")
		groupTable(p, "module/file", d.Modules, pk.AllocatedBytes, o.Top, "modules")
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
		t.Rows = append(t.Rows, []string{g.Name, units.Bytes(g.Bytes), share(g.Bytes, total), comma(int64(g.Count))})
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

// stepRole says why a summarised step row is shown.
type stepRole struct {
	index int
	roles []string
}

// pickSteps chooses the steps a summary lists: the first and the last,
// the slowest and the largest full step, and the outliers.
func pickSteps(steps []memory.StepRow, hasTime bool) []stepRole {
	roles := map[int][]string{}
	add := func(i int, r string) { roles[i] = append(roles[i], r) }
	add(0, "first")
	add(len(steps)-1, "last")
	slow, large := -1, -1
	for i, s := range steps {
		if s.Partial {
			continue
		}
		if hasTime && (slow < 0 || s.DurationNS > steps[slow].DurationNS) {
			slow = i
		}
		if large < 0 || s.PeakAllocatedBytes > steps[large].PeakAllocatedBytes {
			large = i
		}
	}
	if slow >= 0 {
		add(slow, "slowest")
	}
	if large >= 0 {
		add(large, "largest")
	}
	outliers := 0
	for i, s := range steps {
		if s.Outlier && outliers < maxOutlierRows {
			outliers++
			if len(roles[i]) == 0 {
				add(i, "outlier")
			}
		}
	}
	var out []stepRole
	for i := range steps {
		if r, ok := roles[i]; ok {
			out = append(out, stepRole{i, r})
		}
	}
	return out
}

// Step summaries list every step up to allStepsUpTo steps, else the
// chosen ones with at most maxOutlierRows outliers.
const (
	allStepsUpTo   = 12
	maxOutlierRows = 8
)

func writeSteps(p *printer, d *memory.Result) {
	o := p.o
	if len(d.Steps) == 0 {
		p.section("Steps: none found (no annotations, optimizer frames or repeating pattern)")
		return
	}
	p.section(fmt.Sprintf("Steps (%d, found from %s): pattern %s", len(d.Steps), d.StepSource.Describe(), strings.ToUpper(d.Pattern.String())))
	var rows []stepRole
	if o.Steps == report.StepsAll || len(d.Steps) <= allStepsUpTo {
		for i := range d.Steps {
			rows = append(rows, stepRole{index: i})
		}
	} else {
		rows = pickSteps(d.Steps, d.HasTime)
	}
	t := &report.Table{Header: []string{"step", "entries", "duration", "peak allocated", "end allocated", "note"}}
	for _, r := range rows {
		s := d.Steps[r.index]
		var note []string
		if s.Partial {
			note = append(note, "partial")
		}
		note = append(note, r.roles...)
		if s.Outlier && len(r.roles) == 0 {
			note = append(note, "outlier")
		}
		dur := "-"
		if d.HasTime {
			dur = units.Duration(s.DurationNS)
		}
		t.Rows = append(t.Rows, []string{s.Name, comma(int64(s.EndIndex - s.StartIndex)), dur, units.Bytes(s.PeakAllocatedBytes),
			units.Bytes(s.EndAllocatedBytes), strings.Join(note, ", ")})
	}
	p.table(t)
	if left := len(d.Steps) - len(rows); left > 0 {
		p.f("  … %d more steps (--steps all)", left)
	}
	if l := d.Leak; l != nil {
		p.wrap(fmt.Sprintf("%s per step, %s over %d steps; allocations made in those steps and never freed:",
			units.Bytes(l.PerStepBytes), units.Bytes(l.GrowthBytes), l.Steps), "  leak: ", "    ")
		n := min(len(l.Stacks), 5)
		for _, s := range l.Stacks[:n] {
			p.line(report.CutMiddle(fmt.Sprintf("    %s in %s allocations from %s", units.Bytes(s.Bytes), comma(int64(s.Count)), s.Source), o.Width))
		}
		p.more(len(l.Stacks)-n, "leaking stacks")
	}
}

func writeFragmentation(p *printer, d *memory.Result) {
	o := p.o
	f := d.Fragmentation
	p.section("Fragmentation and efficiency (final segments)")
	if d.HasHistory {
		p.f("  efficiency  %s at the peak (allocated/reserved), %s at the end", units.Percent(f.EfficiencyAtPeak), units.Percent(f.EfficiencyAtEnd))
	} else {
		p.f("  efficiency  %s (allocated/reserved)", units.Percent(f.EfficiencyAtEnd))
	}
	p.wrap(fmt.Sprintf("reserved %s in %d segments: allocated %s, cached free %s,", units.Bytes(f.ReservedBytes), f.SegmentCount,
		units.Bytes(f.AllocatedBytes), units.Bytes(f.CachedFreeBytes)), "  ", "    ")
	p.wrap(fmt.Sprintf("largest free block %s, pending free %s, rounding waste %s", units.Bytes(f.LargestFreeBytes),
		units.Bytes(f.PendingFreeBytes), units.Bytes(f.RoundingWasteBytes)), "  ", "    ")
	if len(f.Pools) > 0 {
		t := &report.Table{Header: []string{"pool", "stream", "type", "reserved", "free", "largest free"}}
		n := min(len(f.Pools), o.Top)
		for _, pl := range f.Pools[:n] {
			t.Rows = append(t.Rows, []string{fmt.Sprintf("(%d,%d)", pl.Pool[0], pl.Pool[1]), strconv.FormatInt(pl.Stream, 10), pl.Type,
				units.Bytes(pl.ReservedBytes), units.Bytes(pl.FreeBytes), units.Bytes(pl.LargestFreeBytes)})
		}
		p.table(t)
		p.more(len(f.Pools)-n, "pools")
	}
	if !d.HasHistory && len(f.ActiveSizes)+len(f.FreeSizes) > 0 {
		p.line("  blocks by size:")
		t := &report.Table{Header: []string{"size", "active", "active bytes", "free", "free bytes"}}
		for _, r := range sizeRows(f) {
			t.Rows = append(t.Rows, []string{r.label, comma(int64(r.active.Count)), units.Bytes(r.active.Bytes), comma(int64(r.free.Count)), units.Bytes(r.free.Bytes)})
		}
		p.table(t)
	}
	if n := len(f.Segments); n > 0 {
		show := min(n, max(min(o.Top, 10), 5))
		p.f("  largest segments (%d of %d):", show, n)
		// Addresses are never cut; narrow terminals lose the type and
		// stream columns instead.
		wide := o.Width >= 90
		t := &report.Table{Header: []string{"address", "size", "allocated", "free", "largest free", "blocks"}, Align: []report.Align{report.Right}}
		if wide {
			t.Header = append(t.Header, "type", "stream")
		}
		for _, g := range f.Segments[:show] {
			row := []string{fmt.Sprintf("0x%x", g.Address), units.Bytes(g.SizeBytes), units.Bytes(g.AllocatedBytes), units.Bytes(g.FreeBytes),
				units.Bytes(g.LargestFreeBytes), comma(int64(g.Blocks))}
			if wide {
				row = append(row, g.Type, strconv.FormatInt(g.Stream, 10))
			}
			t.Rows = append(t.Rows, row)
		}
		p.table(t)
	}
}

// sizeRow is one block-size bucket with its active and free blocks.
type sizeRow struct {
	lo           int64
	label        string
	active, free memory.Bucket
}

// sizeRows joins the active and free histograms by bucket.
func sizeRows(f memory.Fragmentation) []sizeRow {
	by := map[int64]*sizeRow{}
	var order []int64
	get := func(b memory.Bucket) *sizeRow {
		r := by[b.LoBytes]
		if r == nil {
			r = &sizeRow{lo: b.LoBytes, label: "≥" + units.Bytes(b.LoBytes)}
			if b.LoBytes == 0 {
				r.label = "<" + units.Bytes(b.HiBytes)
			}
			by[b.LoBytes] = r
			order = append(order, b.LoBytes)
		}
		return r
	}
	for _, b := range f.ActiveSizes {
		get(b).active = b
	}
	for _, b := range f.FreeSizes {
		get(b).free = b
	}
	for i := 1; i < len(order); i++ {
		for j := i; j > 0 && order[j] < order[j-1]; j-- {
			order[j], order[j-1] = order[j-1], order[j]
		}
	}
	out := make([]sizeRow, 0, len(order))
	for _, lo := range order {
		if r := by[lo]; r.active.Count+r.free.Count > 0 {
			out = append(out, *r)
		}
	}
	return out
}

// verdictText explains an OOM verdict.
func verdictText(v memory.Verdict) string {
	if v == memory.VerdictCapacity {
		return "the request is larger than everything free on the device plus all cached free blocks: it does not fit"
	}
	return "enough memory was free in total, but not in one piece: cached free blocks are scattered in segments that also hold live tensors"
}

func writeOOMs(p *printer, d *memory.Result) {
	if len(d.OOMs) == 0 {
		return
	}
	p.section("Out-of-memory events")
	for _, x := range d.OOMs {
		lf := "unknown"
		if x.LargestFreeBytes >= 0 {
			lf = units.Bytes(x.LargestFreeBytes)
		}
		p.wrap(fmt.Sprintf("%s requested, %s free on the device, allocated %s, reserved %s, cached free %s (largest %s)",
			units.Bytes(x.RequestedBytes), units.Bytes(x.DeviceFreeBytes), units.Bytes(x.AllocatedBytes),
			units.Bytes(x.ReservedBytes), units.Bytes(x.CachedFreeBytes), lf), fmt.Sprintf("  entry %s: ", comma(int64(x.EventIndex))), "    ")
		p.wrap(strings.ToUpper(x.Verdict.String())+": "+verdictText(x.Verdict), "  verdict: ", "    ")
		var parts []string
		for _, g := range x.Filled {
			parts = append(parts, g.Category.String()+" "+units.Bytes(g.Bytes))
		}
		p.wrap(strings.Join(parts, ", "), "  memory then: ", "    ")
		lines := stackLines(&x.Stack, p.o.Stacks == report.StacksFull)
		p.line(report.CutMiddle("  failing allocation: "+lines[0], p.o.Width))
		for _, l := range lines[1:] {
			p.line(report.CutMiddle("    "+l, p.o.Width))
		}
	}
}

func writePhases(p *printer, phases []memory.PhaseRow) {
	p.section("Phases (ptscope run)")
	rows := phases
	left := 0
	if p.o.Steps != report.StepsAll && len(phases) > 3*allStepsUpTo {
		rows, left = pickPhaseRows(phases)
	}
	t := &report.Table{Header: []string{"step", "phase", "rank", "allocated before", "after", "delta", "peak in phase", "reserved after"}}
	for _, ph := range rows {
		peak := "-"
		if ph.PeakBytes >= 0 {
			peak = units.Bytes(ph.PeakBytes)
		}
		t.Rows = append(t.Rows, []string{strconv.Itoa(ph.Step), ph.Phase, strconv.Itoa(ph.Rank), units.Bytes(ph.AllocatedBeforeBytes),
			units.Bytes(ph.AllocatedAfterBytes), units.Bytes(ph.DeltaBytes), peak, units.Bytes(ph.ReservedAfterBytes)})
	}
	p.table(t)
	if left > 0 {
		p.f("  … %d more phases (--steps all)", left)
	}
}

// pickPhaseRows keeps the phases of the first and last steps and of the
// step with the highest phase peak.
func pickPhaseRows(phases []memory.PhaseRow) ([]memory.PhaseRow, int) {
	first, last := phases[0].Step, phases[len(phases)-1].Step
	top := phases[0]
	for _, ph := range phases {
		if ph.PeakBytes > top.PeakBytes {
			top = ph
		}
	}
	var out []memory.PhaseRow
	for _, ph := range phases {
		if ph.Step == first || ph.Step == last || ph.Step == top.Step {
			out = append(out, ph)
		}
	}
	return out, len(phases) - len(out)
}

func writeComparison(p *printer, rows []memory.CompareRow) {
	p.line(p.o.Bold(fmt.Sprintf("Comparison of %d inputs", len(rows))))
	t := &report.Table{Header: []string{"input", "dev", "peak", "reserved", "end", "eff.", "pattern", "top category", "steps", "OOMs"}}
	for _, r := range rows {
		t.Rows = append(t.Rows, []string{r.Input, strconv.Itoa(r.Device), units.Bytes(r.PeakAllocatedBytes), units.Bytes(r.PeakReservedBytes),
			units.Bytes(r.EndAllocatedBytes), units.Percent(r.EfficiencyAtPeakRatio), r.Pattern.String(), r.TopCategory.String(),
			strconv.Itoa(r.Steps), strconv.Itoa(r.OOMs)})
	}
	p.table(t)
}
