// Package view is the data of ptscope's browser page, without HTTP: the
// inputs a server shows (found, loaded and analysed in the background:
// inputs.go), the views computed from them (one function per API path,
// the table in views.go), the comparison of two inputs (diffapi.go), and
// the --html writer, which records the views' answers into one offline
// page (html.go). internal/web serves the same views over HTTP, routing
// every entry of the table; the page's script and styles are
// internal/web/ui. This package imports neither net/http nor anything that
// does, so that the CLI (--html) compiles without it and the server's
// package is all that waits for net/http.
package view

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"sync"

	"github.com/klauspost/compress/gzip"

	"github.com/ptscope/ptscope/internal/input"
	"github.com/ptscope/ptscope/internal/memory"
)

// SetOptions configure a Set.
type SetOptions struct {
	Memory memory.Options
	// AfterRead, when set, runs after each snapshot is decoded and before it
	// is analysed (the CLI collects the decoder's garbage there).
	AfterRead func()
	// Source finds and opens the inputs, within its memory budget (nil:
	// the default Source).
	Source *input.Source
}

// Set is the inputs a server shows, numbered in the order found, and the
// answers of their views; safe for concurrent use.
type Set struct {
	inputs *inputs
	diffs  diffCache
	seen   map[string]int64 // the size of each file found in a folder (scan)
}

// NewSet makes an empty set: Scan finds its inputs, Load loads them.
func NewSet(o SetOptions) *Set {
	in := newInputs()
	in.opts = o.Memory
	in.afterRead = o.AfterRead
	in.src = input.Or(o.Source)
	return &Set{inputs: in, seen: map[string]int64{}}
}

// Scan finds the inputs under roots and queues them for loading. The
// initial scan reads every root, later ones search the folders only
// (inputs.scan says how); the error is that no root could be read.
func (s *Set) Scan(roots []string, initial bool) error {
	return s.inputs.scan(roots, s.seen, initial)
}

// Load loads the queued inputs until ctx ends.
func (s *Set) Load(ctx context.Context) { s.inputs.loadLoop(ctx) }

// List copies the public fields of every input (the input list the page
// asks for).
func (s *Set) List() []Input { return s.inputs.snapshot() }

// Loading reports whether an input is queued or being loaded.
func (s *Set) Loading() bool { return s.inputs.busy() }

// Budget is the memory budget of the set's Source (bytes).
func (s *Set) Budget() int64 { return s.inputs.src.Budget() }

// Paths lists the views by name, their API paths under /api/v1/, in a
// stable order: the server routes each.
func Paths() []string { return viewNames() }

// Answer computes view name's answer to the query q: for the input named
// by "input" (0 by default), once loaded and of the view's kind. The
// answer is JSON's to encode, or RawBody.
func (s *Set) Answer(name string, q url.Values) (any, error) {
	v, ok := views[name]
	if !ok {
		return nil, notFound("no view %s", name)
	}
	p := params(q)
	id, err := p.int("input", 0, false)
	if err != nil {
		return nil, err
	}
	it, err := s.readyID(id, v.kind)
	if err != nil {
		return nil, err
	}
	return v.build(it, p)
}

// Diff compares two inputs (diffapi.go): the answer of /api/v1/diff.
func (s *Set) Diff(q url.Values) (any, error) { return s.diffView(params(q)) }

// readyID returns input id once loaded; kind "" takes any kind.
func (s *Set) readyID(id int64, kind string) (*Input, error) {
	it, ok := s.inputs.get(int(id))
	if !ok {
		return nil, notFound("no input %d", id)
	}
	s.inputs.mu.RLock()
	status, msg, k := it.Status, it.Error, it.Kind
	s.inputs.mu.RUnlock()
	switch {
	case status == statusError:
		return nil, &Error{statusUnprocessableEntity, errors.New(msg)}
	case status != statusReady:
		return nil, &Error{statusServiceUnavailable, fmt.Errorf("input %d is %s", id, status)}
	case kind != "" && k != kind:
		return nil, badRequest("input %d is a %s, not a %s", id, k, kind)
	}
	return it, nil
}

// The HTTP statuses of the requests a view refuses (net/http's values,
// written here so that this package does without net/http).
const (
	statusBadRequest          = 400 // http.StatusBadRequest
	statusNotFound            = 404 // http.StatusNotFound
	statusUnprocessableEntity = 422 // http.StatusUnprocessableEntity
	statusServiceUnavailable  = 503 // http.StatusServiceUnavailable
)

// Error is a request a view refuses, with the HTTP status the server
// answers it with; other errors are the server's (500).
type Error struct {
	Status int
	Err    error
}

func (e *Error) Error() string { return e.Err.Error() }

func badRequest(format string, a ...any) error {
	return &Error{statusBadRequest, fmt.Errorf(format, a...)}
}

func notFound(format string, a ...any) error {
	return &Error{statusNotFound, fmt.Errorf(format, a...)}
}

// RawBody is an answer sent as it is, as application/octet-stream (the
// binary memory view).
type RawBody []byte

var gzipPool = sync.Pool{New: func() any {
	w, _ := gzip.NewWriterLevel(io.Discard, 5) // measured: a fifth of level 9's time for 10-20% more bytes
	return w
}}

// Gzip compresses b, as the server sends its answers and an --html file
// holds its binary ones.
func Gzip(b []byte) []byte {
	var out bytes.Buffer
	out.Grow(len(b)/4 + 64)
	w := gzipPool.Get().(*gzip.Writer)
	w.Reset(&out)
	w.Write(b)
	w.Close()
	gzipPool.Put(w)
	return out.Bytes()
}
