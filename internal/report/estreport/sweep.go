package estreport

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/ptscope/ptscope/internal/estimate"
	"github.com/ptscope/ptscope/internal/report"
	"github.com/ptscope/ptscope/internal/units"
)

// Marks of a sweep cell: fits, fits tightly, does not fit.
const (
	markFits  = "✓"
	markTight = "~"
	markNo    = "✗"
)

func mark(v estimate.Verdict) string {
	switch v {
	case estimate.Fits:
		return markFits
	case estimate.Tight:
		return markTight
	case estimate.DoesNotFit:
		return markNo
	}
	return ""
}

// writeSweep prints the seed's tables: one table per precision (and per
// value of the other axes), rows the models (or micro-batches), columns the
// context lengths, cells the device total with the fit verdict.
func writeSweep(w io.Writer, r *estimate.SweepResult, o report.TextOptions) error {
	p := &printer{w: w, o: o}
	if len(r.Rows) == 0 {
		p.line("ptscope estimate --sweep: no points")
		return p.err
	}
	base := r.Rows[0].Setup
	swept := map[string]bool{}
	for _, a := range r.Axes {
		swept[a.Name] = true
	}
	var fixed []string
	if !swept["dtype"] {
		fixed = append(fixed, Precision(base))
	}
	fixed = append(fixed, optimizerText(base))
	if !swept["attention"] {
		fixed = append(fixed, attentionText(base))
	}
	if !swept["recompute"] && !base.ForwardOnly {
		fixed = append(fixed, recomputeText(base))
	}
	p.para("", "  ", "ptscope estimate --sweep assuming "+strings.Join(fixed, ", "))
	line := fmt.Sprintf("%s, %s; sizes per GPU of the most loaded rank", points(len(r.Rows)), Layout(base))
	if r.Device.MemoryBytes > 0 {
		line = fmt.Sprintf("%s on %s (%s), %s; sizes per GPU of the most loaded rank", points(len(r.Rows)), r.Device.Name, units.Bytes(r.Device.MemoryBytes), Layout(base))
	} else {
		line += "; no device memory given (--gpu or --device-memory for a verdict)"
	}
	p.para("", "  ", line)

	rowAx, colAx := -1, -1
	for i, a := range r.Axes {
		switch {
		case a.Name == "seq":
			colAx = i
		case a.Name == "model":
			rowAx = i
		}
	}
	if rowAx < 0 {
		for i, a := range r.Axes {
			if a.Name != "seq" && a.Name != "dtype" && (rowAx < 0 || a.Name == "micro-batch") {
				rowAx = i
			}
		}
	}
	var tableAxes []int
	for i, a := range r.Axes {
		if i != rowAx && i != colAx && a.Name == "dtype" {
			tableAxes = append([]int{i}, tableAxes...)
		} else if i != rowAx && i != colAx {
			tableAxes = append(tableAxes, i)
		}
	}
	index := map[string]int{}
	for i, row := range r.Rows {
		index[rowKey(r.Axes, row)] = i
	}
	for _, combo := range combos(r.Axes, tableAxes) {
		var title []string
		for j, ai := range tableAxes {
			title = append(title, axisLabel(r.Axes[ai].Name, combo[j]))
		}
		heading := "device total"
		if colAx < 0 {
			heading = "peak memory"
		}
		if len(title) > 0 {
			heading += ", " + strings.Join(title, ", ")
		}
		p.section(heading)
		writeSweepTable(p, r, rowAx, colAx, tableAxes, combo, index)
	}
	if r.Device.MemoryBytes > 0 {
		p.blank()
		p.para("", "  ", fmt.Sprintf("%s fits, %s fits with less headroom than the fragmentation allowance, %s does not fit; - not a valid setup",
			markFits, markTight, markNo))
	}
	writeSweepErrors(p, r)
	if len(r.Best) > 0 {
		p.blank()
		for _, i := range r.Best {
			b := r.Rows[i]
			p.para("", "  ", fmt.Sprintf("largest setting that fits: %s (device total %s)", describeRow(r.Axes, b), units.Bytes(b.DeviceTotalBytes)))
		}
	} else if r.Device.MemoryBytes > 0 {
		p.blank()
		p.line("nothing in the sweep fits")
	}
	return p.err
}

func axisLabel(name, v string) string {
	switch name {
	case "dtype":
		return v
	case "model":
		return v
	}
	return name + " " + v
}

func rowKey(axes []estimate.SweepAxis, row estimate.SweepRow) string {
	var k []string
	for _, a := range axes {
		k = append(k, fmt.Sprint(row.Values[a.Name]))
	}
	return strings.Join(k, "\x00")
}

func describeRow(axes []estimate.SweepAxis, row estimate.SweepRow) string {
	var kv []string
	for _, a := range axes {
		kv = append(kv, fmt.Sprintf("%s=%v", a.Name, row.Values[a.Name]))
	}
	return strings.Join(kv, " ")
}

