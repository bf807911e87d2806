package report

import (
	"bufio"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Align is the alignment of a table column.
type Align int

const (
	// Auto (the zero value) right-aligns a column whose cells are all
	// numbers, optionally with a unit ("5.16 GiB", "35.2 us", "93.4%",
	// "1,024", "3.1 GiB (42.0%)"), and left-aligns any other column.
	Auto Align = iota
	// Left aligns cells to the left.
	Left
	// Right aligns cells to the right.
	Right
)

// Table is an aligned plain-text table for terminals:
//
//	name        size     share
//	----------  -------  -----
//	parameters  474 MiB  21.4%
//
// Columns are separated by two spaces, the header is underlined with runs
// of '-', and lines carry no trailing spaces. Rows may be ragged; missing
// cells are blank. Align[i] sets column i's alignment; missing entries are
// Auto.
type Table struct {
	Header []string
	Rows   [][]string
	Align  []Align
	// MaxWidth, when > 0, bounds the width of every line: the widest
	// left-aligned (text) columns are narrowed, down to MinFlexWidth, and
	// their cells cut in the middle (names keep their root and leaf).
	// Numbers are never cut.
	MaxWidth int
}

// MinFlexWidth is the narrowest a text column is made to fit MaxWidth.
const MinFlexWidth = 12

// Write writes the table to w.
func (t *Table) Write(w io.Writer) error {
	ncol := len(t.Header)
	for _, r := range t.Rows {
		ncol = max(ncol, len(r))
	}
	if ncol == 0 {
		return nil
	}
	width := make([]int, ncol)
	for i, h := range t.Header {
		width[i] = textWidth(h)
	}
	for _, r := range t.Rows {
		for i, c := range r {
			width[i] = max(width[i], textWidth(c))
		}
	}
	align := make([]Align, ncol)
	for i := range align {
		if i < len(t.Align) && t.Align[i] != Auto {
			align[i] = t.Align[i]
		} else {
			align[i] = t.autoAlign(i)
		}
	}
	if t.MaxWidth > 0 {
		fit(width, align, t.MaxWidth)
	}
	// the rows' cells, cut to their column's width with distinct cells
	// kept distinct
	cells := make([][]string, len(t.Rows))
	for r, row := range t.Rows {
		cells[r] = make([]string, ncol)
		for i := range ncol {
			if i < len(row) {
				cells[r][i] = cleanCell(row[i])
			}
		}
	}
	col := make([]string, len(cells))
	for i := range ncol {
		for r := range cells {
			col[r] = cells[r][i]
		}
		for r, c := range cutColumn(col, width[i]) {
			cells[r][i] = c
		}
	}
	bw := bufio.NewWriter(w)
	var line []byte
	emit := func(cells []string) {
		line = line[:0]
		for i := 0; i < ncol; i++ {
			c := ""
			if i < len(cells) {
				c = cleanCell(cells[i])
			}
			if textWidth(c) > width[i] {
				c = CutMiddle(c, width[i])
			}
			if i > 0 {
				line = append(line, "  "...)
			}
			pad := width[i] - textWidth(c)
			if align[i] == Right {
				line = appendSpaces(line, pad)
				line = append(line, c...)
			} else {
				line = append(line, c...)
				line = appendSpaces(line, pad)
			}
		}
		line = append(trimRightSpaces(line), '\n')
		bw.Write(line)
	}
	if len(t.Header) > 0 {
		emit(t.Header)
		rule := make([]string, ncol)
		for i := range rule {
			rule[i] = strings.Repeat("-", width[i])
		}
		emit(rule)
	}
	for _, r := range cells {
		emit(r)
	}
	return bw.Flush()
}

// cutColumn cuts the cells of one column that are wider than n in the
// middle, and keeps different cells different: cells whose middle cuts
// would read the same (kernel names that differ only inside) are cut
// around the first place where they differ from the others instead.
func cutColumn(cells []string, n int) []string {
	out := make([]string, len(cells))
	byCut := map[string][]int{}
	for i, c := range cells {
		out[i] = c
		if textWidth(c) > n {
			out[i] = CutMiddle(c, n)
			byCut[out[i]] = append(byCut[out[i]], i)
		}
	}
	for _, group := range byCut {
		for _, j := range group {
			d := -1
			for _, k := range group {
				if cells[k] != cells[j] {
					d = max(d, commonPrefix(cells[j], cells[k]))
				}
			}
			if d >= 0 {
				out[j] = cutAround(cells[j], d, n)
			}
		}
	}
	return out
}

// commonPrefix is the number of runes a and b start with in common.
func commonPrefix(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	n := 0
	for n < len(ra) && n < len(rb) && ra[n] == rb[n] {
		n++
	}
	return n
}

// cutAround shortens s to n runes keeping its start and the runes around
// rune d: "start…around d…".
func cutAround(s string, d, n int) string {
	r := []rune(s)
	if len(r) <= n || n < 8 {
		return CutMiddle(s, n)
	}
	head := min(n/2, d)
	rest := n - head - 1 // after the first ellipsis
	ws := max(head, d-rest/2)
	if ws+rest >= len(r) {
		return string(r[:head]) + Ellipsis + string(r[len(r)-rest:])
	}
	if ws == head {
		return string(r[:n-1]) + Ellipsis
	}
	return string(r[:head]) + Ellipsis + string(r[ws:ws+rest-1]) + Ellipsis
}

// fit narrows the widest left-aligned columns until the line (columns
// joined by two spaces) is at most maxWidth, or every text column is at
// MinFlexWidth.
func fit(width []int, align []Align, maxWidth int) {
	total := 2 * (len(width) - 1)
	for _, w := range width {
		total += w
	}
	// narrow the widest text column one column at a time, so that wide
	// columns end up equally wide
	for total > maxWidth {
		wide := -1
		for i, w := range width {
			if align[i] != Right && w > MinFlexWidth && (wide < 0 || w > width[wide]) {
				wide = i
			}
		}
		if wide < 0 {
			return
		}
		width[wide]--
		total--
	}
}

// autoAlign right-aligns column i if it holds at least one number and
// nothing else but blanks and placeholders such as "-" or "n/a".
func (t *Table) autoAlign(i int) Align {
	numbers := 0
	for _, r := range t.Rows {
		if i >= len(r) {
			continue
		}
		c := strings.TrimSpace(r[i])
		switch {
		case placeholder(c):
		case IsNumeric(c):
			numbers++
		default:
			return Left
		}
	}
	if numbers > 0 {
		return Right
	}
	return Left
}

func placeholder(c string) bool {
	switch c {
	case "", "-", "–", "—", "n/a", "N/A", "?":
		return true
	}
	return false
}

// IsNumeric reports whether s reads as a number, optionally signed, with
// ',' or '_' digit grouping, a decimal point, an exponent, and a short unit
// such as "GiB", "ms", "%", "x" or "GB/s"; a trailing parenthesised number
// ("3.1 GiB (42.0%)") is allowed too.
func IsNumeric(s string) bool {
	s = strings.TrimSpace(s)
	if open := strings.LastIndex(s, " ("); open > 0 && strings.HasSuffix(s, ")") {
		if !numberWithUnit(s[open+2 : len(s)-1]) {
			return false
		}
		s = s[:open]
	}
	return numberWithUnit(s)
}

func numberWithUnit(s string) bool {
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	digits := 0
scan:
	for ; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			digits++
		case (c == ',' || c == '_') && digits > 0, c == '.':
		default:
			break scan
		}
	}
	if digits == 0 {
		return false
	}
	if i+1 < len(s) && (s[i] == 'e' || s[i] == 'E') && (s[i+1] >= '0' && s[i+1] <= '9' || s[i+1] == '-' || s[i+1] == '+') {
		j := i + 1
		if s[j] == '-' || s[j] == '+' {
			j++
		}
		k := j
		for k < len(s) && s[k] >= '0' && s[k] <= '9' {
			k++
		}
		if k > j {
			i = k
		}
	}
	unit := s[i:]
	unit = strings.TrimPrefix(unit, " ")
	if utf8.RuneCountInString(unit) > 8 {
		return false
	}
	for _, r := range unit {
		if !(unicode.IsLetter(r) || r == '%' || r == '/' || r == '×') {
			return false
		}
	}
	return true
}

// textWidth is the number of terminal columns of s, counting one per rune.
func textWidth(s string) int { return utf8.RuneCountInString(cleanCell(s)) }

// cleanCell keeps a cell on one line: newlines and tabs become spaces.
func cleanCell(s string) string {
	if !strings.ContainsAny(s, "\n\r\t") {
		return s
	}
	return strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ", "\t", " ").Replace(s)
}

func appendSpaces(b []byte, n int) []byte {
	for ; n > 0; n-- {
		b = append(b, ' ')
	}
	return b
}

func trimRightSpaces(b []byte) []byte {
	for len(b) > 0 && b[len(b)-1] == ' ' {
		b = b[:len(b)-1]
	}
	return b
}
