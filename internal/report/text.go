package report

import (
	"strings"
	"unicode/utf8"

	"github.com/ptscope/ptscope/internal/finding"
)

// Ellipsis marks text cut to fit.
const Ellipsis = "…"

// CutMiddle shortens s to at most n columns by replacing its middle with an
// ellipsis, keeping both ends (a module path's root and its leaf, a file's
// folder and its name). n < 2 yields the first n runes.
func CutMiddle(s string, n int) string {
	w := utf8.RuneCountInString(s)
	if w <= n {
		return s
	}
	r := []rune(s)
	if n < 2 {
		return string(r[:max(n, 0)])
	}
	head := (n - 1) / 2
	tail := n - 1 - head
	return string(r[:head]) + Ellipsis + string(r[len(r)-tail:])
}

// CutEnd shortens s to at most n columns, ending in an ellipsis.
func CutEnd(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	if n < 1 {
		return ""
	}
	return string(r[:n-1]) + Ellipsis
}

// Wrap breaks s into lines of at most width columns at spaces, the first
// prefixed with first and the rest with indent (whose widths count). A word
// longer than a line is cut in the middle. Newlines in s start new lines.
func Wrap(s string, width int, first, indent string) []string {
	var out []string
	prefix := first
	for _, para := range strings.Split(s, "\n") {
		line := prefix
		lw := utf8.RuneCountInString(prefix)
		empty := true
		for _, word := range strings.Fields(para) {
			ww := utf8.RuneCountInString(word)
			room := width - utf8.RuneCountInString(indent)
			if ww > room {
				word = CutMiddle(word, max(room, 8))
				ww = utf8.RuneCountInString(word)
			}
			if !empty && lw+1+ww > width {
				out = append(out, line)
				line, lw, empty = indent, utf8.RuneCountInString(indent), true
			}
			if !empty {
				line += " "
				lw++
			}
			line += word
			lw += ww
			empty = false
		}
		out = append(out, strings.TrimRight(line, " "))
		prefix = indent
	}
	return out
}

// ANSI colours for severities (only when TextOptions.Color), after ESC.
const (
	ansiReset  = "[0m"
	ansiRed    = "[1;31m"
	ansiYellow = "[33m"
	ansiCyan   = "[36m"
	ansiBold   = "[1m"
)

// esc starts an ANSI sequence: ESC, or the Mark of the writer that turns
// it into ESC (term.SafeWriter).
func (o TextOptions) esc() string {
	if o.Mark != "" {
		return o.Mark
	}
	return "\x1b"
}

// Severity renders a severity as "[critical]", coloured when o.Color. The
// width of the visible text is len(sev.String())+2.
func (o TextOptions) Severity(s finding.Severity) string {
	t := "[" + s.String() + "]"
	if !o.Color {
		return t
	}
	e := o.esc()
	switch s {
	case finding.Critical:
		return e + ansiRed + t + e + ansiReset
	case finding.Warning:
		return e + ansiYellow + t + e + ansiReset
	default:
		return e + ansiCyan + t + e + ansiReset
	}
}

// Bold renders a section title, bold when o.Color.
func (o TextOptions) Bold(s string) string {
	if !o.Color {
		return s
	}
	return o.esc() + ansiBold + s + o.esc() + ansiReset
}

// FindingLines lays out one finding in o.Width columns: the severity and
// id, the message, then the recommendation, wrapped and indented under it.
func (o TextOptions) FindingLines(f finding.Finding, indent string) []string {
	lead := indent + "[" + f.Severity.String() + "] " + f.ID + ": "
	lines := Wrap(f.Message, o.Width, lead, indent+"    ")
	if f.Recommendation != "" {
		lines = append(lines, Wrap(f.Recommendation, o.Width, indent+"    → ", indent+"      ")...)
	}
	if o.Color && len(lines) > 0 {
		plain := indent + "[" + f.Severity.String() + "]"
		lines[0] = indent + o.Severity(f.Severity) + lines[0][len(plain):]
	}
	return lines
}
