package view

import (
	"bytes"
	"html/template"
	"testing"

	"github.com/ptscope/ptscope/internal/web/ui"
)

// The page as the html/template it replaced wrote it, to the byte: the
// served page, and the --html page with a title from a file name.
var pageTemplate = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
{{if .Inline}}<style>{{.CSS}}</style>{{else}}<link rel="stylesheet" href="/ui/app.css">{{end}}
</head><body><div id="app"></div>
{{if .Inline}}<script type="application/json" id="ptscope-data">{{.Data}}</script>
<script>{{.JS}}</script>{{else}}<script src="/ui/app.js"></script>{{end}}
</body></html>
`))

func TestPageAsTemplate(t *testing.T) {
	type tmplData struct {
		Title  string
		Inline bool
		CSS    template.CSS
		JS     template.JS
		Data   template.JS
	}
	css, js := ui.Asset("app.css"), ui.Asset("app.js")
	data := []byte(`{"inputs":[{"path":"a\u003cb\u0026c.pickle"}]}`)
	for _, title := range []string{"ptscope", "ptscope · run/rank0/snapshot_end.pickle",
		`<script>alert("x")</script> & 'quotes' + plus`, "nul\x00byte", "bad \xff utf-8 \xc3", "tab\tnew\nline\u202e"} {
		for _, inline := range []bool{false, true} {
			d := pageData{Title: title, Inline: inline}
			td := tmplData{Title: title, Inline: inline}
			if inline {
				d.CSS, d.JS, d.Data = css, js, data
				td.CSS, td.JS, td.Data = template.CSS(css), template.JS(js), template.JS(data)
			}
			var got, want bytes.Buffer
			if err := writePage(&got, d); err != nil {
				t.Fatal(err)
			}
			if err := pageTemplate.Execute(&want, td); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Bytes(), want.Bytes()) {
				g, w := got.String(), want.String()
				i := 0
				for i < len(g) && i < len(w) && g[i] == w[i] {
					i++
				}
				t.Errorf("title %q inline %v: differs at byte %d: %q vs template %q", title, inline, i, g[max(i-20, 0):min(i+40, len(g))], w[max(i-20, 0):min(i+40, len(w))])
			}
		}
	}
}
