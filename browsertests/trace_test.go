package browsertests

import (
	"fmt"
	"strings"
	"testing"
)

// realTrace is the real GPT-2 6-layer trace with a slow DataLoader
// (profile_memory and record_shapes on), and stackTrace the real
// with_stack trace of the 4-layer model.
var (
	realTrace  = Testdata("traces", "real", "gpt2_6l_dataloader_bottleneck.pt.trace.json.gz")
	stackTrace = Testdata("traces", "real", "gpt2tiny_with_stack.pt.trace.json.xz")
)

// TestTraceViews: the overview answers, the GPU memory curve and the trace
// timeline with unit tick labels, the clicked event's details, and every
// table's numbers inside a 1280 px window.
func TestTraceViews(t *testing.T) {
	b := browser(t)
	s := serve(t, realTrace, stackTrace)
	open(t, b, s.URL+"/?input=0&view=trace", "trace-overview", "trace-memory", "trace-timeline")
	ans := eval[string](t, b, `document.querySelector('[data-testid=answers]').innerText`)
	for _, want := range []string{"Step time", "57.68 ms average", "3 steps", "kernel", "GPU utilisation", "98.3%", "tensor cores"} {
		if !strings.Contains(ans, want) {
			t.Errorf("answers lack %q: %s", want, ans)
		}
	}
	withUnits(t, "memory curve bytes", ticks(t, b, "trace-memory", "y"), "B", "KiB", "MiB", "GiB")
	withUnits(t, "memory curve time", ticks(t, b, "trace-memory", "x"), "ns", "us", "ms", "s")
	withUnits(t, "trace timeline time", ticks(t, b, "trace-timeline", "x"), "ns", "us", "ms", "s")
	withUnits(t, "per-step bars", ticks(t, b, "step-bars", "x"), "ns", "us", "ms", "s")
	// the timeline's step bands: one per step of the trace, in order, on
	// the timeline's clock (inside its start and end)
	bad := eval[[]float64](t, b, `(async () => { const s = await fetch('/api/v1/trace/summary?input=0').then((r) => r.json()); const n = s.step_bands.length; return [n, s.result.steps.length, s.step_bands.filter((x, k) => !(x[0] >= s.start_ns && x[1] <= s.end_ns && x[0] < x[1] && (k === 0 || x[0] >= s.step_bands[k - 1][1]))).length]; })()`)
	if len(bad) != 3 || bad[0] != 3 || bad[1] != 3 || bad[2] != 0 {
		t.Errorf("step bands: %v (bands, steps, bands off the clock or out of order), want 3, 3, 0", bad)
	}
	// a click on an event: its details, the events it runs in, the GPU work it launched
	eval[any](t, b, `document.querySelector('[data-testid=trace-timeline] canvas').scrollIntoView()`)
	xy := eval[[]float64](t, b, `(() => { const d = window.__ptscope.trace, tl = window.__ptscope.traceTimeline, c = document.querySelector('[data-testid=trace-timeline] canvas').getBoundingClientRect();
	  const W = c.width / devicePixelRatio - tl.LABEL, X = (ts) => tl.LABEL + (ts - tl.vp.t0) / (tl.vp.t1 - tl.vp.t0) * W;
	  const host = d.lanes.findIndex((l) => !l.gpu);
	  return [c.left + X(d.result.steps[0].start_ns - d.base_ns) + 3, c.top + tl.offs[host] + tl.ROW / 2]; })()`)
	if err := b.Click(xy[0], xy[1]); err != nil {
		t.Fatal(err)
	}
	ready(t, b, "trace-event")
	ev := eval[string](t, b, `document.querySelector('[data-testid=trace-event]').innerText`)
	for _, want := range []string{"ProfilerStep#2", "duration", "ms", "GPU work launched"} {
		if !strings.Contains(ev, want) {
			t.Errorf("event details lack %q: %.400s", want, ev)
		}
	}
	numbersInside(t, b, "trace overview")

	open(t, b, s.URL+"/?input=0&view=operators", "operator-table")
	numbersInside(t, b, "operators")
	open(t, b, s.URL+"/?input=0&view=kernels", "kernel-table")
	numbersInside(t, b, "kernels")
	tc := eval[[]string](t, b, `[...new Set([...document.querySelectorAll('[data-testid=kernel-table] tbody tr')].map((tr) => tr.cells[7].textContent))]`)
	if strings.Join(tc, ",") != "no" { // fp32 matrix products on CUDA cores: the fixture's README
		t.Errorf("tensor-core column: %q, want every kernel \"no\"", tc)
	}

	// the with_stack trace: a kernel's details name its launch and operator
	open(t, b, s.URL+"/?input=1&view=trace", "trace-timeline")
	// every nesting level has room: the lanes' depths add up to the canvas
	levels := eval[[]float64](t, b, `(() => { const s = window.__ptscope.trace; const tl = window.__ptscope.traceTimeline;
	  const l = s.lanes.length - 1; return [Math.max(...s.lanes.map((x) => x.depth)), tl.offs[l] + s.lanes[l].depth * tl.ROW, document.querySelector('[data-testid=trace-timeline] canvas').height / devicePixelRatio]; })()`)
	if levels[0] <= 12 || levels[1] > levels[2] {
		t.Errorf("deepest lane %v levels ends at %v px in a %v px canvas", levels[0], levels[1], levels[2])
	}
	eval[any](t, b, `(async () => { const d = window.__ptscope.trace, gpu = d.lanes.findIndex((l) => l.gpu);
	  const v = await fetch('/api/v1/trace/view?input=1&w=200').then((r) => r.json());
	  const k = v.slices.find((x) => x[0] === gpu && v.names[x[4]].includes('gemm')) || v.slices.find((x) => x[0] === gpu);
	  window.__ptscope.traceTimeline.open(k[5]); })()`)
	until(t, b, "a kernel's details", `document.querySelector('[data-testid=trace-event]').dataset.state === 'ready'`)
	ev = eval[string](t, b, `document.querySelector('[data-testid=trace-event]').innerText`)
	for _, want := range []string{"Launched by", "cudaLaunchKernel", "aten::", "grid, block"} {
		if !strings.Contains(ev, want) {
			t.Errorf("kernel details lack %q: %.600s", want, ev)
		}
	}
	// the with_stack trace's module table (nn.Module calls)
	open(t, b, s.URL+"/?input=1&view=operators", "operator-table", "module-table")
	numbersInside(t, b, "operators and modules")
	noErrors(t, b)
	onlyFrom(t, b, strings.TrimPrefix(s.URL, "http://"))
}

