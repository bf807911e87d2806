package browsertests

import (
	"math"
	"strconv"
	"strings"
	"testing"
	"time"
)

// gpt2s is the real GPT-2 small fp32 training snapshot of the fixtures
// (9,477 entries; torch measured its peak at 5,538,270,208 B, entry 560).
var gpt2s = Testdata("snapshots", "gpt2s_train_fp32_b4_ctx512.pickle.xz")

// clickBlock clicks a page position on the memory timeline and returns the
// panel's block (the page keeps it in window.__ptscope.block) and how long
// the click took to answer.
func clickBlock(t *testing.T, b *Browser, x, y float64) (map[string]any, time.Duration) {
	t.Helper()
	eval[bool](t, b, `(() => { window.__ptscope.block = null; document.querySelector('[data-testid=block-details]').dataset.state = 'waiting'; return true; })()`)
	start := time.Now()
	if err := b.Click(x, y); err != nil {
		t.Fatal(err)
	}
	ready(t, b, "block-details")
	took := time.Since(start)
	return eval[map[string]any](t, b, `window.__ptscope.block`), took
}

func pyFrame(blk map[string]any) bool {
	fs, _ := blk["frames"].([]any)
	for _, f := range fs {
		if name, _ := f.(map[string]any)["filename"].(string); strings.HasSuffix(name, ".py") {
			return true
		}
	}
	return false
}

// TestMemoryTimeline: the "Done when" for the memory timeline, on
// the real GPT-2 training snapshot at 1280 x 800.
func TestMemoryTimeline(t *testing.T) {
	b := browser(t)
	s := serve(t, gpt2s)
	open(t, b, s.URL+"/", "memory-timeline", "answers")

	// the answers come first and name the peak
	ans := eval[string](t, b, `document.querySelector('[data-testid=answers]').innerText`)
	for _, want := range []string{"5.16 GiB allocated", "5,538,270,208 B", "entry 560", "backward", "activation", "stable"} {
		if !strings.Contains(ans, want) {
			t.Errorf("answers lack %q: %s", want, ans)
		}
	}
	// the phase strip has its legend: the phases the run went through
	phases := eval[string](t, b, `document.querySelector('[data-testid=phase-legend]').innerText`)
	for _, want := range []string{"forward", "backward", "optimizer"} {
		if !strings.Contains(phases, want) {
			t.Errorf("phase legend lacks %q: %q", want, phases)
		}
	}
	// unit tick labels: bytes up, entries or time across
	withUnits(t, "bytes axis", ticks(t, b, "memory-timeline", "y"), "B", "KiB", "MiB", "GiB")
	eval[bool](t, b, `(() => { const s = document.querySelector('[data-testid=x-axis]'); s.value = 'time'; s.dispatchEvent(new Event('change')); return true; })()`)
	withUnits(t, "time axis", ticks(t, b, "memory-timeline", "x"), "ns", "us", "ms", "s")

	// the legend follows the colouring
	legend := func() string {
		return eval[string](t, b, `document.querySelector('[data-testid=legend]').innerText`)
	}
	cat := legend()
	if !strings.Contains(cat, "activation") || !strings.Contains(cat, "temporary") {
		t.Errorf("category legend: %q", cat)
	}
	seen := map[string]string{"category": cat}
	for _, c := range []string{"source", "module_group", "stack", "group"} {
		eval[bool](t, b, `(() => { const s = document.querySelector('[data-testid=color-select]'); s.value = '`+c+`'; s.dispatchEvent(new Event('change')); return true; })()`)
		until(t, b, "legend for "+c, `(() => { const l = document.querySelector('[data-testid=legend]'); return l.dataset.color === '`+c+`' && !l.innerText.includes('allocated_before_recording'); })()`)
		got := legend()
		for prev, l := range seen {
			if l == got {
				t.Errorf("colour by %s: the legend is still that of %s: %q", c, prev, got)
			}
		}
		seen[c] = got
	}
	if !strings.Contains(seen["source"], ".py:") {
		t.Errorf("source legend names no source line: %q", seen["source"])
	}
	eval[bool](t, b, `(() => { const s = document.querySelector('[data-testid=color-select]'); s.value = 'category'; s.dispatchEvent(new Event('change')); return true; })()`)
	ready(t, b, "memory-timeline")

	// go to peak, then a click in the middle: a stack with a .py frame within 1 s
	eval[any](t, b, `document.querySelector('[data-testid=go-to-peak]').click()`)
	until(t, b, "go to peak", `document.querySelector('[data-testid=memory-timeline]').dataset.peak === 'shown' && document.querySelector('[data-testid=memory-timeline]').dataset.state === 'ready'`)
	x, y, err := PlotMiddle(b)
	if err != nil {
		t.Fatal(err)
	}
	blk, took := clickBlock(t, b, x, y)
	if !pyFrame(blk) || took > time.Second {
		t.Errorf("middle click: %v, block %v with frames %v", took, blk["id"], blk["frames"])
	}
	if n := eval[int](t, b, `document.querySelectorAll('[data-testid=block-details] ol.stack li').length`); n == 0 {
		t.Error("the panel shows no frames")
	}
	// the 393 MiB temporary allocated at entry 560 is clickable
	const mib393 = 393 << 20
	x, y, drawn, err := BlockAt(b, 560, mib393, true)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(drawn-mib393) > 0.02*mib393 {
		t.Fatalf("the block drawn at entry 560 nearest 393 MiB is %.0f B", drawn)
	}
	blk, _ = clickBlock(t, b, x, y)
	if size := blk["size_bytes"].(float64); math.Abs(size-mib393) > 0.01*mib393 || blk["category"] != "temporary" || blk["alloc_event_index"].(float64) != 560 {
		t.Errorf("clicked the 393 MiB temporary at entry 560; the panel shows %.0f B %v allocated at %v", size, blk["category"], blk["alloc_event_index"])
	}
	// hover shows its size and name
	eval[bool](t, b, `(() => { const c = window.__ptscope.memory.canvas; c.dispatchEvent(new MouseEvent('mousemove', {clientX: `+ftoa(x)+`, clientY: `+ftoa(y)+`, bubbles: true})); return true; })()`)
	until(t, b, "hover", `(() => { const t = document.querySelector('[data-testid=timeline-tip]'); return !t.hidden && t.innerText.includes('393 MiB') && t.innerText.includes('temporary \u00b7'); })()`)

	// a click on nothing says what is there
	r := eval[map[string]float64](t, b, `window.__ptscope.memory.plotRect()`)
	eval[bool](t, b, `(() => { document.querySelector('[data-testid=block-details]').dataset.state = 'waiting'; return true; })()`)
	if err := b.Click(r["left"]+r["width"]/2, r["top"]+2); err != nil {
		t.Fatal(err)
	}
	until(t, b, "a click above the blocks", `!!document.querySelector('[data-testid=nothing-here]')`)
	if txt := eval[string](t, b, `document.querySelector('[data-testid=nothing-here]').innerText`); !strings.Contains(txt, "Entry 5") || !strings.Contains(txt, "reserved") {
		t.Errorf("a click on nothing: %q", txt)
	}

	numbersInside(t, b, "memory view")
	for _, tab := range []string{"group", "source", "module_group", "module", "stack"} {
		eval[any](t, b, `document.querySelector('[data-by=`+tab+`]').click()`)
		until(t, b, tab+" tab", `document.querySelector('[data-by=`+tab+`]').classList.contains('on') && !!document.querySelector('[data-testid=breakdown-table]')`)
		numbersInside(t, b, "memory view, "+tab+" tab")
	}
	noErrors(t, b)
	onlyFrom(t, b, strings.TrimPrefix(s.URL, "http://"))
}

