// Package fleetreport renders the fleet summary (fleet.Report) of many
// ranks: one screen of text (distributions, outliers, imbalance,
// stragglers, collective skew, findings, the largest ranks), a run folder's
// README.md and charts. It only formats and trims; the JSON is the report.
package fleetreport

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/ptscope/ptscope/internal/fleet"
	"github.com/ptscope/ptscope/internal/report"
	"github.com/ptscope/ptscope/internal/units"
)

// Document is a fleet.Report as the output switch renders it.
type Document struct {
	Report *fleet.Report
	// Inputs are the paths the user gave, for the --rank hint.
	Inputs []string
	// Name names the run folder (default "fleet").
	Name string
}

// New returns the document of rep.
func New(rep *fleet.Report, inputs []string) *Document { return &Document{Report: rep, Inputs: inputs} }

// MarshalJSON writes the report.
func (d *Document) MarshalJSON() ([]byte, error) { return json.Marshal(d.Report) }

// RunName names the run folder.
func (d *Document) RunName() string {
	if d.Name != "" {
		return d.Name
	}
	if len(d.Inputs) > 0 {
		b := filepath.Base(strings.TrimRight(d.Inputs[0], "/"))
		if b != "" && b != "." && b != "/" {
			return b + "_fleet"
		}
	}
	return "fleet"
}

// MaxRankRows bounds the ranks table of the text report (at most the --top
// rows).
const MaxRankRows = 5

// WriteText writes the one-screen summary.
func (d *Document) WriteText(w io.Writer, o report.TextOptions) error {
	bw := bufio.NewWriter(w)
	d.write(bw, o)
	return bw.Flush()
}

func (d *Document) write(w *bufio.Writer, o report.TextOptions) {
	rep := d.Report
	sc := screen{w: w, o: o, width: max(o.Width, 60)}
	d.writeHead(sc)
	if rep.Memory != nil {
		writeMemory(sc, rep.Memory)
	}
	if rep.Time != nil {
		writeTime(sc, rep.Time)
	}
	writeFindings(sc, rep)
	d.writeRanks(w, o, sc.width)
	writeUnread(sc, rep)
}

// screen writes the text report's lines, each cut to the width.
type screen struct {
	w     *bufio.Writer
	o     report.TextOptions
	width int
}

// line writes s cut to the width.
func (sc screen) line(s string) { fmt.Fprintln(sc.w, report.CutEnd(s, sc.width)) }

// writeHead writes the title: how many ranks and inputs, and the command
// that opens one rank's report.
func (d *Document) writeHead(sc screen) {
	rep := d.Report
	var kinds []string
	if rep.Memory != nil {
		kinds = append(kinds, units.Plural(countInputs(rep.Memory), "snapshot", "snapshots"))
	}
	if rep.Time != nil {
		kinds = append(kinds, units.Plural(countTraces(rep.Time), "trace", "traces"))
	}
	head := fmt.Sprintf("Fleet of %s", units.Plural(rep.Ranks, "rank", "ranks"))
	if len(kinds) > 0 {
		head += ": " + strings.Join(kinds, ", ")
	}
	cmd := rep.Command
	if cmd == "check" {
		cmd = "analyze"
	}
	sc.line(sc.o.Bold(head) + fmt.Sprintf(" (one rank's report: ptscope %s --rank N %s)", cmd, strings.Join(d.Inputs, " ")))
}

// writeMemory writes the memory section: the distributions of the peaks
// and efficiency, the imbalance, and the ranks out of memory, leaking or
// truncated.
func writeMemory(sc screen, m *fleet.MemoryFleet) {
	w, width := sc.w, sc.width
	fmt.Fprintln(w)
	sc.line(sc.o.Bold("Memory") + fmt.Sprintf(" (per rank: the highest peak over its snapshots and devices; %s ranks)", units.Count(int64(m.PeakAllocated.Ranks))))
	t := report.Table{Header: []string{"", "min", "median", "p99", "max", "outliers"}, MaxWidth: width,
		Align: []report.Align{report.Left, report.Right, report.Right, report.Right, report.Right, report.Left}}
	t.Rows = append(t.Rows, bytesRow("peak allocated", m.PeakAllocated))
	t.Rows = append(t.Rows, bytesRow("peak reserved", m.PeakReserved))
	t.Rows = append(t.Rows, ratioRow("efficiency at peak", m.EfficiencyAtPeak))
	writeStats(w, &t, width)
	if m.PeakAllocated.Ranks >= 2 {
		sc.line(fmt.Sprintf("  imbalance  rank %d peaks %s over the mean (%s; max %s, min %s on rank %d)",
			m.PeakAllocated.MaxRank, units.Percent(m.ImbalanceRatio), units.Bytes(m.PeakAllocated.MeanBytes),
			units.Bytes(m.PeakAllocated.MaxBytes), units.Bytes(m.PeakAllocated.MinBytes), m.PeakAllocated.MinRank))
	}
	sc.line(fmt.Sprintf("  out of memory %s   leaking %s   truncated %s",
		rankSet(m.OOMRanks), rankSet(m.LeakRanks), rankSet(m.TruncatedRanks)))
}

