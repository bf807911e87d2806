package web

import (
	"context"
	"fmt"
	"math"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/ptscope/ptscope/internal/load"
	"github.com/ptscope/ptscope/internal/testfixture"
)

// chromium finds a headless Chromium (PTSCOPE_CHROMIUM, else the Debian
// packages' names); the browser tests skip without one (.ci/run installs
// chromium-headless-shell).
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("PTSCOPE_CHROMIUM"); p != "" {
		return p
	}
	for _, n := range []string{"chromium-headless-shell", "chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	t.Skip("no Chromium installed (apt-get install chromium-headless-shell, or set PTSCOPE_CHROMIUM)")
	return ""
}

// browser is one headless page that records every request it makes and
// every uncaught exception.
type browser struct {
	ctx    context.Context
	mu     sync.Mutex
	urls   []string
	errors []string
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	exe := chromium(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.NoSandbox,
		chromedp.WindowSize(1400, 900), chromedp.Flag("disable-dev-shm-usage", true))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	b := &browser{}
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithListener(func(ev any) {
		b.mu.Lock()
		defer b.mu.Unlock()
		switch e := ev.(type) {
		case *network.EventRequestWillBeSent:
			b.urls = append(b.urls, e.Request.URL)
		case *runtime.EventExceptionThrown:
			d := e.ExceptionDetails
			msg := d.Text
			if d.Exception != nil {
				msg += " " + d.Exception.Description
			}
			b.errors = append(b.errors, msg)
		}
	}))
	t.Cleanup(func() { cancel(); cancelA() })
	tctx, cancelT := context.WithTimeout(ctx, 10*time.Minute)
	t.Cleanup(cancelT)
	b.ctx = tctx
	if err := chromedp.Do(b.ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("starting %s: %v", exe, err)
	}
	return b
}

// requests returns and forgets the URLs requested so far.
func (b *browser) requests() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	u := b.urls
	b.urls = nil
	return u
}

func (b *browser) checkErrors(t *testing.T) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.errors) > 0 {
		t.Fatalf("page errors: %s", strings.Join(b.errors, "; "))
	}
}

func (b *browser) open(t *testing.T, u string) {
	t.Helper()
	if err := chromedp.Do(b.ctx, chromedp.Navigate(u)); err != nil {
		t.Fatalf("%s: %v", u, err)
	}
}

