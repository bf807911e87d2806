package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/url"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The server's protections, around every request (Server.Handler): who
// may ask (the Host and the site the request comes from), what the answers
// carry (security headers; error bodies that never echo the request), and
// how much the server does at once (a few views computed at a time, at
// most a share of them for one input, none while the heap is over its
// budget). docs/security.md, "serve", says why each is there.

// Limits of the guard.
const (
	// maxViewPixels bounds a memory view's w*h (the page asks for its
	// canvas in device pixels: 8K by 4K at most); larger is refused.
	maxViewPixels = 8192 * 4096
	// maxQueued is how many requests may wait for a slot; more get 503 at
	// once.
	maxQueued = 64
	// slotWait is how long a request waits for a slot before a 503.
	slotWait = 2 * time.Second
	// maxErrorBytes bounds an error message (two file paths fit).
	maxErrorBytes = 512
	// minEcho is the shortest query value cut out of an error message:
	// shorter ones (an id, a breakdown name) make messages that say what
	// was asked and cannot be used to reflect content.
	minEcho = 24
	// memoryShare: views are refused while the live heap is above this
	// share of the budget (the models stay; answers need room of their own).
	memoryShare = 0.9
)

// securityHeaders go on every answer: no script, style or connection from
// elsewhere, no framing (clickjacking), no MIME sniffing of JSON or octet
// streams into something a browser would run, no referrer.
var securityHeaders = map[string]string{
	"Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; " +
		"connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
	"X-Content-Type-Options":       "nosniff",
	"X-Frame-Options":              "DENY",
	"Referrer-Policy":              "no-referrer",
	"Cross-Origin-Resource-Policy": "same-origin",
	"Cross-Origin-Opener-Policy":   "same-origin",
}

// guard is the state of the protections.
type guard struct {
	local      bool     // serving loopback only
	allowHosts []string // Host names accepted besides loopback and IP literals (--allow-host)
	budget     int64    // the server's memory budget (bytes)

	slots    chan struct{} // views computed at once
	perInput int           // of them, the most for one input
	queued   chan struct{} // requests waiting for a slot
	wait     time.Duration // how long a request waits for a slot (slotWait)

	mu   sync.Mutex
	busy map[string]int // slots held per input (query "input", or "diff")
}

func newGuard(local bool, allowHosts []string, budget int64, slots int) *guard {
	slots = max(slots, 2)
	return &guard{local: local, allowHosts: allowHosts, budget: budget,
		slots: make(chan struct{}, slots), perInput: slots - 1, queued: make(chan struct{}, maxQueued),
		busy: map[string]int{}, wait: slotWait}
}

// wrap puts the protections around next.
func (g *guard) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for k, v := range securityHeaders {
			w.Header().Set(k, v)
		}
		if !g.hostAllowed(r.Host) {
			httpError(w, http.StatusForbidden, errors.New("this Host is not served (a page of another site reaching the server by DNS rebinding?); see --allow-host"))
			return
		}
		api := strings.HasPrefix(r.URL.Path, "/api/")
		if api && crossSite(r) {
			httpError(w, http.StatusForbidden, errors.New("cross-site request refused: the API answers the page of this server only"))
			return
		}
		if api && !g.viewSizeOK(r) {
			httpError(w, http.StatusBadRequest, errors.New("viewport too large: at most "+strconv.Itoa(maxViewPixels)+" pixels"))
			return
		}
		ew := &errorWriter{ResponseWriter: w, req: r}
		defer ew.finish()
		if !costly(r.URL.Path) {
			next.ServeHTTP(ew, r)
			return
		}
		if g.overBudget() {
			w.Header().Set("Retry-After", "2")
			httpError(w, http.StatusServiceUnavailable, errors.New("the server is over its memory budget (--max-memory); try again later"))
			return
		}
		release, ok := g.acquire(r)
		if !ok {
			w.Header().Set("Retry-After", "1")
			httpError(w, http.StatusServiceUnavailable, errors.New("the server is busy; try again"))
			return
		}
		defer release()
		next.ServeHTTP(ew, r)
	})
}

// Loading reports whether an input is queued or being loaded (serve
// collects garbage more eagerly once none is: the server then holds its
// models, and answers make only garbage).
func (s *Server) Loading() bool { return s.set.Loading() }

// costly reports whether answering path computes a view (the inputs list,
// the page and its assets are cheap).
func costly(path string) bool {
	return strings.HasPrefix(path, "/api/") && path != "/api/v1/inputs"
}

// hostAllowed: a loopback name or address always; with --allow-remote an
// IP address literal too (DNS rebinding needs a name) and the names
// --allow-host lists; those names alone otherwise.
func (g *guard) hostAllowed(host string) bool {
	if loopbackHost(host) {
		return true
	}
	h, _, err := net.SplitHostPort(host)
	if err != nil {
		h = host
	}
	h = strings.Trim(h, "[]")
	for _, a := range g.allowHosts {
		if strings.EqualFold(a, h) {
			return true
		}
	}
	return !g.local && net.ParseIP(h) != nil
}