// TestUnrelatedRanks: two single-rank traces of different runs (both rank
// 0) are separate runs with perf.GroupJobs' warning, not the ranks of one
// job: no comparison, no skew, no straggler.
func TestUnrelatedRanks(t *testing.T) {
	b := browser(t)
	s := serve(t, realTrace, stackTrace)
	open(t, b, s.URL+"/?input=0&view=distributed", "distributed", "rank-table", "other-runs")
	w := eval[string](t, b, `(document.querySelector('[data-testid=rank-warning]') || {}).innerText || ''`)
	if !strings.Contains(w, "2 traces are 2 separate runs") {
		t.Errorf("warning: %q", w)
	}
	page := eval[string](t, b, `document.querySelector('[data-testid=distributed]').innerText`)
	if eval[bool](t, b, `!!document.querySelector('[data-testid=skew-table], [data-testid=wait-bars]')`) || strings.Contains(page, "straggler") ||
		strings.Contains(page, "Ranks (2)") || eval[int](t, b, `+document.querySelector('[data-testid=rank-table]').dataset.rows`) != 1 {
		t.Errorf("unrelated traces compared as ranks: %.500s", page)
	}
	if n := eval[int](t, b, `+document.querySelector('[data-testid=other-runs]').dataset.rows`); n != 1 {
		t.Errorf("other runs: %d rows, want the other trace", n)
	}
	numbersInside(t, b, "distributed")
	noErrors(t, b)
}

