package report

import (
	"bufio"
	"io"
	"strings"
)

// Printer writes the lines of a text report, each cut to O.Width: a
// renderer's sections then never run past the terminal however long a
// name is. The first write error is kept in Err and later writes do
// nothing; Flush returns it.
type Printer struct {
	W   *bufio.Writer
	O   TextOptions
	Err error
}

// NewPrinter returns a Printer on w.
func NewPrinter(w io.Writer, o TextOptions) *Printer {
	return &Printer{W: bufio.NewWriter(w), O: o}
}

// Raw writes s and a newline as it is (a line already laid out for the
// width, such as TextOptions.FindingLines gives, colour codes included).
func (p *Printer) Raw(s string) {
	if p.Err == nil {
		_, p.Err = p.W.WriteString(s + "\n")
	}
}

// Line writes s cut to the width.
func (p *Printer) Line(s string) { p.Raw(CutEnd(s, p.O.Width)) }

// Blank writes an empty line.
func (p *Printer) Blank() { p.Raw("") }

// Title writes a blank line and a section title, wrapped and in bold.
func (p *Printer) Title(s string) {
	p.Blank()
	for _, l := range Wrap(s, p.O.Width, "", "  ") {
		p.Raw(p.O.Bold(l))
	}
}

// Para writes s wrapped, the first line after first and the rest after
// indent.
func (p *Printer) Para(s, first, indent string) {
	for _, l := range Wrap(s, p.O.Width, first, indent) {
		p.Line(l)
	}
}

// Table writes t laid out within the width, each line after indent.
func (p *Printer) Table(t *Table, indent string) {
	t.MaxWidth = p.O.Width - len(indent)
	var b strings.Builder
	if err := t.Write(&b); err != nil && p.Err == nil {
		p.Err = err
	}
	for _, l := range strings.Split(strings.TrimRight(b.String(), "\n"), "\n") {
		p.Line(indent + l)
	}
}

// Flush writes what is buffered and returns the first error.
func (p *Printer) Flush() error {
	if p.Err != nil {
		return p.Err
	}
	return p.W.Flush()
}
