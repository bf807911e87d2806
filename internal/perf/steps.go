package perf

import (
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/ptscope/ptscope/internal/kineto"
)

// stepSpan is one step's bounds before attribution.
type stepSpan struct {
	name             string
	num              int
	hostS, hostE     int64
	start, end       int64
	gpuCount         int
	deviceS, deviceE int64
	startAlloc       int64 // GPU memory allocated at the host start (-1: unknown)
}

// Phase is one forward, backward or optimizer phase that ptscope run
// recorded outside the trace (a bundle's phases.jsonl), in Unix ns.
type Phase struct {
	Name        string // forward, backward, optimizer
	Step        int
	StartTimeNS int64
	EndTimeNS   int64
}

// findSteps returns the steps and where they came from: ProfilerStep#N
// annotations, else the outermost Optimizer.step annotations (step k runs
// from the end of optimizer step k-1, or the first host event, to the end
// of optimizer step k), else the bundle's phases (first phase start to last
// phase end of each step number; phases are Unix ns and base maps them to
// trace time), else one pseudo-step over all host events. Bounds are then
// made device-aware as the plugin does: a step starts at max(previous end,
// host start) and ends at max(host end, end of the GPU work its runtimes
// launched); trailing steps that launched nothing are dropped, and for
// ProfilerStep#N also a last step with fewer than 0.8x the GPU events of
// the one before (the profiler missed its kernels).
func findSteps(g *graph, phases []Phase, base int64, unixClock bool) *stepPlanner {
	ev := g.ev
	src := StepsProfiler
	markers := make([]stepMarker, 0, len(g.steps))
	for _, i := range g.steps {
		markers = append(markers, stepMarker{Name: g.t.Name(int(i)), TS: ev.TS[i], End: ev.End(int(i))})
	}
	steps := markerSteps(markers)
	if len(steps) == 0 {
		src = StepsOptimizer
		steps = optimizerSteps(g)
	}
	if len(steps) == 0 && unixClock {
		src = StepsBundle
		steps = phaseSteps(g, phases, base)
	}
	if len(steps) == 0 {
		src = StepsWholeTrace
		s, e := hostSpan(g, true)
		if s > e {
			s, e = hostSpan(g, false)
		}
		if s > e {
			return newStepPlanner(nil, src)
		}
		steps = append(steps, stepSpan{name: "trace", num: 0, hostS: s, hostE: e, deviceS: math.MaxInt64, deviceE: math.MinInt64})
	}
	pl := newStepPlanner(steps, src)
	for _, gi := range g.gpu {
		l := g.launch[gi]
		if l >= 0 {
			pl.gpu(true, ev.TS[l], ev.End(int(l)), ev.TS[gi], ev.End(int(gi)))
		} else {
			pl.gpu(false, 0, 0, ev.TS[gi], ev.End(int(gi)))
		}
	}
	for _, m := range g.t.Memory {
		pl.memory(m)
	}
	return pl
}

// stepPlanner makes the steps' bounds device-aware from the GPU events,
// given one at a time in any order (findSteps over a whole trace, or the
// streaming path over a trace too large to hold): GPU work belongs to the
// step whose host span holds its launch whole.
type stepPlanner struct {
	steps       []stepSpan
	src         StepSource
	firstDevice int64   // the earliest GPU work of the first step
	unmatched   []int64 // ends of GPU work of no step that may end before it
	compactAt   int     // len(unmatched) at which the ends that no longer may are dropped
	// mem holds, per step, each GPU's last memory event before the step's
	// host start and after the previous step's
	mem []map[int32]memMark
}

type memMark struct{ ts, allocated int64 }

func newStepPlanner(steps []stepSpan, src StepSource) *stepPlanner {
	return &stepPlanner{steps: steps, src: src, firstDevice: math.MaxInt64}
}

