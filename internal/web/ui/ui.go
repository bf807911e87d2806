// Package ui holds the browser page's built script and styles (dist/,
// made from src/ by esbuild and committed, so that `go build` needs no
// Node), embedded once for both the server (internal/web) and the --html
// writer (internal/web/view). It imports neither net/http nor anything
// that does.
package ui

import "embed"

//go:embed dist/app.js dist/app.css
var dist embed.FS

// Asset returns a built asset: "app.js" or "app.css".
func Asset(name string) []byte {
	b, err := dist.ReadFile("dist/" + name)
	if err != nil {
		panic("web: missing built asset " + name + " (run npm run build in internal/web/ui)")
	}
	return b
}