// writeTime writes the time section: the distributions of step time,
// utilisation, DataLoader and exposed communication, the stragglers and
// the collectives' start skew.
func writeTime(sc screen, t *fleet.TimeFleet) {
	w, width := sc.w, sc.width
	fmt.Fprintln(w)
	sc.line(sc.o.Bold("Time") + fmt.Sprintf(" (profiler traces; %s ranks with steps)", units.Count(int64(t.StepTime.Ranks))))
	tb := report.Table{Header: []string{"", "min", "median", "p99", "max", "outliers"}, MaxWidth: width,
		Align: []report.Align{report.Left, report.Right, report.Right, report.Right, report.Right, report.Left}}
	tb.Rows = append(tb.Rows, durationRow("average step", t.StepTime))
	tb.Rows = append(tb.Rows, ratioRow("GPU utilization", t.GPUUtilization))
	tb.Rows = append(tb.Rows, ratioRow("DataLoader share", t.DataLoader))
	tb.Rows = append(tb.Rows, durationRow("exposed comm/step", t.ExposedCommunication))
	writeStats(w, &tb, width)
	sc.line(stragglersLine(t.Stragglers))
	sc.line(skewLine(t.Collectives))
}

// stragglersLine names the first two stragglers with how much slower
// their steps are and how often they come last to a collective.
func stragglersLine(st []fleet.Straggler) string {
	if len(st) == 0 {
		return "  stragglers  none"
	}
	var parts []string
	for i, s := range st {
		if i == 2 {
			parts = append(parts, fmt.Sprintf("and %d more", len(st)-2))
			break
		}
		p := fmt.Sprintf("rank %d (step %s", s.Rank, signedPct(s.StepRatio))
		if s.LateArrivals > 0 {
			p += fmt.Sprintf(", last at %s of its collectives", units.Percent(s.LateRatio))
		}
		parts = append(parts, p+")")
	}
	return "  stragglers  " + strings.Join(parts, ", ")
}

// skewLine is the collectives' start skew across ranks and the most
// skewed collective.
func skewLine(c fleet.CollectiveSummary) string {
	if c.Matched == 0 {
		return "  collectives  none matched across ranks"
	}
	s := fmt.Sprintf("  collective start skew  median %s, p99 %s, max %s over %s collectives",
		units.Duration(c.StartSkew.MedianNS), units.Duration(c.StartSkew.P99NS), units.Duration(c.StartSkew.MaxNS), units.Count(int64(c.Matched)))
	if len(c.MostSkewed) > 0 {
		x := c.MostSkewed[0]
		s += fmt.Sprintf("; worst %s #%d", x.Name, x.Index)
		if x.LastRank >= 0 {
			s += fmt.Sprintf(" (rank %d last)", x.LastRank)
		}
	}
	return s
}

// writeFindings writes the fleet's findings, then those of the ranks' own
// reports (the first two, with the ranks that have each).
func writeFindings(sc screen, rep *fleet.Report) {
	w, o := sc.w, sc.o
	if len(rep.Findings) > 0 {
		fmt.Fprintln(w)
		sc.line(o.Bold("Findings"))
		for _, f := range rep.Findings {
			for _, l := range o.FindingLines(f, "  ") {
				fmt.Fprintln(w, l)
			}
		}
	}
	if len(rep.RankFindings) > 0 {
		fmt.Fprintln(w)
		sc.line(o.Bold("Findings of the ranks' own reports") + " (ranks that have each)")
		for i, f := range rep.RankFindings {
			if i == 2 && len(rep.RankFindings) > 3 {
				sc.line(fmt.Sprintf("  ... %d more (--json: rank_findings)", len(rep.RankFindings)-2))
				break
			}
			ex := ""
			if f.Example.At != nil && f.Example.At.Rank != nil {
				ex = fmt.Sprintf("rank %d: ", *f.Example.At.Rank)
			}
			sc.line(fmt.Sprintf("  %s %s on %s: %s%s", o.Severity(f.Severity), f.ID, units.Plural(f.Ranks, "rank", "ranks"), ex, f.Example.Message))
		}
	}
}