// gpu adds one GPU event: its launch's span (when it has one) and its own.
func (p *stepPlanner) gpu(launched bool, ls, le, ts, end int64) {
	if launched {
		k := searchStep(p.steps, ls)
		if k >= 0 && le <= p.steps[k].hostE {
			st := &p.steps[k]
			st.gpuCount++
			st.deviceS = min(st.deviceS, ts)
			st.deviceE = max(st.deviceE, end)
			if k == 0 {
				p.firstDevice = min(p.firstDevice, ts)
			}
			return
		}
	}
	// only ends between the first step's host start and its first GPU
	// work matter (finish); keep those that still may
	if len(p.steps) > 0 && end > p.steps[0].hostS && end < p.firstDevice {
		p.unmatched = append(p.unmatched, end)
		// Drop the ends at or after the first step's GPU work, at twice
		// the length left by the last drop: linear time even when none
		// can go (a fixed threshold rescanned the list at every event
		// once 65,536 ends stayed: 240k unlaunched GPU events, over 60 s).
		if len(p.unmatched) >= max(p.compactAt, 1<<16) {
			p.unmatched = slices.DeleteFunc(p.unmatched, func(e int64) bool { return e >= p.firstDevice })
			p.compactAt = 2 * len(p.unmatched)
		}
	}
}

// memory adds one [memory] event, in file order.
func (p *stepPlanner) memory(m kineto.MemoryEvent) {
	if m.DeviceType != 1 || m.TotalAllocated < 0 {
		return
	}
	k := sort.Search(len(p.steps), func(i int) bool { return p.steps[i].hostS > m.TS })
	if k == len(p.steps) {
		return
	}
	if p.mem == nil {
		p.mem = make([]map[int32]memMark, len(p.steps))
	}
	if p.mem[k] == nil {
		p.mem[k] = map[int32]memMark{}
	}
	if x, ok := p.mem[k][m.DeviceID]; !ok || m.TS >= x.ts {
		p.mem[k][m.DeviceID] = memMark{m.TS, m.TotalAllocated}
	}
}

// finish sets the bounds: when some step launched GPU work, a step starts
// at max(previous end, host start) (the first, when it launched GPU work,
// at the end of GPU work of no step that ends before its own GPU work
// starts) and ends at max(host end, end of its GPU work); otherwise the
// host bounds stand. Trailing
// steps that launched nothing are dropped, and for ProfilerStep#N also a
// last step with fewer than 0.8x the GPU events of the one before, and with
// dropLast the last step. Each step gets the GPU memory allocated (summed
// over GPUs) by the last [memory] event before its host start, or -1.
func (p *stepPlanner) finish(dropLast bool) []stepSpan {
	steps := p.steps
	if len(steps) == 0 {
		return steps
	}
	last := map[int32]int64{}
	for k := range steps {
		if k < len(p.mem) {
			for d, m := range p.mem[k] {
				last[d] = m.allocated
			}
		}
		steps[k].startAlloc = -1
		if len(last) > 0 {
			steps[k].startAlloc = 0
			for _, v := range last {
				steps[k].startAlloc += v
			}
		}
	}
	// as the plugin's _find_device_steps: bounds become device-aware only
	// when some step launched GPU work, and the first step starts at the
	// end of earlier GPU work of no step only when it launched GPU work
	// itself, and only of work that ends before its own starts
	any := false
	for _, st := range steps {
		if st.gpuCount > 0 {
			any = true
		}
	}
	prevEnd := steps[0].hostS
	if p.firstDevice != math.MaxInt64 {
		for _, e := range p.unmatched {
			if e < p.firstDevice && e > prevEnd {
				prevEnd = e
			}
		}
	}
	for i := range steps {
		st := &steps[i]
		st.start, st.end = st.hostS, st.hostE
		if !any {
			continue
		}
		st.start = max(prevEnd, st.hostS)
		if st.gpuCount > 0 {
			st.end = max(st.hostE, st.deviceE)
		} else {
			st.end = max(st.hostE, st.start)
		}
		prevEnd = st.end
	}
	// drop trailing steps without GPU work, when some step had GPU work
	if any {
		for len(steps) > 1 && steps[len(steps)-1].gpuCount == 0 {
			steps = steps[:len(steps)-1]
		}
		if n := len(steps); p.src == StepsProfiler && n > 1 && float64(steps[n-1].gpuCount) < 0.8*float64(steps[n-2].gpuCount) {
			steps = steps[:n-1]
		}
	}
	if dropLast && len(steps) > 1 {
		steps = steps[:len(steps)-1]
	}
	return steps
}

// stepMarker is a ProfilerStep#N annotation (isStepMarker): its name and
// host span.
type stepMarker struct {
	Name    string
	TS, End int64
}