// crossSite reports whether a request comes from a page of another site:
// its Sec-Fetch-Site (every current browser sends it) says so, or its
// Origin is not this server's. Requests without either (curl, scripts)
// are not a browser's, and are answered.
func crossSite(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin", "none":
	default:
		return true
	}
	o := r.Header.Get("Origin")
	if o == "" {
		return false
	}
	u, err := url.Parse(o)
	return err != nil || u.Host == "" || !strings.EqualFold(u.Host, r.Host)
}

// viewSizeOK bounds a memory view's pixels (each costs the view's work
// and memory).
func (g *guard) viewSizeOK(r *http.Request) bool {
	if r.URL.Path != "/api/v1/mem/view" {
		return true
	}
	q := r.URL.Query()
	w, errW := strconv.ParseInt(q.Get("w"), 10, 64)
	h, errH := strconv.ParseInt(q.Get("h"), 10, 64)
	if errW != nil || errH != nil || w <= 0 || h <= 0 {
		return true // the view's own checks answer
	}
	return w <= maxViewPixels/h
}

// overBudget reports whether the live heap (as the last collection
// measured it) is above memoryShare of the budget.
func (g *guard) overBudget() bool {
	if g.budget <= 0 {
		return false
	}
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return float64(s[0].Value.Uint64()) > memoryShare*float64(g.budget)
}

// acquire takes a slot for r: at most perInput of them for one input, so
// that the views of a slow input never hold every slot; it waits up to
// slotWait, and gives up at once when maxQueued requests already wait.
func (g *guard) acquire(r *http.Request) (release func(), ok bool) {
	key := inputKey(r)
	select {
	case g.queued <- struct{}{}:
	default:
		return nil, false
	}
	defer func() { <-g.queued }()
	deadline := time.NewTimer(g.wait)
	defer deadline.Stop()
	for {
		g.mu.Lock()
		if g.busy[key] < g.perInput {
			select {
			case g.slots <- struct{}{}:
				g.busy[key]++
				g.mu.Unlock()
				return func() {
					g.mu.Lock()
					g.busy[key]--
					g.mu.Unlock()
					<-g.slots
				}, true
			default:
			}
		}
		g.mu.Unlock()
		select {
		case <-deadline.C:
			return nil, false
		case <-r.Context().Done():
			return nil, false
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// inputKey names the input a request's view reads, as the handler reads
// it (params.int, default 0): "0", "00", "+0" and no input are one input,
// so none of them gets more than perInput slots. A value the handler would
// refuse is its own key (it is answered 400 at once); diff views share one.
func inputKey(r *http.Request) string {
	if strings.HasPrefix(r.URL.Path, "/api/v1/diff") {
		return "diff"
	}
	v := r.URL.Query().Get("input")
	if v == "" {
		return "0"
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		return strconv.FormatInt(n, 10)
	}
	return "bad"
}

// errorWriter passes answers through, but holds an error answer (status
// 400 or above) back and rewrites its message so that it does not echo
// the request: the Host, the raw query and every query value of minEcho
// bytes or more are cut out, and the message is cut to maxErrorBytes (an
// error once echoed a 921 KB query).
type errorWriter struct {
	http.ResponseWriter
	req    *http.Request
	status int
	held   bytes.Buffer
}

func (e *errorWriter) WriteHeader(status int) {
	e.status = status
	if status < 400 {
		e.ResponseWriter.WriteHeader(status)
	}
}

func (e *errorWriter) Write(b []byte) (int, error) {
	if e.status < 400 {
		if e.status == 0 {
			e.status = http.StatusOK
		}
		return e.ResponseWriter.Write(b)
	}
	if e.held.Len() < 64<<10 {
		e.held.Write(b[:min(len(b), 64<<10-e.held.Len())])
	}
	return len(b), nil
}

// finish sends a held error answer, rewritten.
func (e *errorWriter) finish() {
	if e.status < 400 {
		return
	}
	var body struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(e.held.Bytes(), &body) != nil || body.Error == "" {
		body.Error = http.StatusText(e.status)
	}
	msg := redact(body.Error, e.req)
	h := e.ResponseWriter.Header()
	h.Del("Content-Length")
	h.Set("Content-Type", "application/json")
	e.ResponseWriter.WriteHeader(e.status)
	json.NewEncoder(e.ResponseWriter).Encode(map[string]string{"error": msg})
}

// redact cuts what came from r out of msg, and msg to maxErrorBytes.
func redact(msg string, r *http.Request) string {
	echoes := []string{r.Host, r.URL.RawQuery, r.URL.Path}
	for _, vs := range r.URL.Query() {
		echoes = append(echoes, vs...)
	}
	for _, s := range echoes {
		if len(s) < minEcho {
			continue
		}
		for _, form := range []string{s, strconv.Quote(s), strings.Trim(strconv.Quote(s), `"`)} {
			msg = strings.ReplaceAll(msg, form, "…")
		}
	}
	if len(msg) > maxErrorBytes {
		cut := maxErrorBytes
		for cut > 0 && msg[cut]&0xc0 == 0x80 {
			cut--
		}
		msg = msg[:cut] + "…"
	}
	return msg
}
