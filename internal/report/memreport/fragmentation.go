package memreport

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/ptscope/ptscope/internal/memory"
	"github.com/ptscope/ptscope/internal/report"
	"github.com/ptscope/ptscope/internal/units"
)

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
			t.Rows = append(t.Rows, []string{r.label, units.Count(int64(r.active.Count)), units.Bytes(r.active.Bytes), units.Count(int64(r.free.Count)), units.Bytes(r.free.Bytes)})
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
				units.Bytes(g.LargestFreeBytes), units.Count(int64(g.Blocks))}
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
func verdictText(x *memory.OOM) string {
	if x.Verdict == memory.VerdictCapacity {
		if x.Limited {
			return fmt.Sprintf("live tensors and the request fill the %s this process may use (its per-process memory fraction): it does not fit under that limit", units.Bytes(x.AllowedBytes))
		}
		return "the request is larger than everything free on the device plus all cached free blocks, or live tensors fill almost all of it: it does not fit"
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
		at := fmt.Sprintf("  entry %s: ", units.Count(int64(x.EventIndex)))
		if x.EventIndex < 0 {
			at = "  recorded by the OOM observer (no trace): " // a run recorded in windows
			if x.Step >= 0 && x.Step < len(d.Steps) {
				at = fmt.Sprintf("  %s, recorded by the OOM observer (no trace): ", d.Steps[x.Step].Name)
			}
		}
		p.wrap(fmt.Sprintf("%s requested, %s free on the device, allocated %s, reserved %s, cached free %s (largest %s)",
			units.Bytes(x.RequestedBytes), units.Bytes(x.DeviceFreeBytes), units.Bytes(x.AllocatedBytes),
			units.Bytes(x.ReservedBytes), units.Bytes(x.CachedFreeBytes), lf), at, "    ")
		p.wrap(strings.ToUpper(x.Verdict.String())+": "+verdictText(&x), "  verdict: ", "    ")
		if x.Caught {
			p.line("  caught: the program went on after it (as a batch-size finder does)")
		}
		var parts []string
		for _, g := range x.Filled {
			parts = append(parts, g.Category.String()+" "+units.Bytes(g.Bytes))
		}
		p.wrap(strings.Join(parts, ", "), "  memory then: ", "    ")
		if s := memory.OOMPhaseGrowth(&x, d.Steps); s != "" {
			p.wrap(s, "  ", "    ")
		}
		lines := stackLines(&x.Stack, p.o.Stacks == report.StacksFull)
		p.line(report.CutMiddle("  failing allocation: "+lines[0], p.o.Width))
		for _, l := range lines[1:] {
			p.line(report.CutMiddle("    "+l, p.o.Width))
		}
	}
}