// writeUnread writes the inputs that could not be read and those left
// out for having no rank.
func writeUnread(sc screen, rep *fleet.Report) {
	w := sc.w
	if len(rep.Errors) > 0 {
		fmt.Fprintln(w)
		sc.line(sc.o.Bold("Unreadable") + fmt.Sprintf(" (%s)", units.Plural(len(rep.Errors), "input", "inputs")))
		for i, e := range rep.Errors {
			if i == 3 {
				sc.line(fmt.Sprintf("  ... %d more (--json: errors)", len(rep.Errors)-3))
				break
			}
			sc.line(fmt.Sprintf("  rank %d: %s", e.Rank, e.Error))
		}
	}
	if n := len(rep.Skipped); n > 0 {
		var names []string
		for i, s := range rep.Skipped {
			if i == 3 {
				names = append(names, "...")
				break
			}
			names = append(names, filepath.Base(s.Path))
		}
		fmt.Fprintln(w)
		sc.line(fmt.Sprintf("Not ranks: %s without a rank in its name, folder or distributedInfo (%s)", units.Plural(n, "input", "inputs"), strings.Join(names, ", ")))
	}
}

// writeRanks writes the ranks table: the largest peaks (or the slowest
// steps without snapshots), then the smallest for contrast.
func (d *Document) writeRanks(w *bufio.Writer, o report.TextOptions, width int) {
	rep := d.Report
	all := rankRows(rep)
	if len(all) == 0 {
		return
	}
	byMem := rep.Memory != nil
	n := min(max(o.Top, 1), MaxRankRows, len(all))
	fmt.Fprintln(w)
	what := "peak allocated"
	if !byMem {
		what = "average step"
	}
	title := fmt.Sprintf("Ranks by %s (the largest %d of %s; --json for every rank)", what, n, units.Count(int64(len(all))))
	fmt.Fprintln(w, report.CutEnd(o.Bold(title), width))
	writeFitting(w, rankColumns(rep), all[:n], width)
}

// rankRow is a rank's row of the ranks table: its memory and time, each
// nil when the fleet has none for it.
type rankRow struct {
	rank int
	mem  *fleet.RankMemory
	tim  *fleet.RankTime
}

// rankRows is every rank's row, the largest peak allocated first (the
// slowest average step without snapshots), then by rank.
func rankRows(rep *fleet.Report) []*rankRow {
	rows := map[int]*rankRow{}
	get := func(r int) *rankRow {
		if rows[r] == nil {
			rows[r] = &rankRow{rank: r}
		}
		return rows[r]
	}
	if rep.Memory != nil {
		for i := range rep.Memory.Ranks {
			get(rep.Memory.Ranks[i].Rank).mem = &rep.Memory.Ranks[i]
		}
	}
	if rep.Time != nil {
		for i := range rep.Time.Ranks {
			get(rep.Time.Ranks[i].Rank).tim = &rep.Time.Ranks[i]
		}
	}
	all := make([]*rankRow, 0, len(rows))
	for _, r := range rows {
		all = append(all, r)
	}
	byMem := rep.Memory != nil
	key := func(r *rankRow) float64 {
		if byMem {
			if r.mem == nil {
				return -1
			}
			return float64(r.mem.PeakAllocatedBytes)
		}
		if r.tim == nil {
			return -1
		}
		return float64(r.tim.AverageStepNS)
	}
	sort.Slice(all, func(i, j int) bool {
		a, b := key(all[i]), key(all[j])
		if a != b {
			return a > b
		}
		return all[i].rank < all[j].rank
	})
	return all
}