// isStepMarker reports whether an event of kind k named name marks a step.
func isStepMarker(k kineto.Kind, name string) bool {
	return isOp(k) && strings.HasPrefix(name, "ProfilerStep#")
}

// sortStepMarkers sorts markers given in file order by start, exactly as
// the whole-trace analysis orders them.
func sortStepMarkers(ms []stepMarker) {
	sort.Slice(ms, func(a, b int) bool { return ms[a].TS < ms[b].TS })
}

// markerSteps makes one step per marker (sorted by sortStepMarkers); a
// marker that repeats the previous one's name is skipped.
func markerSteps(markers []stepMarker) []stepSpan {
	var steps []stepSpan
	for _, m := range markers {
		num := -1
		if k := strings.IndexByte(m.Name, '#'); k >= 0 {
			if v, err := strconv.Atoi(strings.TrimSpace(m.Name[k+1:])); err == nil {
				num = v
			}
		}
		if len(steps) > 0 && steps[len(steps)-1].name == m.Name {
			continue
		}
		steps = append(steps, stepSpan{name: m.Name, num: num, hostS: m.TS, hostE: m.End,
			deviceS: math.MaxInt64, deviceE: math.MinInt64})
	}
	return steps
}

// hostSpan is the span of the host events: ops, launches and Python
// functions (all events when ops is false).
func hostSpan(g *graph, ops bool) (s, e int64) {
	ev := g.ev
	s, e = math.MaxInt64, math.MinInt64
	for i := 0; i < ev.Len(); i++ {
		k := ev.Kind[i]
		if !ops || isOp(k) || k.IsLaunch() || k == kineto.KindPythonFunction {
			s = min(s, ev.TS[i])
			e = max(e, ev.End(i))
		}
	}
	return s, e
}

// optimizerSteps makes one step per outermost Optimizer.step annotation,
// numbered from 0 as analyze and bundles number steps.
func optimizerSteps(g *graph) []stepSpan {
	ev := g.ev
	var ends []int64
	for _, i := range g.order {
		if !strings.HasPrefix(g.t.Name(int(i)), "Optimizer.step#") {
			continue
		}
		nested := false
		for p := g.parent[i]; p >= 0; p = g.parent[p] {
			if strings.HasPrefix(g.t.Name(int(p)), "Optimizer.step#") {
				nested = true
				break
			}
		}
		if !nested {
			ends = append(ends, ev.End(int(i)))
		}
	}
	if len(ends) == 0 {
		return nil
	}
	slices.Sort(ends)
	start, _ := hostSpan(g, true)
	var steps []stepSpan
	for k, e := range ends {
		steps = append(steps, stepSpan{name: "step " + strconv.Itoa(k), num: k, hostS: min(start, e), hostE: e,
			deviceS: math.MaxInt64, deviceE: math.MinInt64})
		start = e
	}
	return steps
}

// phaseSteps makes one step per step number of the bundle's phases that
// overlaps the trace's host events.
func phaseSteps(g *graph, phases []Phase, base int64) []stepSpan {
	s, e := hostSpan(g, true)
	if s > e {
		return nil
	}
	bounds := map[int][2]int64{}
	var nums []int
	for _, p := range phases {
		ps, pe := p.StartTimeNS-base, p.EndTimeNS-base
		b, ok := bounds[p.Step]
		if !ok {
			b = [2]int64{ps, pe}
			nums = append(nums, p.Step)
		}
		bounds[p.Step] = [2]int64{min(b[0], ps), max(b[1], pe)}
	}
	slices.Sort(nums)
	var steps []stepSpan
	for _, n := range nums {
		b := bounds[n]
		if b[1] <= s || b[0] >= e {
			continue
		}
		steps = append(steps, stepSpan{name: "step " + strconv.Itoa(n), num: n, hostS: max(b[0], s), hostE: min(b[1], e),
			deviceS: math.MaxInt64, deviceE: math.MinInt64})
	}
	return steps
}

// searchStep returns the step whose host span holds t, or -1.
func searchStep(steps []stepSpan, t int64) int {
	lo, hi := 0, len(steps)
	for lo < hi {
		m := (lo + hi) / 2
		if steps[m].hostS <= t {
			lo = m + 1
		} else {
			hi = m
		}
	}
	k := lo - 1
	if k >= 0 && t <= steps[k].hostE {
		return k
	}
	return -1
}
