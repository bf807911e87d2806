package perf

import (
	"math"
	"slices"
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
func findSteps(g *graph, phases []Phase, base int64, unixClock bool) ([]stepSpan, StepSource) {
	ev := g.ev
	var steps []stepSpan
	src := StepsProfiler
	for _, i := range g.steps {
		name := g.t.Name(int(i))
		num := -1
		if k := strings.IndexByte(name, '#'); k >= 0 {
			if v, err := strconv.Atoi(strings.TrimSpace(name[k+1:])); err == nil {
				num = v
			}
		}
		// a step that duplicates the previous one (same name and start) is skipped
		if len(steps) > 0 && steps[len(steps)-1].name == name {
			continue
		}
		steps = append(steps, stepSpan{name: name, num: num, hostS: ev.TS[i], hostE: ev.End(int(i)),
			deviceS: math.MaxInt64, deviceE: math.MinInt64})
	}
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
			return nil, src
		}
		steps = append(steps, stepSpan{name: "trace", num: 0, hostS: s, hostE: e, deviceS: math.MaxInt64, deviceE: math.MinInt64})
	}
	// GPU work per step: by the launch that lies fully inside the host step
	firstDevice := int64(math.MaxInt64)
	var unmatchedEnds []int64
	for _, gi := range g.gpu {
		l := g.launch[gi]
		matched := false
		if l >= 0 {
			ls, le := ev.TS[l], ev.End(int(l))
			k := searchStep(steps, ls)
			if k >= 0 && le <= steps[k].hostE {
				st := &steps[k]
				st.gpuCount++
				st.deviceS = min(st.deviceS, ev.TS[gi])
				st.deviceE = max(st.deviceE, ev.End(int(gi)))
				matched = true
				if k == 0 {
					firstDevice = min(firstDevice, ev.TS[gi])
				}
			}
		}
		if !matched {
			unmatchedEnds = append(unmatchedEnds, ev.End(int(gi)))
		}
	}
	prevEnd := steps[0].hostS
	for _, e := range unmatchedEnds {
		if e < firstDevice && e > prevEnd {
			prevEnd = e
		}
	}
	for i := range steps {
		st := &steps[i]
		st.start = max(prevEnd, st.hostS)
		if st.gpuCount > 0 {
			st.end = max(st.hostE, st.deviceE)
		} else {
			st.end = max(st.hostE, st.start)
		}
		prevEnd = st.end
	}
	// drop trailing steps without GPU work, when some step had GPU work
	any := false
	for _, st := range steps {
		if st.gpuCount > 0 {
			any = true
		}
	}
	if any {
		for len(steps) > 1 && steps[len(steps)-1].gpuCount == 0 {
			steps = steps[:len(steps)-1]
		}
		if n := len(steps); src == StepsProfiler && n > 1 && float64(steps[n-1].gpuCount) < 0.8*float64(steps[n-2].gpuCount) {
			steps = steps[:n-1]
		}
	}
	return steps, src
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
