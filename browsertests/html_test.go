package browsertests

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// writeHTML runs `ptscope CMD --html FILE input` and returns the file.
func writeHTML(t *testing.T, cmd, input string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), cmd+".html")
	if b, err := exec.Command(bin, cmd, "--html", out, input).CombinedOutput(); err != nil {
		t.Fatalf("ptscope %s --html: %v: %s", cmd, err, b)
	}
	return out
}

// TestHTMLFiles: an --html file draws the same views offline, from the
// answers it recorded: the memory timeline (go to peak, a click shows a
// stack, the legend follows the colouring), the allocator state (a click
// shows a block's stack), the profiler views (a click shows an event's
// details), and makes no request.
func TestHTMLFiles(t *testing.T) {
	b := browser(t)
	u := "file://" + writeHTML(t, "analyze", gpt2s)
	open(t, b, u, "memory-timeline", "answers")
	if n := eval[int](t, b, `+document.querySelector('[data-testid=memory-timeline]').dataset.blocks`); n == 0 {
		t.Fatal("no block drawn on its own")
	}
	eval[any](t, b, `document.querySelector('[data-testid=go-to-peak]').click()`)
	until(t, b, "go to peak", `document.querySelector('[data-testid=memory-timeline]').dataset.peak === 'shown' && document.querySelector('[data-testid=memory-timeline]').dataset.state === 'ready'`)
	x, y, err := PlotMiddle(b)
	if err != nil {
		t.Fatal(err)
	}
	if blk, _ := clickBlock(t, b, x, y); !pyFrame(blk) {
		t.Errorf("offline middle click: block %v without a .py frame", blk["id"])
	}
	eval[bool](t, b, `(() => { const s = document.querySelector('[data-testid=color-select]'); s.value = 'source'; s.dispatchEvent(new Event('change')); return true; })()`)
	until(t, b, "offline source legend", `(() => { const l = document.querySelector('[data-testid=legend]'); return l.dataset.color === 'source' && l.innerText.includes('.py:'); })()`)
	withUnits(t, "offline bytes axis", ticks(t, b, "memory-timeline", "y"), "B", "KiB", "MiB", "GiB")
	numbersInside(t, b, "offline memory view")

	open(t, b, u+"?view=state", "allocator-state")
	xy := eval[[]float64](t, b, `(() => { const L = window.__ptscope.state.layout, c = document.querySelector('[data-testid=segments]').getBoundingClientRect();
	  const g = L.segs[0], bl = g.sorted[0], pos = L.starts[0] + (bl.address - g.address) + bl.size_bytes / 2;
	  const row = Math.floor(pos / L.perRow); return [c.left + 70 + (pos - row * L.perRow) / L.perRow * L.w, c.top + 20 + row * 17 + 7]; })()`)
	if err := b.Click(xy[0], xy[1]); err != nil {
		t.Fatal(err)
	}
	ready(t, b, "state-block")
	if txt := eval[string](t, b, `document.querySelector('[data-testid=state-block]').innerText`); !strings.Contains(txt, "size") || !strings.Contains(txt, "0x") {
		t.Errorf("offline state block: %.300s", txt)
	}

	tu := "file://" + writeHTML(t, "trace", realTrace)
	open(t, b, tu+"?view=trace", "trace-overview", "trace-memory", "trace-timeline")
	withUnits(t, "offline trace timeline", ticks(t, b, "trace-timeline", "x"), "ns", "us", "ms", "s")
	eval[any](t, b, `(() => { const tl = window.__ptscope.traceTimeline; const d = window.__PTSCOPE_DATA__.answers['trace/view'][0].body; tl.open(d.slices[0][5]); })()`)
	ready(t, b, "trace-event")
	open(t, b, tu+"?view=operators", "operator-table")
	numbersInside(t, b, "offline operators")
	open(t, b, tu+"?view=kernels", "kernel-table")
	open(t, b, tu+"?view=opmemory", "memory-ops", "trace-memory")
	open(t, b, tu+"?view=gpu", "gpu-view", "queue-length", "copy-bandwidth")
	open(t, b, tu+"?view=distributed", "distributed", "rank-table")
	open(t, b, tu+"?view=critical", "critical", "critical-path", "trace-timeline")
	clickCriticalRow(t, b)
	noErrors(t, b)
	onlyFrom(t, b, "")
	if st, err := os.Stat(strings.TrimPrefix(u, "file://")); err != nil || st.Size() > 10<<20 {
		t.Errorf("the --html file: %v, %d bytes", err, st.Size())
	}
}