// combos lists every combination of the values of the given axes, first axis slowest.
func combos(axes []estimate.SweepAxis, which []int) [][]string {
	out := [][]string{nil}
	for _, ai := range which {
		var next [][]string
		for _, c := range out {
			for _, v := range axes[ai].Values {
				next = append(next, append(append([]string{}, c...), v))
			}
		}
		out = next
	}
	return out
}

func writeSweepTable(p *printer, r *estimate.SweepResult, rowAx, colAx int, tableAxes []int, combo []string, index map[string]int) {
	rowVals := []string{""}
	if rowAx >= 0 {
		rowVals = r.Axes[rowAx].Values
	}
	colVals := []string{""}
	if colAx >= 0 {
		colVals = r.Axes[colAx].Values
	}
	lookup := func(rv, cv string) (estimate.SweepRow, bool) {
		vals := make([]string, len(r.Axes))
		for j, ai := range tableAxes {
			vals[ai] = combo[j]
		}
		if rowAx >= 0 {
			vals[rowAx] = rv
		}
		if colAx >= 0 {
			vals[colAx] = cv
		}
		i, ok := index[strings.Join(vals, "\x00")]
		if !ok {
			return estimate.SweepRow{}, false
		}
		return r.Rows[i], true
	}
	lead := []string{}
	if rowAx >= 0 {
		lead = append(lead, r.Axes[rowAx].Name)
		if r.Axes[rowAx].Name == "model" {
			lead = append(lead, "params")
		}
	}
	if colAx < 0 {
		// one column of points: every size and the verdict
		t := &report.Table{Header: append(lead, "peak allocated", "peak reserved", "device total", "verdict")}
		for _, rv := range rowVals {
			row, _ := lookup(rv, "")
			cells := leadCells(r.Axes, rowAx, rv, row)
			if row.Error != "" {
				t.Rows = append(t.Rows, append(cells, "-", "-", "-", "not valid"))
				continue
			}
			t.Rows = append(t.Rows, append(cells, units.Bytes(row.PeakAllocatedBytes), units.Bytes(row.PeakReservedBytes),
				units.Bytes(row.DeviceTotalBytes), strings.ToLower(VerdictText(row.Verdict))))
		}
		p.table(t)
		return
	}
	// columns: context lengths, as many per table as the width allows
	const cellW = 12
	leadW := 0
	for _, rv := range rowVals {
		row, _ := lookup(rv, colVals[0])
		w := 0
		for _, c := range leadCells(r.Axes, rowAx, rv, row) {
			w += len([]rune(c)) + 2
		}
		leadW = max(leadW, w, 10)
	}
	per := max(1, (p.o.Width-2-leadW)/(cellW+2))
	for start := 0; start < len(colVals); start += per {
		if start > 0 {
			p.blank()
		}
		cols := colVals[start:min(len(colVals), start+per)]
		hdr := append([]string{}, lead...)
		for _, cv := range cols {
			hdr = append(hdr, axisLabel("seq", cv))
		}
		t := &report.Table{Header: hdr}
		for _, rv := range rowVals {
			first, _ := lookup(rv, cols[0])
			cells := leadCells(r.Axes, rowAx, rv, first)
			for _, cv := range cols {
				row, ok := lookup(rv, cv)
				switch {
				case !ok || row.Error != "":
					cells = append(cells, "-")
				default:
					cells = append(cells, strings.TrimSpace(units.Bytes(row.DeviceTotalBytes)+" "+mark(row.Verdict)))
				}
			}
			t.Rows = append(t.Rows, cells)
		}
		align := make([]report.Align, len(hdr))
		for i := len(lead); i < len(hdr); i++ {
			align[i] = report.Right
		}
		t.Align = align
		p.table(t)
	}
}

func leadCells(axes []estimate.SweepAxis, rowAx int, rv string, row estimate.SweepRow) []string {
	if rowAx < 0 {
		return nil
	}
	if axes[rowAx].Name == "model" {
		ps := "-"
		if row.Params > 0 {
			ps = Params(row.Params)
		}
		return []string{rv, ps}
	}
	return []string{rv}
}

// writeSweepErrors lists why points are not valid setups, once per reason.
func writeSweepErrors(p *printer, r *estimate.SweepResult) {
	by := map[string][]string{}
	for _, row := range r.Rows {
		if row.Error != "" {
			by[row.Error] = append(by[row.Error], row.Model)
		}
	}
	if len(by) == 0 {
		return
	}
	var errs []string
	for e := range by {
		errs = append(errs, e)
	}
	sort.Strings(errs)
	p.blank()
	p.line("not valid setups:")
	for _, e := range errs {
		models := dedupe(by[e])
		p.para("  ", "    ", fmt.Sprintf("%s: %s (%s)", strings.Join(models, ", "), e, points(len(by[e]))))
	}
}

func points(n int) string {
	if n == 1 {
		return "1 point"
	}
	return fmt.Sprintf("%d points", n)
}

func dedupe(ss []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range ss {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}
