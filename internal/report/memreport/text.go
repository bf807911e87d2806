package memreport

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/ptscope/ptscope/internal/memory"
	"github.com/ptscope/ptscope/internal/report"
	"github.com/ptscope/ptscope/internal/units"
)

// TextOptions control the terminal report.
type TextOptions struct {
	TopN int
}

// WriteText writes the human report of one input.
func WriteText(w io.Writer, in *Input, o TextOptions) error {
	p := &printer{w: w}
	p.f("ptscope analyze  %s\n", in.Path)
	extra := ""
	if in.Bundle != nil {
		extra = fmt.Sprintf(", rank %d", in.Bundle.Rank)
		if in.Bundle.GPU != "" {
			extra += ", " + in.Bundle.GPU
		}
		if in.Bundle.Simulated {
			extra += ", SIMULATED"
			if in.Bundle.Mode != "" {
				extra += " (" + in.Bundle.Mode + ")"
			}
		}
	}
	p.f("%s, %s%s\n", in.Format, units.Bytes(in.Bytes), extra)
	if in.Bundle != nil && in.Bundle.Simulation != "" {
		p.f("%s\n", in.Bundle.Simulation)
	}
	if len(in.Devices) == 0 && len(in.Phases) == 0 {
		p.f("\nNo device has trace entries or segments.\n")
	}
	for _, d := range in.Devices {
		writeDevice(p, d, o)
	}
	if len(in.Phases) > 0 {
		p.section("Phases (ptscope run)")
		t := &report.Table{Header: []string{"step", "phase", "rank", "allocated before", "after", "delta", "peak in phase", "reserved after"}}
		for _, ph := range in.Phases {
			peak := "-"
			if ph.PeakBytes >= 0 {
				peak = units.Bytes(ph.PeakBytes)
			}
			t.Rows = append(t.Rows, []string{strconv.Itoa(ph.Step), ph.Phase, strconv.Itoa(ph.Rank), units.Bytes(ph.AllocatedBeforeBytes),
				units.Bytes(ph.AllocatedAfterBytes), units.Bytes(ph.DeltaBytes), peak, units.Bytes(ph.ReservedAfterBytes)})
		}
		p.table(t)
	}
	return p.err
}

type printer struct {
	w   io.Writer
	err error
}

func (p *printer) f(format string, a ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format, a...)
	}
}

func (p *printer) section(title string) { p.f("\n%s\n", title) }

