package perf

import (
	"math"
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

// findSteps returns the steps with the plugin's device-aware bounds: a
// step starts at max(previous end, host start) and ends at max(host end,
// end of the GPU work its runtimes launched); trailing steps that launched
// nothing are dropped, and so is a last step with fewer than 0.8x the GPU
// events of the one before (the profiler missed its kernels). A trace
// without ProfilerStep#N gets one step "0" over all host events.
func findSteps(g *graph) []stepSpan {
	ev := g.ev
	var steps []stepSpan
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
		s, e := int64(math.MaxInt64), int64(math.MinInt64)
		for i := 0; i < ev.Len(); i++ {
			k := ev.Kind[i]
			if isOp(k) || k.IsLaunch() || k == kineto.KindPythonFunction {
				s = min(s, ev.TS[i])
				e = max(e, ev.End(i))
			}
		}
		if s > e {
			for i := 0; i < ev.Len(); i++ {
				s = min(s, ev.TS[i])
				e = max(e, ev.End(i))
			}
		}
		if s > e {
			return nil
		}
		steps = append(steps, stepSpan{name: "0", num: 0, hostS: s, hostE: e, deviceS: math.MaxInt64, deviceE: math.MinInt64})
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
		if n := len(steps); n > 1 && float64(steps[n-1].gpuCount) < 0.8*float64(steps[n-2].gpuCount) {
			steps = steps[:n-1]
		}
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
