package web

import (
	"bytes"
	"embed"
	"io"
	"net/http"
	"strings"
)

//go:embed ui/dist/app.js ui/dist/app.css
var dist embed.FS

func asset(name string) []byte {
	b, err := dist.ReadFile("ui/dist/" + name)
	if err != nil {
		panic("web: missing built asset " + name + " (run npm run build in internal/web/ui)")
	}
	return b
}

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

func (s *Server) index(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/" {
		httpError(w, http.StatusNotFound, errNotFound(r.URL.Path))
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	writePage(w, pageData{Title: "ptscope"})
}

func (s *Server) asset(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimPrefix(r.URL.Path, "/ui/")
	switch name {
	case "app.js":
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
	case "app.css":
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
	default:
		httpError(w, http.StatusNotFound, errNotFound(r.URL.Path))
		return
	}
	w.Header().Set("Cache-Control", "no-cache")
	w.Write(asset(name))
}

type errNotFound string

func (e errNotFound) Error() string { return "no such page " + string(e) }