func ftoa(f float64) string { return strconv.FormatFloat(f, 'f', 2, 64) }

// commas writes n as the page does (1,234,567).
func commas(n int64) string {
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// TestAllocatorState: legend, byte scale, hover and click on a block give
// its size, state and stack; find by address; at 1280 x 800.
func TestAllocatorState(t *testing.T) {
	b := browser(t)
	s := serve(t, gpt2s)
	open(t, b, s.URL+"/?view=state", "allocator-state", "state-breakdown")
	if got := eval[string](t, b, `document.querySelector('[data-testid=allocator-state]').dataset.event`); got != "560" {
		t.Fatalf("the state opens at entry %s, want the peak (560)", got)
	}
	if l := eval[string](t, b, `document.querySelector('[data-testid=state-legend]').innerText`); !strings.Contains(l, "activation") || !strings.Contains(l, "free") {
		t.Errorf("state legend: %q", l)
	}
	// a block: the largest of the first segment, clicked in its middle
	xy := eval[[]float64](t, b, `(() => { const L = window.__ptscope.state.layout, c = document.querySelector('[data-testid=segments]').getBoundingClientRect();
	  let best = null, at = 0;
	  L.segs.forEach((g, k) => { for (const b of g.blocks) if (!best || b.size_bytes > best.b.size_bytes) best = { b, pos: L.starts[k] + (b.address - g.address) + b.size_bytes / 2 }; });
	  const row = Math.floor(best.pos / L.perRow), x = 70 + (best.pos - row * L.perRow) / L.perRow * L.w;
	  return [c.left + x, c.top + 20 + row * 17 + 7, best.b.size_bytes]; })()`)
	eval[bool](t, b, `(() => { const c = document.querySelector('[data-testid=segments]'); c.dispatchEvent(new MouseEvent('mousemove', {clientX: `+ftoa(xy[0])+`, clientY: `+ftoa(xy[1])+`, bubbles: true})); return true; })()`)
	until(t, b, "state hover", `(() => { const t = document.querySelector('[data-testid=allocator-state] .tip'); return !t.hidden && t.innerText.includes('0x'); })()`)
	if err := b.Click(xy[0], xy[1]); err != nil {
		t.Fatal(err)
	}
	ready(t, b, "state-block")
	txt := eval[string](t, b, `document.querySelector('[data-testid=state-block]').innerText`)
	for _, want := range []string{"address", "0x", "size", commas(int64(xy[2])), "state", "allocated", "freed", ".py:"} {
		if !strings.Contains(txt, want) {
			t.Errorf("the clicked block's panel lacks %q: %.500s", want, txt)
		}
	}
	if n := eval[int](t, b, `document.querySelectorAll('[data-testid=state-block] ol.stack li').length`); n == 0 {
		t.Error("the clicked block shows no stack")
	}
	href := eval[string](t, b, `document.querySelector('[data-testid=to-timeline]').getAttribute('href')`)
	if !strings.Contains(href, "view=memory") {
		t.Errorf("no jump to the timeline: %q", href)
	}
	stateBlock, _ := strconv.ParseFloat(href[strings.LastIndex(href, "block=")+len("block="):], 64)
	// find a block by address
	addr := eval[string](t, b, `'0x' + window.__ptscope.state.layout.segs[0].sorted[0].address.toString(16)`)
	eval[bool](t, b, `(() => { const i = document.querySelector('[data-testid=find-address]'); i.value = '`+addr+`'; i.dispatchEvent(new Event('change')); return true; })()`)
	until(t, b, "find by address", `document.querySelector('[data-testid=state-block]').innerText.includes('`+addr+`')`)
	numbersInside(t, b, "allocator state")
	noErrors(t, b)

	// the jump: the timeline around the block's life, the block selected with its stack
	open(t, b, s.URL+"/"+href, "memory-timeline", "block-details")
	if blk := eval[map[string]any](t, b, `window.__ptscope.block`); blk["size_bytes"].(float64) != xy[2] || blk["id"].(float64) != stateBlock || !pyFrame(blk) {
		t.Errorf("the timeline from the state shows block %v of %v B (clicked %v of %v B)", blk["id"], blk["size_bytes"], stateBlock, xy[2])
	}
	if v := eval[[]float64](t, b, `[window.__ptscope.memory.vp.x0, window.__ptscope.memory.vp.x1, window.__ptscope.block.alloc_event_index]`); v[2] < v[0] || v[2] > v[1] {
		t.Errorf("the timeline shows entries %v-%v, not the block's allocation at %v", v[0], v[1], v[2])
	}
	noErrors(t, b)
}

// TestWindowedSteps: a run recorded in stack windows lists every step, but
// only the peak view's own steps are in its trace; a click on another step
// leaves the timeline where it is and its row says why, a click on the
// view's step zooms to it (the real leak run: the view is step 18's
// window).
func TestWindowedSteps(t *testing.T) {
	b := browser(t)
	s := serve(t, extract(t, Testdata("bundles", "windows", "leak.tar.xz")))
	open(t, b, s.URL+"/", "memory-timeline", "step-table")
	row := func(name string) string {
		return `[...document.querySelectorAll('[data-testid=step-table] tbody tr')].find((tr) => tr.cells[0].textContent === '` + name + `')`
	}
	// steps in their order (step 10 after step 9, not after step 1)
	if names := eval[[]string](t, b, `[...document.querySelectorAll('[data-testid=step-table] tbody tr')].slice(0, 12).map((tr) => tr.cells[0].textContent)`); len(names) < 12 || names[2] != "step 2" || names[10] != "step 10" {
		t.Errorf("steps in the order %q", names)
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
	eval[bool](t, b, row("step 18")+`.click() || true`)
	until(t, b, "zoom to step 18", `window.__ptscope.memory.vp.x1 - window.__ptscope.memory.vp.x0 < `+ftoa(before[1]-before[0]))
	// the leak is the first answer's pattern and the first finding
	if ans := eval[string](t, b, `document.querySelector('[data-testid=answers]').innerText`); !strings.Contains(ans, "leak: +") {
		t.Errorf("answers: %s", ans)
	}
	numbersInside(t, b, "leak run")
	noErrors(t, b)
}