// TestDistributedRanks: the two ranks of an FSDP job are compared: the
// per-worker bars, waiting vs transfer, the straggler the analysis names
// marked, the step skew and the collectives.
func TestDistributedRanks(t *testing.T) {
	b := browser(t)
	s := serve(t, Testdata("traces", "fsdp"))
	open(t, b, s.URL+"/?input=0&view=distributed", "distributed", "rank-table", "skew-table", "overlap-bars", "wait-bars", "comm-ops")
	if eval[bool](t, b, `!!document.querySelector('[data-testid=rank-warning]')`) {
		t.Error("the ranks of one job got the unrelated-runs warning")
	}
	strag := eval[int](t, b, `window.__ptscope.distributed.cross_rank.straggler_rank`)
	marked := eval[[]string](t, b, `[...document.querySelectorAll('[data-testid=overlap-bars] .hbar.marked .name')].map((x) => x.textContent)`)
	if strag < 0 || len(marked) != 1 || marked[0] != fmt.Sprintf("rank %d", strag) {
		t.Errorf("straggler %d, marked bars %q", strag, marked)
	}
	if n := eval[int](t, b, `document.querySelectorAll('[data-testid=overlap-bars] .hbar:not(.axis)').length`); n != 2 {
		t.Errorf("%d per-worker bars, want 2", n)
	}
	withUnits(t, "per-worker bars", ticks(t, b, "overlap-bars", "x"), "ns", "us", "ms", "s")
	withUnits(t, "wait bars", ticks(t, b, "wait-bars", "x"), "ns", "us", "ms", "s")
	numbersInside(t, b, "distributed")
	noErrors(t, b)
}

// TestTraceAnalysisViews: operators by name + input shapes, kernels by
// operator and their sequences, the memory events per operator, the GPU
// view's charts with unit ticks, and the critical path, whose rows zoom
// the trace timeline to their piece.
func TestTraceAnalysisViews(t *testing.T) {
	b := browser(t)
	s := serve(t, realTrace)
	u := s.URL + "/?input=0&view="
	open(t, b, u+"operators", "operator-table")
	byName := eval[int](t, b, `+document.querySelector('[data-testid=operator-table]').dataset.rows`)
	eval[any](t, b, `document.querySelector('[data-testid=group-by] button[data-v=shape]').click()`)
	until(t, b, "operators by shape", `document.querySelector('[data-testid=operator-table] th')?.parentNode.innerText.includes('input shapes')`)
	if n, want := eval[int](t, b, `+document.querySelector('[data-testid=operator-table]').dataset.rows`), eval[int](t, b, `window.__ptscope.trace.result.operators_by_shape.length`); n != want || n <= byName {
		t.Errorf("by name + shapes: %d rows, want %d (more than %d by name)", n, want, byName)
	}
	numbersInside(t, b, "operators by shape")

	open(t, b, u+"kernels", "kernel-table", "sequence-table")
	eval[any](t, b, `document.querySelector('[data-testid=group-by] button[data-v=operator]').click()`)
	until(t, b, "kernels by operator", `document.querySelector('[data-testid=kernel-table] th:nth-child(2)')?.innerText.startsWith('operator')`)
	if n, want := eval[int](t, b, `+document.querySelector('[data-testid=kernel-table]').dataset.rows`), eval[int](t, b, `window.__ptscope.trace.result.kernels_by_operator.length`); n != want {
		t.Errorf("kernels by operator: %d rows, want %d", n, want)
	}
	numbersInside(t, b, "kernels by operator")

	open(t, b, u+"opmemory", "memory-ops", "trace-memory")
	if n, want := eval[int](t, b, `+document.querySelector('[data-testid=memory-ops]').dataset.rows`), eval[int](t, b, `window.__ptscope.trace.result.memory_by_operator.length`); n != want || n == 0 {
		t.Errorf("memory events table: %d rows, want %d", n, want)
	}
	withUnits(t, "memory view bytes", ticks(t, b, "trace-memory", "y"), "B", "KiB", "MiB", "GiB")
	numbersInside(t, b, "memory events")

	open(t, b, u+"gpu", "gpu-view", "queue-length", "copy-bandwidth", "stream-idle")
	withUnits(t, "queue length time", ticks(t, b, "queue-length", "x"), "ns", "us", "ms", "s")
	withUnits(t, "bandwidth", ticks(t, b, "copy-bandwidth", "y"), "B/s", "KB/s", "MB/s", "GB/s")
	withUnits(t, "bandwidth time", ticks(t, b, "copy-bandwidth", "x"), "ns", "us", "ms", "s")
	withUnits(t, "launch delays", ticks(t, b, "delay-histogram", "x"), "ns", "us", "ms", "s")
	numbersInside(t, b, "GPU view")

	open(t, b, u+"critical", "critical", "critical-items", "critical-path", "trace-timeline")
	withUnits(t, "critical path timeline", ticks(t, b, "trace-timeline", "x"), "ns", "us", "ms", "s")
	numbersInside(t, b, "critical path")
	clickCriticalRow(t, b)
	noErrors(t, b)
}

