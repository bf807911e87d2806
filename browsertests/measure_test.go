package browsertests

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"
	"time"
)

// TestMeasure measures the goals of docs/serve.md on large inputs in a
// real headless Chromium at 1280 x 800: PTSCOPE_MEASURE_SNAPSHOT (a
// 1M-entry snapshot) and PTSCOPE_MEASURE_TRACE (a ~350 MB trace);
// scripts/bench_serve.sh makes both and runs it. It asserts nothing about
// time (the numbers go to docs/serve.md and docs/validation.md).
func TestMeasure(t *testing.T) {
	snap := os.Getenv("PTSCOPE_MEASURE_SNAPSHOT")
	if snap == "" {
		t.Skip("set PTSCOPE_MEASURE_SNAPSHOT (and PTSCOPE_MEASURE_TRACE): scripts/bench_serve.sh")
	}
	trace := os.Getenv("PTSCOPE_MEASURE_TRACE")
	report := func(name string, v any) { fmt.Printf("%-60s %v\n", name, v) }
	args := []string{snap}
	if trace != "" {
		args = append(args, trace)
	}
	start := time.Now()
	s := serve(t, args...)
	report("inputs ready after server start", time.Since(start).Round(time.Millisecond))
	var sum struct {
		Entries int `json:"entries"`
	}
	if resp, err := http.Get(s.URL + "/api/v1/mem/summary?input=0"); err != nil || json.NewDecoder(resp.Body).Decode(&sum) != nil {
		t.Fatalf("summary: %v", err)
	}

	b := browser(t)
	open(t, b, s.URL+"/?input=0", "memory-timeline")
	report("memory timeline drawn after navigation (ms)", eval[float64](t, b, `window.__ptscope.timings.memoryTimeline`))
	report("first view: blocks drawn / KB", eval[string](t, b, `window.__ptscope.lastView.blocks + ' / ' + (window.__ptscope.lastView.bytes/1024).toFixed(1)`))
	report("JS heap after the first view (MB)", fmt.Sprintf("%.1f", eval[float64](t, b, `performance.memory ? performance.memory.usedJSHeapSize / 1048576 : -1`)))
	// zoom in ten times around the middle
	for i := 0; i < 10; i++ {
		n := eval[string](t, b, `JSON.stringify(window.__ptscope.lastView)`)
		eval[bool](t, b, `(() => { const c = window.__ptscope.memory.canvas, r = c.getBoundingClientRect();
		  c.dispatchEvent(new WheelEvent('wheel', {deltaY: -100, clientX: r.left + r.width * 0.55, clientY: r.top + 100, bubbles: true, cancelable: true})); return true; })()`)
		until(t, b, "zoom", fmt.Sprintf(`JSON.stringify(window.__ptscope.lastView) !== %q && document.querySelector('[data-testid=memory-timeline]').dataset.state === 'ready'`, n))
	}
	views := eval[[][]float64](t, b, `performance.getEntriesByType('resource').filter(e => e.name.includes('/api/v1/mem/view'))
	  .map(e => [(e.serverTiming.find(s => s.name === 'app') || {duration: -1}).duration, e.encodedBodySize, e.duration])`)
	var srv, kb, total []float64
	for _, v := range views {
		srv, kb, total = append(srv, v[0]), append(kb, v[1]/1024), append(total, v[2])
	}
	report("zoom views: server ms median / max", fmt.Sprintf("%.1f / %.1f (%d views)", median(srv), maxf(srv), len(srv)))
	report("zoom views: KB sent median / max", fmt.Sprintf("%.1f / %.1f", median(kb), maxf(kb)))
	report("zoom views: request ms median / max", fmt.Sprintf("%.1f / %.1f", median(total), maxf(total)))
	report("JS heap after zooming (MB)", fmt.Sprintf("%.1f", eval[float64](t, b, `performance.memory ? performance.memory.usedJSHeapSize / 1048576 : -1`)))
	// go to peak, then click the middle: a block's stack
	eval[any](t, b, `document.querySelector('[data-testid=go-to-peak]').click()`)
	until(t, b, "go to peak", `document.querySelector('[data-testid=memory-timeline]').dataset.peak === 'shown' && document.querySelector('[data-testid=memory-timeline]').dataset.state === 'ready'`)
	var clicks []float64
	for _, fx := range []float64{0.5, 0.3, 0.7} {
		r := eval[map[string]float64](t, b, `window.__ptscope.memory.plotRect()`)
		_, took := clickBlock(t, b, r["left"]+r["width"]*fx, r["top"]+r["height"]*0.55)
		clicks = append(clicks, float64(took.Milliseconds()))
	}
	report("go to peak, click -> stack shown (ms, 3 clicks)", fmt.Sprint(clicks))

	// allocator state at entries across the trace
	var stateDraw, stateSrv []float64
	m := sum.Entries
	for _, e := range []int{m / 7, m / 3, m / 2, 2 * m / 3, m - 2} {
		open(t, b, fmt.Sprintf("%s/?input=0&view=state&event=%d", s.URL, e), "allocator-state")
		stateDraw = append(stateDraw, eval[float64](t, b, `window.__ptscope.timings.allocatorState`))
		stateSrv = append(stateSrv, eval[float64](t, b, `(performance.getEntriesByType('resource').find(e => e.name.includes('/api/v1/mem/state')).serverTiming.find(s => s.name === 'app') || {duration: -1}).duration`))
	}
	report("allocator state: server ms median / max", fmt.Sprintf("%.1f / %.1f", median(stateSrv), maxf(stateSrv)))
	report("allocator state: drawn after navigation ms median / max", fmt.Sprintf("%.0f / %.0f", median(stateDraw), maxf(stateDraw)))
	noErrors(t, b)

	if trace != "" {
		for _, c := range []struct{ view, id string }{{"trace", "trace-overview"}, {"operators", "operator-table"}, {"kernels", "kernel-table"},
			{"opmemory", "memory-ops"}, {"gpu", "gpu-view"}, {"critical", "critical"}, {"distributed", "distributed"}} {
			t0 := time.Now()
			open(t, b, s.URL+"/?input=1&view="+c.view, c.id)
			report(c.id+" drawn after navigation (ms)", time.Since(t0).Milliseconds())
		}
		open(t, b, s.URL+"/?input=1&view=trace", "trace-timeline")
		report("trace timeline drawn after navigation (ms)", fmt.Sprintf("%.0f", eval[float64](t, b, `performance.now()`)))
	}

	if trace != "" {
		// the --html file of the trace
		page := filepath.Join(t.TempDir(), "trace.html")
		t0 := time.Now()
		if out, err := exec.Command(bin, "trace", "--html", page, trace).CombinedOutput(); err != nil {
			t.Fatalf("trace --html: %v: %s", err, out)
		}
		report("trace --html: run time (read, analyse, write)", time.Since(t0).Round(time.Millisecond))
		st, _ := os.Stat(page)
		report("trace --html: file size (MB)", fmt.Sprintf("%.2f", float64(st.Size())/1e6))
		for _, c := range []struct{ view, id string }{{"trace", "trace-timeline"}, {"critical", "critical"}} {
			open(t, b, "file://"+page+"?view="+c.view, c.id)
			report("trace --html: "+c.id+" drawn after navigation (ms)", fmt.Sprintf("%.0f", eval[float64](t, b, `performance.now()`)))
		}
	}

	// the --html file of the snapshot
	page := filepath.Join(t.TempDir(), "snapshot.html")
	t0 := time.Now()
	if out, err := exec.Command(bin, "analyze", "--html", page, snap).CombinedOutput(); err != nil {
		t.Fatalf("analyze --html: %v: %s", err, out)
	}
	report("analyze --html: run time (read, analyse, write)", time.Since(t0).Round(time.Millisecond))
	st, _ := os.Stat(page)
	report("--html: file size (MB)", fmt.Sprintf("%.2f", float64(st.Size())/1e6))
	b.Requests()
	open(t, b, "file://"+page, "memory-timeline")
	report("--html: memory timeline drawn after navigation (ms)", fmt.Sprintf("%.0f", eval[float64](t, b, `window.__ptscope.timings.memoryTimeline`)))
	report("--html: JS heap (MB)", fmt.Sprintf("%.1f", eval[float64](t, b, `performance.memory ? performance.memory.usedJSHeapSize / 1048576 : -1`)))
	onlyFrom(t, b, "")
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
