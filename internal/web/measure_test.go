//go:build measure

package web

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/ptscope/ptscope/internal/load"
)

// TestMeasure measures the goals of docs/serve.md on large inputs, in a
// real headless Chromium: PTSCOPE_MEASURE_SNAPSHOT (a 1M-entry snapshot)
// and PTSCOPE_MEASURE_TRACE (a ~350 MB trace); scripts/bench_serve.sh
// makes both and runs it. It asserts nothing about time (the numbers go to
// docs/validation.md). Built only with -tags measure (it needs those
// variables and takes a minute).
func TestMeasure(t *testing.T) {
	snap := os.Getenv("PTSCOPE_MEASURE_SNAPSHOT")
	if snap == "" {
		t.Skip("set PTSCOPE_MEASURE_SNAPSHOT (and PTSCOPE_MEASURE_TRACE): scripts/bench_serve.sh")
	}
	trace := os.Getenv("PTSCOPE_MEASURE_TRACE")
	roots := []string{snap}
	if trace != "" {
		roots = append(roots, trace)
	}
	start := time.Now()
	s, err := New(Options{Roots: roots})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	s.Start(ctx)
	ts := httptest.NewServer(s.Handler(true))
	defer ts.Close()
	waitLoaded := func(id int) time.Duration {
		for {
			it, _ := s.inputs.get(id)
			s.inputs.mu.RLock()
			st, msg := it.Status, it.Error
			s.inputs.mu.RUnlock()
			if st == statusError {
				t.Fatal(msg)
			}
			if st == statusReady {
				return time.Since(start)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	report := func(name string, v any) { fmt.Printf("%-58s %v\n", name, v) }
	report("snapshot ready after server start", waitLoaded(0).Round(time.Millisecond))
	if trace != "" {
		// measure the views with nothing loading beside them
		report("trace ready after server start", waitLoaded(1).Round(time.Millisecond))
	}

	b := newBrowser(t)
	var cancel context.CancelFunc
	b.ctx, cancel = context.WithTimeout(b.ctx, 10*time.Minute)
	defer cancel()
	b.open(t, ts.URL+"/?input=0")
	b.ready(t, "memory-timeline")
	report("memory timeline drawn after navigation (ms)", eval[float64](t, b, `window.__ptscope.timings.memoryTimeline`))
	report("first view: blocks drawn / KB", eval[string](t, b, `window.__ptscope.lastView.blocks + ' / ' + (window.__ptscope.lastView.bytes/1024).toFixed(1)`))
	// zoom in ten times around the middle, then pan
	for i := 0; i < 10; i++ {
		n := eval[int](t, b, `window.__ptscope.memory.requests`)
		eval[bool](t, b, `(() => { const c = document.querySelector('[data-testid=memory-timeline] canvas'), r = c.getBoundingClientRect();
		  c.dispatchEvent(new WheelEvent('wheel', {deltaY: -100, clientX: r.left + r.width * 0.55, clientY: r.top + 100, bubbles: true, cancelable: true})); return true; })()`)
		if _, err := chromedp.Run(b.ctx, chromedp.Poll[bool](fmt.Sprintf(`window.__ptscope.memory.requests > %d`, n), chromedp.WithPollingTimeout(30*time.Second))); err != nil {
			t.Fatal(err)
		}
	}
	// and in bytes (shift+wheel near the bottom), until blocks show on their own
	for i := 0; i < 6; i++ {
		n := eval[int](t, b, `window.__ptscope.memory.requests`)
		eval[bool](t, b, `(() => { const c = document.querySelector('[data-testid=memory-timeline] canvas'), r = c.getBoundingClientRect();
		  c.dispatchEvent(new WheelEvent('wheel', {deltaY: -100, shiftKey: true, clientX: r.left + r.width * 0.55, clientY: r.top + 300, bubbles: true, cancelable: true})); return true; })()`)
		if _, err := chromedp.Run(b.ctx, chromedp.Poll[bool](fmt.Sprintf(`window.__ptscope.memory.requests > %d`, n), chromedp.WithPollingTimeout(30*time.Second))); err != nil {
			t.Fatal(err)
		}
	}
	report("after zooming: entries shown / blocks drawn / KB", eval[string](t, b, `(window.__ptscope.lastView.x1 - window.__ptscope.lastView.x0) + ' / ' + window.__ptscope.lastView.blocks + ' / ' + (window.__ptscope.lastView.bytes/1024).toFixed(1)`))
	views := eval[[][]float64](t, b, `performance.getEntriesByType('resource').filter(e => e.name.includes('/api/v1/mem/view'))
	  .map(e => [(e.serverTiming.find(s => s.name === 'app') || {duration: -1}).duration, e.encodedBodySize, e.duration])`)
	var srv, kb, total []float64
	for k, v := range views {
		srv, kb, total = append(srv, v[0]), append(kb, v[1]/1024), append(total, v[2])
		report(fmt.Sprintf("  view %d: server ms / KB sent / request ms", k+1), fmt.Sprintf("%.1f / %.1f / %.1f", v[0], v[1]/1024, v[2]))
	}
	report("zoom/pan views: server ms median / max", fmt.Sprintf("%.1f / %.1f (%d views)", median(srv), maxf(srv), len(srv)))
	report("zoom/pan views: KB median / max", fmt.Sprintf("%.1f / %.1f", median(kb), maxf(kb)))
	report("zoom/pan views: request ms median / max", fmt.Sprintf("%.1f / %.1f", median(total), maxf(total)))
	report("JS heap after zooming (MB)", eval[float64](t, b, `performance.memory ? performance.memory.usedJSHeapSize / 1048576 : -1`))
	// click a drawn block, or (none drawn: every block under a pixel) the
	// band, which the server's hit test answers
	xy := eval[[]float64](t, b, `window.__ptscope.memory.data.blocks.length ? `+blockCenter+` : (() => {
	  const tl = window.__ptscope.memory, r = tl.canvas.getBoundingClientRect(), d = tl.data;
	  const c = Math.floor(d.cols / 2), x = tl.X(d.x0 + Math.floor(c * (d.x1 - d.x0) / d.cols)) + 1;
	  return [r.left + x, r.top + tl.Y(d.allocMin[c] * 0.5), -1]; })()`)
	eval[bool](t, b, `window.__clickAt = performance.now(); true`)
	if err := chromedp.Do(b.ctx, chromedp.MouseClickXY(xy[0], xy[1])); err != nil {
		t.Fatal(err)
	}
	b.ready(t, "block-details")
	report("click -> stack shown (ms)", eval[float64](t, b, `window.__ptscope.timings.blockDetails - window.__clickAt`))

	// allocator state at entries across the trace
	m := func() int { it, _ := s.inputs.get(0); return it.mem[0].tl.Len() }()
	var stateDraw, stateSrv []float64
	for _, e := range []int{m / 7, m / 3, m / 2, 2 * m / 3, m - 2} {
		b.open(t, fmt.Sprintf("%s/?input=0&view=state&event=%d", ts.URL, e))
		b.ready(t, "allocator-state")
		stateDraw = append(stateDraw, eval[float64](t, b, `window.__ptscope.timings.allocatorState`))
		stateSrv = append(stateSrv, eval[float64](t, b, `(performance.getEntriesByType('resource').find(e => e.name.includes('/api/v1/mem/state')).serverTiming.find(s => s.name === 'app') || {duration: -1}).duration`))
	}
	report("allocator state: server ms median / max", fmt.Sprintf("%.1f / %.1f", median(stateSrv), maxf(stateSrv)))
	report("allocator state: drawn after navigation ms median / max", fmt.Sprintf("%.0f / %.0f", median(stateDraw), maxf(stateDraw)))
	b.checkErrors(t)

	if trace != "" {
		for _, c := range []struct{ view, id string }{{"trace", "trace-overview"}, {"operators", "operator-table"}, {"kernels", "kernel-table"}} {
			t0 := time.Now()
			b.open(t, ts.URL+"/?input=1&view="+c.view)
			b.ready(t, c.id)
			report(c.id+" drawn after navigation (ms)", time.Since(t0).Milliseconds())
		}
		b.open(t, ts.URL+"/?input=1&view=trace")
		b.ready(t, "trace-timeline")
		report("trace timeline drawn after navigation (ms)", eval[float64](t, b, `performance.now()`))
	}

	// the --html file of the snapshot
	set, err := load.Snapshots(context.Background(), []string{snap}, load.SnapshotOptions{})
	if err != nil {
		t.Fatal(err)
	}
	page := filepath.Join(t.TempDir(), "snapshot.html")
	f, err := os.Create(page)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	if err := WriteHTML(f, "measure", []HTMLMemory{{Path: snap, Analysis: set.Inputs[0].Devices[0]}}, nil, HTMLOptions{}); err != nil {
		t.Fatal(err)
	}
	f.Close()
	st, _ := os.Stat(page)
	report("--html: write time", time.Since(t0).Round(time.Millisecond))
	report("--html: file size (MB)", fmt.Sprintf("%.2f", float64(st.Size())/1e6))
	b.requests()
	b.open(t, "file://"+page)
	b.ready(t, "memory-timeline")
	report("--html: memory timeline drawn after navigation (ms)", eval[float64](t, b, `window.__ptscope.timings.memoryTimeline`))
	report("--html: JS heap (MB)", eval[float64](t, b, `performance.memory ? performance.memory.usedJSHeapSize / 1048576 : -1`))
	for _, r := range b.requests() {
		if len(r) < 7 || r[:7] != "file://" {
			t.Errorf("the offline file requested %s", r)
		}
	}
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	c := append([]float64(nil), v...)
	sort.Float64s(c)
	return c[len(c)/2]
}

func maxf(v []float64) float64 {
	m := 0.0
	for _, x := range v {
		m = max(m, x)
	}
	return m
}
