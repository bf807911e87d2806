// Package web is ptscope's browser front end: `ptscope serve` (a net/http
// server answering the views of internal/timeline from models kept in
// memory, with the page's assets embedded by go:embed) and the --html
// writer (the same page with the data of a few levels of detail inlined,
// one offline file). The page lives in ui/ (plain JavaScript, Canvas2D),
// built by esbuild into ui/dist, which is committed so that `go build`
// needs no Node.
package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/klauspost/compress/gzip"

	"github.com/ptscope/ptscope/internal/input"
	"github.com/ptscope/ptscope/internal/memory"
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
	diffs  diffCache
	opts   Options
	inputs *inputs
	mux    *http.ServeMux
	logger *log.Logger
	seen   map[string]int64
}

// New finds the inputs (an error when there are none) and starts loading
// them in the background when Start is called.
func New(opts Options) (*Server, error) {
	s := &Server{opts: opts, inputs: newInputs(), mux: http.NewServeMux(), seen: map[string]int64{}}
	s.inputs.opts = opts.Memory
	s.inputs.afterRead = opts.AfterRead
	s.inputs.src = input.Or(opts.Source)
	if opts.Log != nil {
		s.logger = log.New(opts.Log, "ptscope serve: ", 0)
	}
	if err := s.inputs.scan(opts.Roots, s.seen, true); err != nil {
		return nil, err
	}
	if len(s.inputs.snapshot()) == 0 && !(opts.Rescan > 0 && anyDir(opts.Roots)) {
		return nil, fmt.Errorf("no snapshots or traces found in %s", strings.Join(opts.Roots, ", "))
	}
	s.routes()
	return s, nil
}

// anyDir reports whether a root is a folder (a capture may still fill it).
func anyDir(roots []string) bool {
	for _, r := range roots {
		if isDir(r) {
			return true
		}
	}
	return false
}

// Start loads the inputs and rescans the folders until ctx ends.
func (s *Server) Start(ctx context.Context) {
	go s.inputs.loadLoop(ctx)
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
				if err := s.inputs.scan(s.opts.Roots, s.seen, false); err != nil {
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
	g := newGuard(local, s.opts.AllowHosts, s.inputs.src.Budget(), slots)
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

// IsLoopbackAddr reports whether a listen address binds loopback only.
func IsLoopbackAddr(addr string) bool {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	return h == "localhost" || (net.ParseIP(h) != nil && net.ParseIP(h).IsLoopback())
}

// apiError is a request the server refuses, with its status.
type apiError struct {
	status int
	err    error
}

func (e *apiError) Error() string { return e.err.Error() }

func badRequest(format string, a ...any) error {
	return &apiError{http.StatusBadRequest, fmt.Errorf(format, a...)}
}

func notFound(format string, a ...any) error {
	return &apiError{http.StatusNotFound, fmt.Errorf(format, a...)}
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
			if b, ok := v.(rawBody); ok {
				body = b
			} else if body, err = json.Marshal(v); err == nil {
				body = append(body, '\n')
				ctype = "application/json"
			}
		}
		if err != nil {
			timing()
			var ae *apiError
			if errors.As(err, &ae) {
				httpError(w, ae.status, ae.err)
				return
			}
			httpError(w, http.StatusInternalServerError, err)
			return
		}
		w.Header().Set("Vary", "Accept-Encoding")
		if len(body) >= 1024 && acceptsGzip(r) {
			body = gzipped(body)
			w.Header().Set("Content-Encoding", "gzip")
		}
		timing()
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Content-Type", ctype)
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.Write(body)
	}
}

// rawBody is a response body sent as application/octet-stream.
type rawBody []byte

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

var gzipPool = sync.Pool{New: func() any {
	w, _ := gzip.NewWriterLevel(io.Discard, 5) // measured: a fifth of level 9's time for 10-20% more bytes
	return w
}}

// gzipped compresses b.
func gzipped(b []byte) []byte {
	var out bytes.Buffer
	out.Grow(len(b)/4 + 64)
	w := gzipPool.Get().(*gzip.Writer)
	w.Reset(&out)
	w.Write(b)
	w.Close()
	gzipPool.Put(w)
	return out.Bytes()
}

func (s *Server) routes() {
	s.mux.HandleFunc("/", s.index)
	s.mux.HandleFunc("/ui/", s.asset)
	s.mux.HandleFunc("/api/v1/inputs", s.api(func(r *http.Request) (any, error) {
		return map[string]any{"inputs": s.inputs.snapshot()}, nil
	}))
	for _, name := range viewNames() {
		s.mux.HandleFunc("/api/v1/"+name, s.viewRoute(views[name]))
	}
	s.mux.HandleFunc("/api/v1/diff", s.api(s.diffView))
	s.mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		httpError(w, http.StatusNotFound, fmt.Errorf("no such endpoint %s", r.URL.Path))
	})
}

// readyID returns input id once loaded; kind "" takes any kind.
func (s *Server) readyID(id int64, kind string) (*Input, error) {
	it, ok := s.inputs.get(int(id))
	if !ok {
		return nil, notFound("no input %d", id)
	}
	s.inputs.mu.RLock()
	status, msg, k := it.Status, it.Error, it.Kind
	s.inputs.mu.RUnlock()
	switch {
	case status == statusError:
		return nil, &apiError{http.StatusUnprocessableEntity, errors.New(msg)}
	case status != statusReady:
		return nil, &apiError{http.StatusServiceUnavailable, fmt.Errorf("input %d is %s", id, status)}
	case kind != "" && k != kind:
		return nil, badRequest("input %d is a %s, not a %s", id, k, kind)
	}
	return it, nil
}
