package view

import (
	"bytes"
	"io"
	"strings"
)

// writePage writes the one HTML page. Served, it loads ui/app.js and
// ui/app.css; written by --html, it carries them and the data inline, as
// JSON text that the page parses with JSON.parse (much faster than the same
// data as a script's object literal; json.Marshal escapes <, > and &, so the
// text cannot end the element). The title is the only text from outside
// (a file name): it is escaped as html/template escapes an element's text
// (TestPageAsTemplate holds the two equal); the assets and the data are
// ptscope's own and go in as they are.
func writePage(w io.Writer, d pageData) error {
	var b bytes.Buffer
	b.WriteString("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n" +
		"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>")
	b.WriteString(titleEscaper.Replace(d.Title))
	b.WriteString("</title>\n")
	if d.Inline {
		b.WriteString("<style>")
		b.Write(d.CSS)
		b.WriteString("</style>")
	} else {
		b.WriteString(`<link rel="stylesheet" href="/ui/app.css">`)
	}
	b.WriteString("\n</head><body><div id=\"app\"></div>\n")
	if d.Inline {
		b.WriteString(`<script type="application/json" id="ptscope-data">`)
		b.Write(d.Data)
		b.WriteString("</script>\n<script>")
		b.Write(d.JS)
		b.WriteString("</script>")
	} else {
		b.WriteString(`<script src="/ui/app.js"></script>`)
	}
	b.WriteString("\n</body></html>\n")
	_, err := w.Write(b.Bytes())
	return err
}

// titleEscaper escapes text as html/template does inside <title>.
var titleEscaper = strings.NewReplacer("\x00", "\uFFFD", `"`, "&#34;", "&", "&amp;", "'", "&#39;", "+", "&#43;", "<", "&lt;", ">", "&gt;")

type pageData struct {
	Title   string
	Inline  bool
	CSS, JS []byte
	Data    []byte
}

// WriteServedPage writes the page the server answers at "/": the same
// page as an --html file's, which loads its script and styles from
// /ui/app.js and /ui/app.css and its data from the API.
func WriteServedPage(w io.Writer) error {
	return writePage(w, pageData{Title: "ptscope"})
}