func (p *printer) table(t *report.Table) {
	if p.err != nil {
		return
	}
	var b strings.Builder
	t.Write(&b)
	for _, line := range strings.Split(strings.TrimRight(b.String(), "\n"), "\n") {
		p.f("  %s\n", line)
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

func usDur(us int64) string {
	if us < 0 {
		return "-"
	}
	return units.Duration(us * 1000)
}

func writeDevice(p *printer, d *memory.Device, o TextOptions) {
	pk := d.Peak
	p.f("\n== device %d: %s trace entries", d.Device, comma(int64(d.Entries)))
	if d.Truncated {
		p.f(" (TRUNCATED)")
	}
	p.f(" ==\n")
	p.section("Peak")
	where := "before the first recorded entry"
	if pk.EventIndex >= 0 {
		where = fmt.Sprintf("at entry %s", comma(int64(pk.EventIndex)))
		if pk.Step >= 0 && pk.Step < len(d.Steps) {
			where += ", " + d.Steps[pk.Step].Name
		}
		if pk.Phase != "unknown" {
			where += ", " + pk.Phase
		}
		if d.HasTime && len(d.Replay.Timeline.TimeUS) > 0 {
			where += ", +" + usDur(pk.TimeUS-d.Replay.Timeline.TimeUS[0])
		}
	}
	p.f("  allocated  %s  %s\n", bytesExact(pk.AllocatedBytes), where)
	p.f("  reserved   %s at the peak, %s at most\n", units.Bytes(pk.ReservedAtPeakBytes), units.Bytes(pk.ReservedBytes))
	p.f("  start/end  allocated %s -> %s, reserved %s -> %s\n", units.Bytes(d.Start.AllocatedBytes), units.Bytes(d.End.AllocatedBytes),
		units.Bytes(d.Start.ReservedBytes), units.Bytes(d.End.ReservedBytes))
	if d.GhostBlocks > 0 || d.UnmatchedFrees > 0 {
		p.f("  before recording: %d live blocks and %d frees without a recorded alloc\n", d.GhostBlocks, d.UnmatchedFrees)
	}

	p.section("Alive at the peak, by category")
	t := &report.Table{Header: []string{"category", "bytes", "share", "count"}}
	for _, c := range d.CategoriesAtPeak {
		t.Rows = append(t.Rows, []string{c.Name, units.Bytes(c.Bytes), share(c.Bytes, pk.AllocatedBytes), strconv.Itoa(c.Count)})
	}
	p.table(t)

	p.section("Top allocations alive at the peak")
	t = &report.Table{Header: []string{"#", "size", "category", "group", "age", "allocated at"}}
	for i, a := range d.TopAllocations {
		if i >= o.TopN && o.TopN > 0 {
			break
		}
		age := units.Duration(a.AgeNS)
		if a.AgeNS < 0 {
			age = "before rec."
		}
		rows := stackLines(a.Frames, 3)
		t.Rows = append(t.Rows, []string{strconv.Itoa(i + 1), units.Bytes(a.Bytes), a.Category, a.Group, age, rows[0]})
		for _, r := range rows[1:] {
			t.Rows = append(t.Rows, []string{"", "", "", "", "", r})
		}
	}
	p.table(t)

	p.section("By source location (first frame outside PyTorch)")
	p.table(groupTable("source", d.SourcesAtPeak, pk.AllocatedBytes, o.TopN))
	if len(d.ModulesAtPeak) > 0 {
		p.section("By module or file")
		p.table(groupTable("module/file", d.ModulesAtPeak, pk.AllocatedBytes, o.TopN))
	}
	p.section("By keyword group")
	p.table(groupTable("group", d.GroupsAtPeak, pk.AllocatedBytes, 0))

	if len(d.Steps) > 0 {
		p.section(fmt.Sprintf("Steps (found by %s): pattern %s", d.PhaseSource, strings.ToUpper(d.Pattern)))
		t = &report.Table{Header: []string{"step", "entries", "duration", "peak allocated", "end allocated", ""}}
		for _, s := range d.Steps {
			note := ""
			if s.Partial {
				note = "partial"
			}
			dur := "-"
			if d.HasTime {
				dur = units.Duration(s.DurationNS)
			}
			t.Rows = append(t.Rows, []string{s.Name, comma(int64(s.EndIndex - s.StartIndex)), dur, units.Bytes(s.PeakAllocatedBytes), units.Bytes(s.EndAllocatedBytes), note})
		}
		p.table(t)
		if d.Leak != nil {
			p.f("  leak: %s per step, %s over %d steps; accumulating allocations:\n", units.Bytes(d.Leak.BytesPerStep), units.Bytes(d.Leak.GrowthBytes), d.Leak.Steps)
			for _, s := range d.Leak.Stacks {
				p.f("    %s in %d allocations  %s\n", units.Bytes(s.Bytes), s.Count, stackLines(s.Frames, 1)[0])
			}
		}
	} else {
		p.section("Steps: none found (no annotations, optimizer frames or repeating pattern)")
	}

	f := d.FragmentationOut
	p.section("Fragmentation and efficiency (final segments)")
	p.f("  efficiency  %s at the peak (allocated/reserved), %s at the end\n", units.Percent(f.PeakRatio), units.Percent(f.EndRatio))
	p.f("  reserved %s in %d segments: allocated %s, cached free %s (largest block %s), pending free %s, rounding waste %s\n",
		units.Bytes(f.ReservedBytes), f.Segments, units.Bytes(f.AllocatedBytes), units.Bytes(f.CachedFreeBytes),
		units.Bytes(f.LargestFreeBytes), units.Bytes(f.PendingFreeBytes), units.Bytes(f.RoundingWasteBytes))
	if len(f.Pools) > 0 {
		t = &report.Table{Header: []string{"pool", "stream", "type", "reserved", "free", "largest free"}}
		for _, pl := range f.Pools {
			t.Rows = append(t.Rows, []string{fmt.Sprintf("(%d,%d)", pl.Pool[0], pl.Pool[1]), strconv.FormatInt(pl.Stream, 10), pl.Type,
				units.Bytes(pl.ReservedBytes), units.Bytes(pl.FreeBytes), units.Bytes(pl.LargestFreeBytes)})
		}
		p.table(t)
	}

	if n := len(f.SegmentTable); n > 0 {
		show := min(n, max(o.TopN, 5))
		p.f("  largest segments (%d of %d):\n", show, f.Segments)
		t = &report.Table{Header: []string{"address", "size", "type", "stream", "allocated", "free", "largest free", "blocks"}}
		for _, g := range f.SegmentTable[:show] {
			t.Rows = append(t.Rows, []string{fmt.Sprintf("0x%x", g.Address), units.Bytes(g.SizeBytes), g.Type, strconv.FormatInt(g.Stream, 10),
				units.Bytes(g.AllocatedBytes), units.Bytes(g.FreeBytes), units.Bytes(g.LargestFreeBytes), strconv.Itoa(g.Blocks)})
		}
		p.table(t)
	}

	if len(d.OOMs) > 0 {
		p.section("Out-of-memory events")
		for _, x := range d.OOMs {
			lf := "unknown"
			if x.LargestFreeBytes >= 0 {
				lf = units.Bytes(x.LargestFreeBytes)
			}
			p.f("  entry %d: %s requested, %s free on the device, allocated %s, reserved %s, cached free %s (largest %s)\n",
				x.EventIndex, units.Bytes(x.RequestedBytes), units.Bytes(x.DeviceFreeBytes), units.Bytes(x.AllocatedBytes),
				units.Bytes(x.ReservedBytes), units.Bytes(x.CachedFreeBytes), lf)
			p.f("  verdict: %s: %s\n", strings.ToUpper(x.Verdict), x.Reason)
			var parts []string
			for _, g := range x.Filled {
				parts = append(parts, g.Name+" "+units.Bytes(g.Bytes))
			}
			p.f("  memory then: %s\n", strings.Join(parts, ", "))
			if len(x.Stack) > 0 {
				p.f("  failing allocation: %s\n", stackLines(x.Stack, 1)[0])
			}
		}
	}

	p.section("Findings")
	if len(d.Findings) == 0 {
		p.f("  none\n")
	}
	for _, fd := range d.Findings {
		p.f("  [%s] %s: %s\n", fd.Severity, fd.ID, fd.Message)
	}
}

func groupTable(name string, gs []memory.Group, total int64, n int) *report.Table {
	t := &report.Table{Header: []string{name, "bytes", "share", "count"}}
	for i, g := range gs {
		if n > 0 && i >= n {
			break
		}
		t.Rows = append(t.Rows, []string{g.Name, units.Bytes(g.Bytes), share(g.Bytes, total), strconv.Itoa(g.Count)})
	}
	return t
}

// stackLines renders up to n frames, innermost first; never empty.
func stackLines(fs []memory.FrameOut, n int) []string {
	var out []string
	for i, f := range fs {
		if i >= n {
			break
		}
		prefix := ""
		if i > 0 {
			prefix = "< "
		}
		out = append(out, prefix+memory.TrimPath(f.Filename)+":"+strconv.Itoa(f.Line)+" "+f.Name)
	}
	if len(out) == 0 {
		out = []string{"<no stack recorded>"}
	}
	return out
}

// WriteComparison writes the table comparing several inputs.
func WriteComparison(w io.Writer, rows []CompareRow) error {
	t := &report.Table{Header: []string{"input", "dev", "peak allocated", "peak reserved", "end allocated", "efficiency", "pattern", "top category", "steps", "OOMs"}}
	for _, r := range rows {
		t.Rows = append(t.Rows, []string{r.Input, strconv.Itoa(r.Device), units.Bytes(r.PeakAllocatedBytes), units.Bytes(r.PeakReservedBytes),
			units.Bytes(r.EndAllocatedBytes), units.Percent(r.EfficiencyRatio), r.Pattern, r.TopCategory, strconv.Itoa(r.Steps), strconv.Itoa(r.OOMs)})
	}
	fmt.Fprintf(w, "\nComparison of %d inputs\n", len(rows))
	var b strings.Builder
	t.Write(&b)
	_, err := io.WriteString(w, b.String())
	return err
}