// rankColumn is a column of the ranks table; drop orders the columns
// dropped when the table is too wide (the highest first; 0: never).
type rankColumn struct {
	name string
	drop int
	cell func(r *rankRow) string
}

// rankColumns is the ranks table's columns: the rank, its memory when the
// fleet has snapshots, its time when it has traces, and its path.
func rankColumns(rep *fleet.Report) []rankColumn {
	dash := "-"
	var cols []rankColumn
	cols = append(cols, rankColumn{"rank", 0, func(r *rankRow) string { return strconv.Itoa(r.rank) }})
	if rep.Memory != nil {
		mem := func(f func(m *fleet.RankMemory) string) func(r *rankRow) string {
			return func(r *rankRow) string {
				if r.mem == nil || r.mem.Device < 0 {
					return dash
				}
				return f(r.mem)
			}
		}
		peaks := func(f func(m *fleet.RankMemory) string) func(r *rankRow) string { // phases-only ranks too
			return func(r *rankRow) string {
				if r.mem == nil || !r.mem.Measured() {
					return dash
				}
				return f(r.mem)
			}
		}
		cols = append(cols,
			rankColumn{"peak alloc", 0, peaks(func(m *fleet.RankMemory) string { return units.Bytes(m.PeakAllocatedBytes) })},
			rankColumn{"reserved", 3, peaks(func(m *fleet.RankMemory) string { return units.Bytes(m.PeakReservedBytes) })},
			rankColumn{"eff.", 4, mem(func(m *fleet.RankMemory) string { return units.Percent(m.EfficiencyAtPeakRatio) })},
			rankColumn{"pattern", 2, func(r *rankRow) string {
				switch {
				case r.mem == nil:
					return dash
				case r.mem.PhasesOnly:
					return "phases only"
				case r.mem.Device < 0:
					return "unreadable"
				}
				return r.mem.Pattern.String()
			}},
			rankColumn{"OOMs", 5, mem(func(m *fleet.RankMemory) string { return strconv.Itoa(m.OOMs) })})
	}
	if rep.Time != nil {
		tim := func(f func(t *fleet.RankTime) string) func(r *rankRow) string {
			return func(r *rankRow) string {
				if r.tim == nil || r.tim.Traces == 0 {
					return dash
				}
				return f(r.tim)
			}
		}
		cols = append(cols,
			rankColumn{"avg step", 0, tim(func(t *fleet.RankTime) string { return units.Duration(t.AverageStepNS) })},
			rankColumn{"GPU util", 1, tim(func(t *fleet.RankTime) string { return units.Percent(t.GPUUtilizationRatio) })},
			rankColumn{"late", 6, tim(func(t *fleet.RankTime) string { return strconv.Itoa(t.LateArrivals) })})
	}
	cols = append(cols, rankColumn{"path", 0, func(r *rankRow) string {
		if r.mem != nil {
			return r.mem.Path
		}
		if r.tim != nil {
			return r.tim.Path
		}
		return ""
	}})
	return cols
}

// writeFitting writes the table of rows, indented, dropping columns (the
// highest drop first) until it fits the width.
func writeFitting(w *bufio.Writer, cols []rankColumn, rows []*rankRow, width int) {
	for {
		t := report.Table{MaxWidth: width}
		for _, c := range cols {
			t.Header = append(t.Header, c.name)
		}
		for _, r := range rows {
			var cells []string
			for _, c := range cols {
				cells = append(cells, c.cell(r))
			}
			t.Rows = append(t.Rows, cells)
		}
		var b strings.Builder
		tt := t
		tt.MaxWidth = max(width-2, 20)
		tt.Write(&b)
		fits := true
		for _, l := range strings.Split(b.String(), "\n") {
			if len([]rune(l))+2 > width {
				fits = false
			}
		}
		drop, at := 0, -1
		for i, c := range cols {
			if c.drop > drop {
				drop, at = c.drop, i
			}
		}
		if fits || at < 0 {
			writeIndented(w, &t)
			return
		}
		cols = append(cols[:at], cols[at+1:]...)
	}
}

