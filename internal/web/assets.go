package web

import (
	"net/http"
	"strings"

	"github.com/ptscope/ptscope/internal/web/ui"
	"github.com/ptscope/ptscope/internal/web/view"
)

func (s *Server) index(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/" {
		httpError(w, http.StatusNotFound, errNotFound(r.URL.Path))
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	view.WriteServedPage(w)
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
	w.Write(ui.Asset(name))
}

type errNotFound string

func (e errNotFound) Error() string { return "no such page " + string(e) }