// clickCriticalRow clicks the critical path's longest GPU piece in the
// chain's table and checks that the trace timeline shows it, zoomed in, in
// the window, with its event's details.
func clickCriticalRow(t *testing.T, b *Browser) {
	t.Helper()
	// the chain sorted longest first: the first row is the longest piece
	eval[any](t, b, `[...document.querySelectorAll('[data-testid=critical-path] th')].find((x) => x.innerText.startsWith('duration')).click()`)
	xy := eval[[]float64](t, b, `(() => { const tr = document.querySelector('[data-testid=critical-path] tbody tr'); tr.scrollIntoView({ block: 'center' });
	  const r = tr.getBoundingClientRect(); return [r.left + r.width / 2, r.top + r.height / 2]; })()`)
	before := eval[float64](t, b, `window.__ptscope.traceTimeline.vp.t1 - window.__ptscope.traceTimeline.vp.t0`)
	if err := b.Click(xy[0], xy[1]); err != nil {
		t.Fatal(err)
	}
	until(t, b, "the timeline zoomed to the piece", `document.querySelector('[data-testid=trace-timeline]').dataset.state === 'ready' && window.__ptscope.timings.criticalClick > 0`)
	got := eval[[]float64](t, b, `(() => { const cp = window.__ptscope.critical, tl = window.__ptscope.traceTimeline;
	  const sg = cp.path.slice().sort((a, b) => b.duration_ns - a.duration_ns)[0], t0 = sg.timeline_ns, t1 = t0 + sg.duration_ns;
	  const r = tl.node.getBoundingClientRect();
	  return [tl.vp.t0 <= t0 && tl.vp.t1 >= t1 ? 1 : 0, tl.vp.t1 - tl.vp.t0, r.top, r.bottom, sg.event]; })()`)
	if got[0] != 1 || got[1] >= before {
		t.Errorf("after the click the timeline shows %v ns (was %v), the piece inside: %v", got[1], before, got[0] == 1)
	}
	if got[2] < -1 || got[2] > winH-100 {
		t.Errorf("the timeline is not in the window after the click: top %v px", got[2])
	}
	if got[4] >= 0 {
		ready(t, b, "trace-event")
	}
}

// TestCommOps: the communication-op table of two ranks with nccl:*
// operators (the TensorBoard plugin's own distributed test traces) has the
// plugin's columns and its numbers (its test asserts worker 0's
// nccl:all_reduce: 1 call, 8,196,000 B, 1,558 us latency, 1,133 us
// transfer).
func TestCommOps(t *testing.T) {
	b := browser(t)
	s := serve(t, Testdata("peers", "tbplugin", "test_profiler", "test_distributed_nccl"))
	open(t, b, s.URL+"/?input=0&view=distributed", "distributed", "rank-table", "comm-ops")
	heads := eval[[]string](t, b, `[...document.querySelectorAll('[data-testid=comm-ops] th')].map((th) => th.textContent.replace(/ [▾▴]$/, ''))`)
	if got := strings.Join(heads, "|"); got != "operation|calls|total size|avg size|total latency|avg latency|transfer|avg transfer|bandwidth" {
		t.Errorf("comm-op columns %q", got)
	}
	row := eval[[]string](t, b, `[...[...document.querySelectorAll('[data-testid=comm-ops] tbody tr')].find((tr) => tr.cells[0].textContent === 'nccl:all_reduce').cells].map((c) => c.textContent)`)
	// 8,196,000 B = 7.82 MiB; 8,196,000 B in 1.558 ms = 5.26 GB/s
	if want := []string{"nccl:all_reduce", "1", "7.82 MiB", "7.82 MiB", "1.56 ms", "1.56 ms", "1.13 ms", "1.13 ms", "5.26 GB/s"}; strings.Join(row, "|") != strings.Join(want, "|") {
		t.Errorf("nccl:all_reduce row %q, want %q", row, want)
	}
	numbersInside(t, b, "communication ops")
	noErrors(t, b)
}
