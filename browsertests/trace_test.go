package browsertests

import (
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
	noErrors(t, b)
	onlyFrom(t, b, strings.TrimPrefix(s.URL, "http://"))
}

// TestUnrelatedRanks: two single-rank traces of different runs (both rank
// 0) are listed with a warning, not compared as the ranks of one job.
func TestUnrelatedRanks(t *testing.T) {
	b := browser(t)
	s := serve(t, realTrace, stackTrace)
	open(t, b, s.URL+"/?input=0&view=distributed", "distributed", "rank-table")
	w := eval[string](t, b, `(document.querySelector('[data-testid=rank-warning]') || {}).innerText || ''`)
	if !strings.Contains(w, "2 traces claim rank 0") || !strings.Contains(w, "separate runs") {
		t.Errorf("warning: %q", w)
	}
	if eval[bool](t, b, `!!document.querySelector('[data-testid=skew-table]')`) || strings.Contains(eval[string](t, b, `document.querySelector('[data-testid=rank-table]').innerText`), "straggler") {
		t.Error("unrelated traces compared as ranks")
	}
	numbersInside(t, b, "distributed")
	noErrors(t, b)
}

// TestDistributedRanks: the two ranks of an FSDP job are compared.
func TestDistributedRanks(t *testing.T) {
	b := browser(t)
	s := serve(t, Testdata("traces", "fsdp"))
	open(t, b, s.URL+"/?input=0&view=distributed", "distributed", "rank-table", "skew-table")
	if eval[bool](t, b, `!!document.querySelector('[data-testid=rank-warning]')`) {
		t.Error("the ranks of one job got the unrelated-traces warning")
	}
	numbersInside(t, b, "distributed")
	noErrors(t, b)
}
