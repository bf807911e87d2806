// Package web is `ptscope serve`'s HTTP server: it routes every view of
// internal/web/view (the inputs, the views computed from them and the
// comparison of two, none of which needs HTTP), serves the page and its
// assets (internal/web/ui), gzips the answers, and guards every request
// (guard.go). The --html writer is view.WriteHTML: the same page with the
// data of a few levels of detail inlined, one offline file. The page lives
// in ui/ (plain JavaScript, Canvas2D), built by esbuild into ui/dist, which
// is committed so that `go build` needs no Node.
package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/ptscope/ptscope/internal/input"
	"github.com/ptscope/ptscope/internal/memory"
	"github.com/ptscope/ptscope/internal/web/view"
)

// Options configure a server.
type Options struct {
	Roots []string // files and folders to serve (folders are rescanned)
	// Rescan is how often folders are searched for new files (0: never).
	Rescan time.Duration
	Memory memory.Options
	// AfterRead, when set, runs after each snapshot is decoded and before it
	// is analysed (the CLI collects the decoder's garbage there).
	AfterRead func()
	// Log receives one line per failed request and per scan error (nil: none).
	Log io.Writer
	// Source finds and opens the inputs, within its memory budget (nil:
	// the default Source). The budget is the whole server's (guard.go).
	Source *input.Source
	// AllowHosts are Host names answered besides loopback ones (and, when
	// not local, IP address literals): --allow-host.
	AllowHosts []string
	// Slots is how many views are computed at once (0: GOMAXPROCS, at
	// least 2).
	Slots int
}

// Server serves the inputs under Options.Roots.
type Server struct {
	opts   Options
	set    *view.Set
	mux    *http.ServeMux
	logger *log.Logger
}

// New finds the inputs (an error when there are none) and starts loading
// them in the background when Start is called.
func New(opts Options) (*Server, error) {
	s := &Server{opts: opts, mux: http.NewServeMux(),
		set: view.NewSet(view.SetOptions{Memory: opts.Memory, AfterRead: opts.AfterRead, Source: opts.Source})}
	if opts.Log != nil {
		s.logger = log.New(opts.Log, "ptscope serve: ", 0)
	}
	if err := s.set.Scan(opts.Roots, true); err != nil {
		return nil, err
	}
	if len(s.set.List()) == 0 && !(opts.Rescan > 0 && anyDir(opts.Roots)) {
		return nil, fmt.Errorf("no snapshots or traces found in %s", strings.Join(opts.Roots, ", "))
	}
	s.routes()
	return s, nil
}

// anyDir reports whether a root is a folder (a capture may still fill it).
func anyDir(roots []string) bool {
	for _, r := range roots {
		if st, err := os.Stat(r); err == nil && st.IsDir() {
			return true
		}
	}
	return false
}

// Start loads the inputs and rescans the folders until ctx ends.
func (s *Server) Start(ctx context.Context) {
	go s.set.Load(ctx)
	if s.opts.Rescan <= 0 {
		return
	}
	go func() {
		t := time.NewTicker(s.opts.Rescan)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if err := s.set.Scan(s.opts.Roots, false); err != nil {
					s.logf("rescan: %v", err)
				}
			}
		}
	}()
}

func (s *Server) logf(format string, a ...any) {
	if s.logger != nil {
		s.logger.Printf(format, a...)
	}
}

// Handler is the server's HTTP handler: every request recovers from a
// panic (a 500 with one line) and passes the guard (guard.go): the Host
// check (only loopback names when local is set, so that a page on another
// site cannot reach the server by DNS rebinding), cross-site requests,
// security headers, error bodies, and the limits on work and memory.
func (s *Server) Handler(local bool) http.Handler {
	slots := s.opts.Slots
	if slots <= 0 {
		slots = runtime.GOMAXPROCS(0)
	}
	g := newGuard(local, s.opts.AllowHosts, s.set.Budget(), slots)
	return g.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if p := recover(); p != nil {
				s.logf("%s %s: internal error: %v\n%s", r.Method, r.URL, p, debug.Stack())
				httpError(w, http.StatusInternalServerError, fmt.Errorf("internal error: %v (please report it)", p))
			}
		}()
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			httpError(w, http.StatusMethodNotAllowed, errors.New("only GET is served"))
			return
		}
		s.mux.ServeHTTP(w, r)
	}))
}

// Serve answers requests on ln with Handler(local) until ctx ends (then it
// returns nil): `ptscope serve`'s server, which cmd/ptscope hands the CLI.
func (s *Server) Serve(ctx context.Context, ln net.Listener, local bool) error {
	srv := &http.Server{Handler: s.Handler(local), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// loopbackHost reports whether a Host header names this machine's loopback.
func loopbackHost(host string) bool {
	h, _, err := net.SplitHostPort(host)
	if err != nil {
		h = host
	}
	h = strings.Trim(h, "[]")
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

func httpError(w http.ResponseWriter, status int, err error) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
}

// api wraps a handler that returns a value (JSON), raw bytes, or an error.
// Bodies of 1 KB or more are gzipped for clients that accept it (browsers
// do); the Server-Timing header's app duration covers the answer, its
// encoding and compression.
func (s *Server) api(f func(r *http.Request) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		timing := func() {
			w.Header().Set("Server-Timing", fmt.Sprintf("app;dur=%.3f", float64(time.Since(start).Microseconds())/1000))
		}
		v, err := f(r)
		var body []byte
		ctype := "application/octet-stream"
		if err == nil {
			if b, ok := v.(view.RawBody); ok {
				body = b
			} else if body, err = json.Marshal(v); err == nil {
				body = append(body, '\n')
				ctype = "application/json"
			}
		}
		if err != nil {
			timing()
			var ve *view.Error
			if errors.As(err, &ve) {
				httpError(w, ve.Status, ve.Err)
				return
			}
			httpError(w, http.StatusInternalServerError, err)
			return
		}
		w.Header().Set("Vary", "Accept-Encoding")
		if len(body) >= 1024 && acceptsGzip(r) {
			body = view.Gzip(body)
			w.Header().Set("Content-Encoding", "gzip")
		}
		timing()
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Content-Type", ctype)
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.Write(body)
	}
}

// acceptsGzip reports whether the request's Accept-Encoding takes gzip
// (and does not refuse it with q=0).
func acceptsGzip(r *http.Request) bool {
	for _, h := range r.Header.Values("Accept-Encoding") {
		for _, part := range strings.Split(h, ",") {
			name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
			if !strings.EqualFold(strings.TrimSpace(name), "gzip") {
				continue
			}
			if q, ok := strings.CutPrefix(strings.ReplaceAll(params, " ", ""), "q="); ok {
				if f, err := strconv.ParseFloat(q, 64); err == nil && f == 0 {
					return false
				}
			}
			return true
		}
	}
	return false
}

func (s *Server) routes() {
	s.mux.HandleFunc("/", s.index)
	s.mux.HandleFunc("/ui/", s.asset)
	s.mux.HandleFunc("/api/v1/inputs", s.api(func(r *http.Request) (any, error) {
		return map[string]any{"inputs": s.set.List()}, nil
	}))
	for _, name := range view.Paths() {
		s.mux.HandleFunc("/api/v1/"+name, s.api(func(r *http.Request) (any, error) {
			return s.set.Answer(name, r.URL.Query())
		}))
	}
	s.mux.HandleFunc("/api/v1/diff", s.api(func(r *http.Request) (any, error) {
		return s.set.Diff(r.URL.Query())
	}))
	s.mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		httpError(w, http.StatusNotFound, fmt.Errorf("no such endpoint %s", r.URL.Path))
	})
}