// ready waits until the element with data-testid id says data-state="ready".
func (b *browser) ready(t *testing.T, id string) {
	t.Helper()
	expr := fmt.Sprintf(`(() => { const e = document.querySelector('[data-testid=%q]'); return e && e.dataset.state === 'ready'; })()`, id)
	if _, err := chromedp.Run(b.ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(30*time.Second))); err != nil {
		state, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.body.innerText.slice(0, 400)`))
		t.Fatalf("%s never ready: %v (page: %s)", id, err, state)
	}
}

func eval[T any](t *testing.T, b *browser, expr string) T {
	t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	return v
}

// inkedPixels counts the canvas pixels that are not background.
const inkedPixels = `(() => { const c = document.querySelector('[data-testid=memory-timeline] canvas');
  const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data; let n = 0;
  for (let i = 3; i < d.length; i += 4) if (d[i] > 0) n++; return n; })()`

// blockCenter is the page position of the middle of a drawn block (the
// widest of those whose middle is inside the plot), from the view the page
// holds, with the block's size as drawn, the entries its columns cover
// and its id (-1 in views without ids).
const blockCenter = `(() => { const tl = window.__ptscope.memory, d = tl.data, r = tl.canvas.getBoundingClientRect(); let best = null;
  const ce = (c) => d.x0 + Math.floor(c * (d.x1 - d.x0) / d.cols);
  for (const b of d.blocks) {
    const xa = Math.max(tl.X(ce(b.c0)), 64), xb = Math.min(tl.X(ce(b.c1)), tl.size().w);
    const x = (xa + xb) / 2, e = tl.vp.x0 + (x - 64) / tl.plotW() * (tl.vp.x1 - tl.vp.x0);
    let k = 0; for (let j = 0; j < b.cols.length; j++) if (ce(b.cols[j]) <= e) k = j;
    const yt = Math.max(tl.Y(b.offs[k] + b.size), 0), yb = Math.min(tl.Y(b.offs[k]), tl.plotH());
    if (yb - yt < 1 || xb - xa < 1) continue;
    if (!best || xb - xa > best.w) best = {w: xb - xa, x, y: (yt + yb) / 2, b};
  }
  return [r.left + best.x, r.top + best.y, best.b.size, ce(best.b.c0), ce(best.b.c1), best.b.id, d.minBytes / 16]; })()`

// checkClicked holds the block panel's block to the drawn block clicked
// (blockCenter's answer): its size as drawn (to a sixteenth of a pixel),
// alive over the drawn columns, and the same id where the view has ids.
func checkClicked(t *testing.T, b *browser, xy []float64) {
	t.Helper()
	got := eval[[]float64](t, b, `(() => { const b = window.__ptscope.block; return [b.id, b.size_bytes, b.alloc_event_index,
	  b.free_requested_event_index < 0 ? 1e15 : b.free_requested_event_index]; })()`)
	size, c0, c1, id, tol := xy[2], xy[3], xy[4], xy[5], xy[6]
	if id >= 0 && got[0] != id || math.Abs(got[1]-size) > tol+1 || got[2] >= c1 || got[3] <= c0 {
		t.Fatalf("clicked a block of %.0f B drawn over entries [%.0f, %.0f) (id %.0f); the panel shows block %.0f of %.0f B alive [%.0f, %.0f)",
			size, c0, c1, id, got[0], got[1], got[2], got[3])
	}
}

func TestBrowserServe(t *testing.T) {
	b := newBrowser(t)
	_, ts, _ := testServer(t)
	host := strings.TrimPrefix(ts.URL, "http://")

	// / opens the first snapshot's memory timeline
	b.open(t, ts.URL+"/")
	b.ready(t, "memory-timeline")
	if n := eval[int](t, b, inkedPixels); n < 10000 {
		t.Fatalf("the timeline canvas is nearly blank (%d pixels drawn)", n)
	}
	if n := eval[int](t, b, `+document.querySelector('[data-testid=memory-timeline]').dataset.blocks`); n == 0 {
		t.Fatal("no block drawn on its own")
	}
	// zoom: a wheel over the canvas narrows the range; the server answers in a few KB
	span0 := eval[int](t, b, `window.__ptscope.memory.vp.x1 - window.__ptscope.memory.vp.x0`)
	for i := 0; i < 6; i++ {
		eval[bool](t, b, `(() => { const c = document.querySelector('[data-testid=memory-timeline] canvas'), r = c.getBoundingClientRect();
		  c.dispatchEvent(new WheelEvent('wheel', {deltaY: -100, clientX: r.left + r.width / 2, clientY: r.top + 100, bubbles: true, cancelable: true})); return true; })()`)
	}
	if _, err := chromedp.Run(b.ctx, chromedp.Poll[bool](fmt.Sprintf(`window.__ptscope.lastView.x1 - window.__ptscope.lastView.x0 < %d`, span0/3),
		chromedp.WithPollingTimeout(20*time.Second))); err != nil {
		t.Fatalf("zoom did not narrow the view: %v", err)
	}
	if kb := eval[float64](t, b, `window.__ptscope.lastView.bytes / 1024`); kb > 64 {
		t.Errorf("a zoomed view took %.1f KB (goal 64)", kb)
	}
	// click a drawn block: the panel shows its stack with the user's frame
	xy := eval[[]float64](t, b, blockCenter)
	if err := chromedp.Do(b.ctx, chromedp.MouseClickXY(xy[0], xy[1])); err != nil {
		t.Fatal(err)
	}
	b.ready(t, "block-details")
	checkClicked(t, b, xy)
	if n := eval[int](t, b, `document.querySelectorAll('[data-testid=block-details] ol.stack li').length`); n == 0 {
		t.Fatal("the block panel shows no frames")
	}

	// allocator state at an entry
	b.open(t, ts.URL+"/?view=state&event=1234")
	b.ready(t, "allocator-state")
	if ev := eval[string](t, b, `document.querySelector('[data-testid=allocator-state]').dataset.event`); ev != "1234" {
		t.Fatalf("state view at entry %s, want 1234", ev)
	}
	if txt := eval[string](t, b, `document.querySelector('[data-testid=allocator-state]').innerText`); !strings.Contains(txt, "fragmentation") || !strings.Contains(txt, "segments") {
		t.Fatalf("state view: %.300s", txt)
	}

	// profiler views
	b.open(t, ts.URL+"/?view=trace")
	b.ready(t, "trace-overview")
	b.ready(t, "trace-timeline")
	b.open(t, ts.URL+"/?view=operators")
	b.ready(t, "operator-table")
	if n := eval[int](t, b, `document.querySelectorAll('[data-testid=operator-table] tbody tr').length`); n != 1 {
		t.Fatalf("operator table has %d rows, the trace has one operator", n)
	}
	b.open(t, ts.URL+"/?view=distributed")
	b.ready(t, "rank-table")
	b.open(t, ts.URL+"/?view=kernels")
	b.ready(t, "kernel-table")
	if txt := eval[string](t, b, `document.querySelector('[data-testid=kernel-table]').innerText`); !strings.Contains(txt, "sm90_gemm") {
		t.Fatalf("kernel table: %.300s", txt)
	}

	// the broken input shows its one-line error, in the page, by itself
	b.open(t, ts.URL+"/?input=2")
	if _, err := chromedp.Run(b.ctx, chromedp.Poll[bool](`!!document.querySelector('[data-testid=input-error]')`, chromedp.WithPollingTimeout(20*time.Second))); err != nil {
		t.Fatal("the broken input's error is not shown")
	}
	b.checkErrors(t)
	for _, u := range b.requests() {
		if pu, err := url.Parse(u); err != nil || (pu.Host != host && pu.Scheme != "about" && pu.Scheme != "data") {
			t.Errorf("request outside the server: %s", u)
		}
	}
}

func TestBrowserHTMLFile(t *testing.T) {
	b := newBrowser(t)
	dir := t.TempDir()
	src := filepath.Join(testRoot(t), "testdata", "snapshots", "validate_gpt2tiny_fp32.pickle.xz")
	set, err := load.Snapshots(context.Background(), []string{src}, load.SnapshotOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tracePath := filepath.Join(dir, "t.json")
	if err := os.WriteFile(tracePath, []byte(smallTrace), 0o644); err != nil {
		t.Fatal(err)
	}
	tset, err := load.Traces(context.Background(), []string{tracePath}, load.TraceOptions{KeepModels: true})
	if err != nil {
		t.Fatal(err)
	}
	page := filepath.Join(dir, "report.html")
	f, err := os.Create(page)
	if err != nil {
		t.Fatal(err)
	}
	err = WriteHTML(f, "test", []HTMLMemory{{Path: src, Analysis: set.Inputs[0].Devices[0]}},
		[]HTMLTrace{{Path: tracePath, Model: tset.Models[0], Result: &tset.Report.Ranks[0]}}, HTMLOptions{})
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	u := "file://" + page
	b.requests()
	b.open(t, u)
	b.ready(t, "memory-timeline")
	if n := eval[int](t, b, inkedPixels); n < 10000 {
		t.Fatalf("the offline timeline is nearly blank (%d pixels)", n)
	}
	xy := eval[[]float64](t, b, blockCenter)
	if err := chromedp.Do(b.ctx, chromedp.MouseClickXY(xy[0], xy[1])); err != nil {
		t.Fatal(err)
	}
	b.ready(t, "block-details")
	checkClicked(t, b, xy)
	if xy[5] < 0 {
		t.Fatal("the offline file's views carry no block ids")
	}
	if n := eval[int](t, b, `document.querySelectorAll('[data-testid=block-details] ol.stack li').length`); n == 0 {
		t.Fatal("the offline block panel shows no frames")
	}
	b.open(t, u+"?view=state")
	b.ready(t, "allocator-state")
	b.open(t, u+"?view=trace")
	b.ready(t, "trace-overview")
	b.ready(t, "trace-timeline")
	b.open(t, u+"?view=operators")
	b.ready(t, "operator-table")
	b.open(t, u+"?view=kernels")
	b.ready(t, "kernel-table")
	b.checkErrors(t)
	for _, r := range b.requests() {
		if !strings.HasPrefix(r, "file://") && !strings.HasPrefix(r, "data:") {
			t.Errorf("the offline file made a request: %s", r)
		}
	}
}

// TestBrowserWindowedSteps: a run recorded in stack windows lists every
// step, but only the peak view's own steps are in its trace; a click on
// another step leaves the timeline where it is and its row says why, a click
// on the view's step zooms to it (the real leak run: the view is step 18's
// window).
func TestBrowserWindowedSteps(t *testing.T) {
	b := newBrowser(t)
	dir := t.TempDir()
	if err := testfixture.ExtractBundle(filepath.Join(testfixture.Root(t), "testdata", "bundles", "windows", "leak.tar.xz"), dir); err != nil {
		t.Fatal(err)
	}
	_, ts := serveDir(t, dir)
	b.open(t, ts.URL+"/")
	b.ready(t, "memory-timeline")
	b.ready(t, "step-table")
	row := func(name string) string {
		return fmt.Sprintf(`[...document.querySelectorAll('[data-testid=step-table] tbody tr')].find((tr) => tr.cells[0].innerText === %q)`, name)
	}
	span := `(() => { const v = window.__ptscope.memory.vp; return [v.x0, v.x1]; })()`
	before := eval[[]float64](t, b, span)
	if flag := eval[string](t, b, row("step 0")+`.innerText`); !strings.Contains(flag, "no trace here") {
		t.Errorf("step 0's row: %q", flag)
	}
	eval[bool](t, b, row("step 0")+`.click() || true`)
	if got := eval[[]float64](t, b, span); got[0] != before[0] || got[1] != before[1] {
		t.Errorf("a step outside the view's trace moved the timeline from %v to %v", before, got)
	}
	if flag := eval[string](t, b, row("step 18")+`.innerText`); strings.Contains(flag, "no trace here") {
		t.Errorf("step 18's row: %q", flag)
	}
	eval[bool](t, b, row("step 18")+`.click() || true`)
	if _, err := chromedp.Run(b.ctx, chromedp.Poll[bool](`window.__ptscope.memory.vp.x1 - window.__ptscope.memory.vp.x0 < `+
		fmt.Sprint(before[1]-before[0]), chromedp.WithPollingTimeout(20*time.Second))); err != nil {
		t.Fatalf("a click on the view's step did not zoom: %v", err)
	}
	b.checkErrors(t)
}