// TestBundleViews: a ptscope run bundle's views (the phases table) keep
// their numbers inside the window.
func TestBundleViews(t *testing.T) {
	b := browser(t)
	s := serve(t, Testdata("bundles", "lm_small_bf16"))
	open(t, b, s.URL+"/", "memory-timeline", "phase-table")
	numbersInside(t, b, "bundle memory view")
	open(t, b, s.URL+"/?view=state", "allocator-state", "state-breakdown")
	numbersInside(t, b, "bundle allocator state")
	noErrors(t, b)
}

// TestCompare: the page links to the compare view, which draws the
// comparison; a snapshot against a trace shows the one-line error.
func TestCompare(t *testing.T) {
	b := browser(t)
	dir := t.TempDir()
	copyTo(t, dir, map[string]string{
		"a_base.pickle.xz": Testdata("snapshots", "validate_gpt2tiny_fp32.pickle.xz"),
		"b_leak.pickle.xz": Testdata("snapshots", "leak_gpt2_2l.pickle.xz"),
		"c_trace.json.gz":  Testdata("traces", "dataloader.pt.trace.json.gz"),
	})
	s := serve(t, dir)
	open(t, b, s.URL+"/", "memory-timeline")
	if href := eval[string](t, b, `document.querySelector('[data-testid=compare-link]').getAttribute('href')`); href != "?view=diff&a=0&b=1" {
		t.Fatalf("compare link %q, want the next snapshot as B", href)
	}
	open(t, b, s.URL+"/?view=diff&a=0&b=1", "diff-view")
	txt := eval[string](t, b, `document.querySelector('[data-testid=diff-view]').innerText`)
	for _, want := range []string{"peak allocated", "leak-appeared"} {
		if !strings.Contains(txt, want) {
			t.Errorf("diff view lacks %q: %.400s", want, txt)
		}
	}
	// no stray header or rule above the sections
	if first := eval[string](t, b, `document.querySelector('[data-testid=diff-view]').firstElementChild.tagName`); first != "H2" && first != "H1" {
		t.Errorf("the compare view starts with a %s, not a heading", first)
	}
	if stray := eval[[]string](t, b, `[...document.querySelectorAll('[data-testid=diff-view] hr, [data-testid=diff-view] p')].filter((e) => e.tagName === 'HR' || /^\s*(-{4,}\s*)+$|^\s*change\s+%\s+A\s+B/.test(e.textContent)).map((e) => e.textContent)`); len(stray) > 0 {
		t.Errorf("the compare view has a stray text header or rule: %q", stray)
	}
	// every cell of the comparison's tables inside the window
	if out := eval[[]string](t, b, `[...document.querySelectorAll('[data-testid=diff-view] td, [data-testid=diff-view] th')].filter((c) => { const r = c.getBoundingClientRect(); return r.width > 0 && (r.left < -0.5 || r.right > window.innerWidth + 0.5); }).slice(0, 5).map((c) => c.textContent + ' at ' + Math.round(c.getBoundingClientRect().right))`); len(out) > 0 {
		t.Errorf("compare view: cells outside a %d px window: %q", winW, out)
	}
	open(t, b, s.URL+"/?view=diff&a=0&b=2")
	until(t, b, "mismatched kinds", `(() => { const e = document.querySelector('[data-testid=diff-view]'); return !!e && e.dataset.state === 'error' && e.innerText.includes('diff compares snapshots with snapshots and traces with traces'); })()`)
	noErrors(t, b)
}
