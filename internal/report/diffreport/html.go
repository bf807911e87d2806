package diffreport

import (
	"io"
	"strings"

	"github.com/ptscope/ptscope/internal/report"
)

// WriteHTML writes the comparison as one self-contained HTML page (no
// script, no network): the sections, findings and tables of the text,
// names never cut, each table an HTML table; top is the text's --top.
func (d *Document) WriteHTML(w io.Writer, top int) error {
	return d.writeHTML(w, top, true)
}

// WriteHTMLBody writes the same sections as WriteHTML without the page
// around them (no head, styles or body tags): a fragment that another page
// (ptscope serve's compare view) places in an element of its own.
func (d *Document) WriteHTMLBody(w io.Writer, top int) error {
	return d.writeHTML(w, top, false)
}

func (d *Document) writeHTML(w io.Writer, top int, page bool) error {
	o := report.TextOptions{Width: 1 << 20, Top: top}
	h := &htmlPage{}
	p := &printer{Printer: report.NewPrinter(w, o), html: h}
	h.p = p.Printer
	if page {
		h.p.Raw(htmlHead)
	}
	if err := d.write(p); err != nil {
		return err
	}
	if page {
		h.end()
	}
	return h.p.Flush()
}

const htmlHead = `<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>ptscope diff</title>
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.3em; } h2 { font-size: 1.1em; margin-top: 1.6em; }
p { margin: .2em 0; white-space: pre-wrap; }
table { border-collapse: collapse; margin: .4em 0; }
th, td { padding: 2px 10px; border-bottom: 1px solid #ddd; text-align: left; }
td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; }
</style></head><body>`

// htmlPage writes the sections of the comparison as HTML.
type htmlPage struct {
	p      *report.Printer
	titled bool
}

func (h *htmlPage) line(s string) {
	s = strings.TrimSpace(s)
	if s == "" {
		return
	}
	if !h.titled {
		// the first line names the document
		h.titled = true
		h.p.Raw("<h1>" + escapeHTML(s) + "</h1>")
		return
	}
	h.p.Raw("<p>" + escapeHTML(s) + "</p>")
}

func (h *htmlPage) title(s string) { h.p.Raw("<h2>" + escapeHTML(s) + "</h2>") }

// table writes t; a column of numbers is right-aligned as in the text.
func (h *htmlPage) table(t *report.Table) {
	ncol := len(t.Header)
	for _, r := range t.Rows {
		ncol = max(ncol, len(r))
	}
	right := make([]bool, ncol)
	for i := range right {
		if i < len(t.Align) && t.Align[i] != report.Auto {
			right[i] = t.Align[i] == report.Right
			continue
		}
		num := false
		for _, r := range t.Rows {
			if i < len(r) && r[i] != "" && r[i] != "-" {
				if !report.IsNumeric(r[i]) {
					num = false
					break
				}
				num = true
			}
		}
		right[i] = num
	}
	var b strings.Builder
	cell := func(tag string, i int, v string) {
		b.WriteString("<" + tag)
		if right[i] {
			b.WriteString(` class="n"`)
		}
		b.WriteString(">" + escapeHTML(v) + "</" + tag + ">")
	}
	b.WriteString("<table>")
	if len(t.Header) > 0 {
		b.WriteString("<thead><tr>")
		for i := range ncol {
			v := ""
			if i < len(t.Header) {
				v = t.Header[i]
			}
			cell("th", i, v)
		}
		b.WriteString("</tr></thead>")
	}
	b.WriteString("<tbody>")
	for _, r := range t.Rows {
		b.WriteString("<tr>")
		for i := range ncol {
			v := ""
			if i < len(r) {
				v = r[i]
			}
			cell("td", i, v)
		}
		b.WriteString("</tr>")
	}
	b.WriteString("</tbody></table>")
	h.p.Raw(b.String())
}

func (h *htmlPage) end() { h.p.Raw("</body></html>") }

// escapeHTML is html.EscapeString, written out: the html package's entity
// table is a measurable compile for five replacements (docs/build.md).
var escapeHTML = strings.NewReplacer(`&`, "&amp;", `'`, "&#39;", `<`, "&lt;", `>`, "&gt;", `"`, "&#34;").Replace
