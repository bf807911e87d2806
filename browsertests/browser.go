// Package browsertests drives ptscope's page (serve and --html files) in a
// headless Chromium with chromedp. It is a module of its own so that the
// browser driver stays out of the ptscope binary's dependencies (as
// pprof's browser tests do). The tests run the real binary, built from the
// repository above, on the repository's committed inputs; cmd/shoot takes
// screenshots with the same helpers (scripts/screenshots.sh).
package browsertests

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/chromedp/cdproto/network"
	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// Repo is the ptscope repository this module sits in.
func Repo() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(file))
}

// Testdata is a path under the repository's testdata.
func Testdata(parts ...string) string {
	return filepath.Join(append([]string{Repo(), "testdata"}, parts...)...)
}

// Build builds the ptscope binary into dir.
func Build(dir string) (string, error) {
	bin := filepath.Join(dir, "ptscope")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/ptscope")
	cmd.Dir = Repo()
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v: %s", err, out)
	}
	return bin, nil
}

// Chromium finds a headless Chromium: PTSCOPE_CHROMIUM, else the Debian
// packages' names; "" when none is installed.
func Chromium() string {
	if p := os.Getenv("PTSCOPE_CHROMIUM"); p != "" {
		return p
	}
	for _, n := range []string{"chromium-headless-shell", "chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	return ""
}

// Server is a running `ptscope serve`.
type Server struct {
	URL  string
	cmd  *exec.Cmd
	done chan struct{}
}

// Serve starts `bin serve --addr 127.0.0.1:0 args...` and waits until every
// input has loaded (or failed).
func Serve(bin string, args ...string) (*Server, error) {
	cmd := exec.Command(bin, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &Server{cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); close(s.done) }()
	lines := bufio.NewScanner(stderr)
	for lines.Scan() {
		if u, ok := strings.CutPrefix(lines.Text(), "ptscope serve: "); ok {
			s.URL = strings.TrimSuffix(strings.Fields(u)[0], "/")
			break
		}
	}
	go io.Copy(io.Discard, stderr)
	if s.URL == "" {
		s.Stop()
		return nil, fmt.Errorf("serve %v printed no address", args)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var list struct {
			Inputs []struct{ Status string }
		}
		if err := getJSON(s.URL+"/api/v1/inputs", &list); err != nil {
			s.Stop()
			return nil, err
		}
		busy := false
		for _, in := range list.Inputs {
			busy = busy || in.Status == "queued" || in.Status == "loading"
		}
		if !busy && len(list.Inputs) > 0 {
			return s, nil
		}
		if time.Now().After(deadline) {
			s.Stop()
			return nil, fmt.Errorf("serve %v: inputs did not load", args)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func getJSON(u string, v any) error {
	resp, err := http.Get(u)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(v)
}

// Stop ends the server.
func (s *Server) Stop() {
	if s.cmd.Process != nil {
		s.cmd.Process.Kill()
		<-s.done
	}
}

// Browser is one headless page of a given window size that records every
// request, uncaught exception and console error.
type Browser struct {
	Ctx    context.Context
	cancel []context.CancelFunc
	mu     sync.Mutex
	urls   []string
	errors []string
}

// NewBrowser starts Chromium with a window of w x h CSS pixels.
func NewBrowser(w, h int) (*Browser, error) {
	exe := Chromium()
	if exe == "" {
		return nil, fmt.Errorf("no Chromium installed (apt-get install chromium-headless-shell, or set PTSCOPE_CHROMIUM)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.NoSandbox,
		chromedp.WindowSize(w, h), chromedp.Flag("disable-dev-shm-usage", true), chromedp.Flag("hide-scrollbars", false))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	b := &Browser{}
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithListener(func(ev any) {
		b.mu.Lock()
		defer b.mu.Unlock()
		switch e := ev.(type) {
		case *network.EventRequestWillBeSent:
			b.urls = append(b.urls, e.Request.URL)
		case *cdpruntime.EventExceptionThrown:
			d := e.ExceptionDetails
			msg := d.Text
			if d.Exception != nil {
				msg += " " + d.Exception.Description
			}
			b.errors = append(b.errors, msg)
		case *cdpruntime.EventConsoleAPICalled:
			if e.Type == cdpruntime.ConsoleAPICalledTypeError || e.Type == cdpruntime.ConsoleAPICalledTypeAssert {
				var parts []string
				for _, a := range e.Args {
					parts = append(parts, string(a.Value)+a.Description)
				}
				b.errors = append(b.errors, "console: "+strings.Join(parts, " "))
			}
		}
	}))
	tctx, cancelT := context.WithTimeout(ctx, 10*time.Minute)
	b.Ctx, b.cancel = tctx, []context.CancelFunc{cancelT, cancel, cancelA}
	if err := chromedp.Do(b.Ctx, chromedp.EmulateViewport(int64(w), int64(h)), chromedp.Navigate("about:blank")); err != nil {
		b.Close()
		return nil, fmt.Errorf("starting %s: %v", exe, err)
	}
	return b, nil
}

// Close ends the browser.
func (b *Browser) Close() {
	for _, c := range b.cancel {
		c()
	}
}

// Requests returns and forgets the URLs requested so far.
func (b *Browser) Requests() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	u := b.urls
	b.urls = nil
	return u
}

// Errors returns and forgets the page's errors so far.
func (b *Browser) Errors() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.errors
	b.errors = nil
	return e
}

// Open navigates to u.
func (b *Browser) Open(u string) error {
	return chromedp.Do(b.Ctx, chromedp.Navigate(u))
}

// Resize sets the viewport to w x h CSS pixels.
func (b *Browser) Resize(w, h int) error {
	return chromedp.Do(b.Ctx, chromedp.EmulateViewport(int64(w), int64(h)))
}

// Ready waits until the element with data-testid id says data-state="ready".
func (b *Browser) Ready(id string, timeout time.Duration) error {
	expr := fmt.Sprintf(`(() => { const e = document.querySelector('[data-testid=%q]'); return !!e && e.dataset.state === 'ready'; })()`, id)
	if err := b.poll(expr, timeout); err != nil {
		page, _ := Eval[string](b, `document.body ? document.body.innerText.slice(0, 400) : ''`)
		return fmt.Errorf("%s never ready: %v (page: %s)", id, err, page)
	}
	return nil
}

// Until waits until expr is true.
func (b *Browser) Until(expr string, timeout time.Duration) error {
	return b.poll(expr, timeout)
}

// poll waits until expr is true. A poll that starts while the page's
// execution context is being replaced (a navigation just committed) fails
// with "Cannot find context": it is asked again on the new context.
func (b *Browser) poll(expr string, timeout time.Duration) error {
	end := time.Now().Add(timeout)
	for {
		_, err := chromedp.Run(b.Ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(time.Until(end))))
		if err == nil || !strings.Contains(err.Error(), "Cannot find context") || time.Now().After(end) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Eval evaluates expr (awaiting a promise) and returns its value.
func Eval[T any](b *Browser, expr string) (T, error) {
	return chromedp.Run(b.Ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
}

// Click clicks at page position (x, y).
func (b *Browser) Click(x, y float64) error {
	return chromedp.Do(b.Ctx, chromedp.MouseClickXY(x, y))
}

// Screenshot writes the viewport as a PNG.
func (b *Browser) Screenshot(path string) error {
	png, err := chromedp.Run(b.Ctx, chromedp.CaptureScreenshot())
	if err != nil {
		return err
	}
	return os.WriteFile(path, png, 0o644)
}
