package tracereport

import (
	"io"
	"unicode/utf8"

	"github.com/ptscope/ptscope/internal/report"
)

// column is one column of a table that must fit the line width.
type column struct {
	head  string
	cells []string
	// drop orders the columns given up when the table does not fit: the
	// highest first; 0 is never dropped. A column whose cells are all zero
	// ("0 ns", "0 B", "0.0%") is dropped too when drop > 0.
	drop int
	// min is the narrowest a text column may be cut to before optional
	// columns are given up (0: report.MinFlexWidth; -1: never cut).
	min int
}

// writeTable writes cols as an aligned table no wider than width: all-zero
// optional columns go, then optional columns by drop order until the table
// fits with its text columns narrowed to report.MinFlexWidth; text cells
// are then cut in the middle.
func writeTable(w io.Writer, width int, cols []column) error {
	keep := make([]bool, len(cols))
	for i, c := range cols {
		keep[i] = c.drop == 0 || !allZero(c.cells)
	}
	for need(cols, keep) > width {
		worst := -1
		for i, c := range cols {
			if keep[i] && c.drop > 0 && (worst < 0 || c.drop > cols[worst].drop) {
				worst = i
			}
		}
		if worst < 0 {
			break
		}
		keep[worst] = false
	}
	t := report.Table{MaxWidth: width}
	rows := 0
	for i, c := range cols {
		if keep[i] {
			t.Header = append(t.Header, c.head)
			rows = max(rows, len(c.cells))
		}
	}
	t.Rows = make([][]string, rows)
	for r := range t.Rows {
		for i, c := range cols {
			if !keep[i] {
				continue
			}
			v := ""
			if r < len(c.cells) {
				v = c.cells[r]
			}
			t.Rows[r] = append(t.Rows[r], v)
		}
	}
	return t.Write(w)
}

// need is the narrowest the kept columns can be laid out: numbers at their
// width, text at most report.MinFlexWidth.
func need(cols []column, keep []bool) int {
	n, total := 0, 0
	for i, c := range cols {
		if !keep[i] {
			continue
		}
		cw := utf8.RuneCountInString(c.head)
		numeric := true
		for _, s := range c.cells {
			cw = max(cw, utf8.RuneCountInString(s))
			if s != "" && s != "-" && !report.IsNumeric(s) {
				numeric = false
			}
		}
		if !numeric && c.min >= 0 {
			cw = min(cw, max(c.min, report.MinFlexWidth))
		}
		total += cw
		n++
	}
	return total + 2*max(n-1, 0)
}

func allZero(cells []string) bool {
	for _, s := range cells {
		switch s {
		case "", "0 ns", "0 B", "0.0%", "0", "-":
		default:
			return false
		}
	}
	return true
}