// writeStats writes a table of distributions whose last column is the
// outliers, indented by two spaces. When it does not fit the width with
// the numbers whole, the outliers leave the table for lines of their own
// below it, so that no number is cut.
func writeStats(w *bufio.Writer, t *report.Table, width int) {
	full := *t
	full.MaxWidth = 0
	var b strings.Builder
	full.Write(&b)
	widest := 0
	for _, l := range strings.Split(strings.TrimRight(b.String(), "\n"), "\n") {
		widest = max(widest, utf8.RuneCountInString(l))
	}
	last := len(t.Header) - 1
	if widest+2 <= width || last < 1 {
		writeIndented(w, t)
		return
	}
	short := report.Table{Header: t.Header[:last], Align: t.Align[:min(last, len(t.Align))], MaxWidth: width}
	var notes []string
	for _, r := range t.Rows {
		short.Rows = append(short.Rows, r[:min(last, len(r))])
		if last < len(r) && r[last] != "" && r[last] != "none" && r[last] != "-" {
			notes = append(notes, "  "+t.Header[last]+" of "+r[0]+": "+r[last])
		}
	}
	writeIndented(w, &short)
	for _, n := range notes {
		fmt.Fprintln(w, report.CutEnd(n, width))
	}
}

// writeIndented writes a table indented by two spaces.
func writeIndented(w *bufio.Writer, t *report.Table) {
	t.MaxWidth = max(t.MaxWidth-2, 20)
	var b strings.Builder
	t.Write(&b)
	for _, l := range strings.Split(strings.TrimRight(b.String(), "\n"), "\n") {
		fmt.Fprintln(w, "  "+l)
	}
}

func bytesRow(name string, s fleet.BytesStats) []string {
	if s.Ranks == 0 {
		return []string{name, "-", "-", "-", "-", ""}
	}
	var parts []string
	for _, o := range s.Outliers {
		parts = append(parts, fmt.Sprintf("%d %s", o.Rank, signedPct(o.DeviationRatio)))
	}
	return []string{name, units.Bytes(s.MinBytes), units.Bytes(s.MedianBytes), units.Bytes(s.P99Bytes), units.Bytes(s.MaxBytes), outlierCell(parts)}
}

func durationRow(name string, s fleet.DurationStats) []string {
	if s.Ranks == 0 {
		return []string{name, "-", "-", "-", "-", ""}
	}
	var parts []string
	for _, o := range s.Outliers {
		parts = append(parts, fmt.Sprintf("%d %s", o.Rank, signedPct(o.DeviationRatio)))
	}
	return []string{name, units.Duration(s.MinNS), units.Duration(s.MedianNS), units.Duration(s.P99NS), units.Duration(s.MaxNS), outlierCell(parts)}
}

func ratioRow(name string, s fleet.RatioStats) []string {
	if s.Ranks == 0 {
		return []string{name, "-", "-", "-", "-", ""}
	}
	var parts []string
	for _, o := range s.Outliers {
		parts = append(parts, fmt.Sprintf("%d %+.1f pt", o.Rank, o.DifferenceRatio*100))
	}
	return []string{name, units.Percent(s.MinRatio), units.Percent(s.MedianRatio), units.Percent(s.P99Ratio), units.Percent(s.MaxRatio), outlierCell(parts)}
}

// outlierCell names the first outliers (rank and deviation) and counts the
// rest.
func outlierCell(parts []string) string {
	switch len(parts) {
	case 0:
		return "none"
	case 1:
		return "rank " + parts[0]
	case 2:
		return "ranks " + strings.Join(parts, ", ")
	}
	return fmt.Sprintf("%d ranks: %s, ...", len(parts), strings.Join(parts[:2], ", "))
}

func signedPct(r float64) string {
	if r >= 0 {
		return "+" + units.Percent(r)
	}
	return units.Percent(r)
}

// rankSet writes "none", or the count and the first ranks.
func rankSet(ranks []int) string {
	if len(ranks) == 0 {
		return "none"
	}
	var parts []string
	for i, r := range ranks {
		if i == 4 {
			parts = append(parts, "...")
			break
		}
		parts = append(parts, strconv.Itoa(r))
	}
	return fmt.Sprintf("%s (%s)", units.Plural(len(ranks), "rank", "ranks"), strings.Join(parts, ", "))
}

func countInputs(m *fleet.MemoryFleet) int {
	n := 0
	for _, r := range m.Ranks {
		n += max(r.Inputs, 1)
	}
	return n
}

func countTraces(t *fleet.TimeFleet) int {
	n := 0
	for _, r := range t.Ranks {
		n += max(r.Traces, 1)
	}
	return n
}
