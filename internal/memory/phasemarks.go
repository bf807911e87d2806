package memory

import (
	"sort"
	"strconv"
	"strings"

	"github.com/ptscope/ptscope/internal/snapshot"
	"github.com/ptscope/ptscope/internal/spillmem"
)

// interval is an annotated range in entry indices [lo, hi).
type interval struct {
	name   string
	lo, hi int
	open   bool // no END before the snapshot: hi is the end of the trace
}

// indexAt maps a time to the first entry at or after it (entries' times are
// made monotonic first, since several can share one microsecond).
func indexAt(times []int64, t int64) int {
	return sort.Search(len(times), func(i int) bool { return times[i] >= t })
}

// annotationIntervals pairs START/END annotations of device d by name.
func annotationIntervals(s *snapshot.Snapshot, d int, times []int64) []interval {
	if len(times) == 0 {
		return nil
	}
	var out []interval
	for k, r := range AnnotationRanges(s, d) {
		spillmem.PollSparse(s.Arena(), k)
		// A range still open when the snapshot was taken (the forward
		// that ran out of memory) runs to the end of the trace.
		iv := interval{name: r.Name, lo: indexAt(times, r.StartUS), hi: len(times), open: r.Open}
		if !r.Open {
			iv.hi = indexAt(times, r.EndUS)
		}
		out = append(out, iv)
	}
	// Outer ranges first, so that a range nested in another (a forward in
	// optimizer.step(closure)) labels its entries after it.
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].lo != out[j].lo {
			return out[i].lo < out[j].lo
		}
		return out[i].hi > out[j].hi
	})
	return out
}

// ptscopeStepPrefix names ptscope run's step ranges: "ptscope:step#N"
// spans optimizer step N from its first phase to the optimizer step's end
// (gradient accumulation, closures and several root modules included).
const ptscopeStepPrefix = "ptscope:step#"

// stepRange is one ptscope:step#N range in entry indices; lo is -1 when
// its START predates the trace, hi -1 when the step had not ended.
type stepRange struct {
	step       int
	lo, hi     int
	t0, t1     int64 // START and END times (-1: absent)
	optimizers int   // optimizer phases that began in it
}

// ptscopeSteps pairs device d's ptscope:step#N annotations, in step order.
func ptscopeSteps(s *snapshot.Snapshot, d int, times []int64) []stepRange {
	by := map[int]*stepRange{}
	var order []int
	for k, a := range s.Annotations {
		spillmem.PollSparse(s.Arena(), k)
		if a.Device != d && a.Device >= 0 && len(s.Traces) > 1 || !strings.HasPrefix(a.Name, ptscopeStepPrefix) {
			continue
		}
		k, err := strconv.Atoi(a.Name[len(ptscopeStepPrefix):])
		if err != nil || k < 0 {
			continue
		}
		r := by[k]
		if r == nil {
			r = &stepRange{step: k, lo: -1, hi: -1, t0: -1, t1: -1}
			by[k] = r
			order = append(order, k)
		}
		switch a.Stage {
		case "START":
			r.lo, r.t0 = indexAt(times, a.TimeUS), a.TimeUS
		case "END":
			r.hi, r.t1 = indexAt(times, a.TimeUS), a.TimeUS
		}
	}
	sort.Ints(order)
	out := make([]stepRange, 0, len(order))
	for _, k := range order {
		out = append(out, *by[k])
	}
	// Optimizer phases by time (one that allocates nothing has no entry of
	// its own).
	for _, a := range s.Annotations {
		if a.Stage != "START" || !isOptimizerStep(a.Name) || a.Device != d && a.Device >= 0 && len(s.Traces) > 1 {
			continue
		}
		for i := range out {
			r := &out[i]
			if (r.t0 < 0 || r.t0 <= a.TimeUS) && (r.t1 < 0 || a.TimeUS <= r.t1) {
				r.optimizers++
				break
			}
		}
	}
	return out
}

// stepsFromRanges makes steps of ptscope run's step ranges: step N runs
// from the end of step N-1 (its own start, for the first) to its own end,
// so that what runs between two optimizer steps (loading the next batch)
// belongs to the step it feeds. What ran before the first step (set-up)
// and after the last (the end of the program) are partial pieces; so is a
// step that had not ended when the snapshot was taken (an OOM), and the
// first step when its start predates the trace. In a training run (one
// with optimizer phases), a step without one was cut short too: the
// companion closes the range of a step that an out-of-memory error or the
// end of the program interrupted, but no optimizer step ended it.
func stepsFromRanges(rs []stepRange, n int) []Step {
	training := false
	for _, r := range rs {
		training = training || r.optimizers > 0
	}
	var out []Step
	prev := -1 // end of the previous step
	for i, r := range rs {
		lo := prev
		if lo < 0 {
			lo = max(r.lo, 0)
			if lo > 0 {
				out = append(out, Step{Start: 0, End: lo, Partial: true, Name: "before step " + strconv.Itoa(r.step)})
			}
		}
		hi, partial := r.hi, r.lo < 0 && i == 0 || training && r.optimizers == 0
		if hi < 0 {
			hi, partial = n, true
		}
		if hi <= lo {
			continue // no entry in it (a step without allocations)
		}
		out = append(out, Step{Start: lo, End: hi, Partial: partial, Name: stepName(r.step)})
		prev = hi
		if hi >= n {
			break
		}
	}
	if prev >= 0 && prev < n && len(out) > 0 {
		out = append(out, Step{Start: prev, End: n, Partial: true, Name: "after " + out[len(out)-1].Name})
	}
	return out
}

func isOptimizerStep(name string) bool {
	return strings.HasPrefix(name, "Optimizer.step#") || phaseAnnotation(name) == PhaseOptimizer
}

func isZeroGrad(name string) bool { return strings.HasPrefix(name, "Optimizer.zero_grad#") }

func isProfilerStep(name string) bool { return strings.HasPrefix(name, "ProfilerStep#") }

// phaseAnnotation maps ptscope run's and users' own range names to phases.
func phaseAnnotation(name string) Phase {
	n := strings.ToLower(name)
	if i := strings.IndexByte(n, '#'); i >= 0 {
		n = n[:i]
	}
	n = strings.TrimPrefix(strings.TrimPrefix(n, "ptscope::"), "ptscope:")
	switch n {
	case "forward", "fwd":
		return PhaseForward
	case "backward", "bwd":
		return PhaseBackward
	case "optimizer", "optimizer_step", "optim":
		return PhaseOptimizer
	}
	return PhaseUnknown
}
