package web

import (
	"embed"
	"html/template"
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

// page is the one HTML page. Served, it loads ui/app.js and ui/app.css;
// written by --html, it carries them and the data inline, as JSON text
// that the page parses with JSON.parse (much faster than the same data as
// a script's object literal; json.Marshal escapes <, > and &, so the text
// cannot end the element).
var page = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
{{if .Inline}}<style>{{.CSS}}</style>{{else}}<link rel="stylesheet" href="/ui/app.css">{{end}}
</head><body><div id="app"></div>
{{if .Inline}}<script type="application/json" id="ptscope-data">{{.Data}}</script>
<script>{{.JS}}</script>{{else}}<script src="/ui/app.js"></script>{{end}}
</body></html>
`))

type pageData struct {
	Title  string
	Inline bool
	CSS    template.CSS
	JS     template.JS
	Data   template.JS
}

func (s *Server) index(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/" {
		httpError(w, http.StatusNotFound, errNotFound(r.URL.Path))
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	page.Execute(w, pageData{Title: "ptscope"})
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
