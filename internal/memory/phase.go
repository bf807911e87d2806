package memory

import (
	"sort"
	"strings"

	"github.com/ptscope/ptscope/internal/snapshot"
	"github.com/ptscope/ptscope/internal/spillmem"
)

// Phase is what the program was doing at a trace entry.
type Phase uint8

// Phases of a training iteration.
const (
	PhaseUnknown Phase = iota
	PhaseForward
	PhaseBackward
	PhaseOptimizer
	PhaseZeroGrad
	PhaseOther
)

var phaseNames = [...]string{"unknown", "forward", "backward", "optimizer", "zero_grad", "other"}

func (p Phase) String() string { return phaseNames[p] }

// Step is one training (or inference) iteration of the trace.
type Step struct {
	Index        int    // 0-based in the trace
	Name         string // e.g. "ProfilerStep#4" or "step 2"
	Start, End   int    // entries [Start, End)
	StartUS      int64
	EndUS        int64
	Peak         int64 // highest allocated bytes within the step
	PeakIdx      int
	EndAllocated int64 // allocated bytes after the step's last entry
	Partial      bool  // cut by the start or the end of the recording
}

// Phases labels every entry of a trace with a phase and splits it into steps.
type Phases struct {
	Of      []Phase      // per entry
	classes []frameClass // per stack: what its frames show (shared with categorize)
	kinds   []FrameKind  // per frame
	StepOf  []int32      // per entry: index into Steps, -1 outside any step
	Steps   []Step
	Source  StepSource // how the steps were found

	arena *spillmem.Arena // the snapshot's, where Of and StepOf are
}

// frameClass tells what a stack shows about the phase.
type frameClass uint8

const (
	fcNone     frameClass = iota // no frames
	fcForward                    // inside a module forward
	fcBackward                   // autograd backward entry points
	fcOptim                      // torch.optim
	fcOther
)

// classifyStack tells what a stack shows about its phase from its
// allocating frames (allocating, see): the innermost frame that says
// forward, backward or optimizer decides. Outer frames say less: the
// forward and backward that Lightning runs inside optimizer.step(closure)
// are not optimizer work.
func classifyStack(s *snapshot.Snapshot, id snapshot.StackID, kinds []FrameKind) frameClass {
	ids := s.Stacks[id]
	if len(ids) == 0 {
		return fcNone
	}
	for _, f := range allocating(ids, kinds) {
		fr := &s.Frames[f]
		switch {
		case strings.Contains(fr.Filename, "torch/autograd/") && (fr.Name == "backward" || fr.Name == "_make_grads" || fr.Name == "_engine_run_backward" || fr.Name == "grad"):
			return fcBackward
		case strings.HasSuffix(fr.Filename, "torch/_tensor.py") && fr.Name == "backward":
			return fcBackward
		case strings.Contains(fr.Filename, "torch/optim/"):
			return fcOptim
		case fr.Name == "forward" || fr.Name == "_call_impl":
			return fcForward
		case strings.Contains(fr.Name, "autograd::engine") || strings.Contains(fr.Name, "Engine::evaluate_function"):
			return fcBackward
		}
	}
	return fcOther
}

// allocating returns a stack's allocating frames: the innermost ones up to
// and including the first frame of the user's own code (all of them when
// there is none). What the user's code was called from (a training loop
// inside optimizer.step(closure), a framework's hooks) did not allocate.
func allocating(ids []snapshot.FrameID, kinds []FrameKind) []snapshot.FrameID {
	for i, f := range ids {
		if kinds[f] == FrameUser {
			return ids[:i+1]
		}
	}
	return ids
}

// frameKinds classifies every frame of s.
func frameKinds(s *snapshot.Snapshot) []FrameKind {
	k := make([]FrameKind, len(s.Frames))
	for i := range s.Frames {
		k[i] = frameKind(&s.Frames[i])
	}
	return k
}

// tracePhases finds steps and phases in device d's trace. It needs only the
// trace, so Analyze runs it while the trace is replayed; measure then gives
// each step its peak from the replay.
func tracePhases(s *snapshot.Snapshot, d int) *Phases {
	tr := s.Trace(d)
	n := tr.Len()
	p := &Phases{Of: spillmem.Make[Phase](s.Arena(), n), Source: StepsNone, arena: s.Arena()}
	// Every stack is classified, also without a trace: the blocks of the
	// final segments carry stacks too, and categorize reads them.
	classes := make([]frameClass, len(s.Stacks))
	kinds := frameKinds(s)
	for i := range s.Stacks {
		classes[i] = classifyStack(s, snapshot.StackID(i), kinds)
	}
	p.kinds = kinds
	p.classes = classes
	if n == 0 {
		p.StepOf = []int32{}
		return p
	}
	times := monotonic(tr.TimeUS, s.Arena())
	ivs := []interval(nil)
	if tr.HasTime {
		ivs = annotationIntervals(s, d, times)
		if rs := ptscopeSteps(s, d, times); len(rs) > 0 {
			p.Steps = stepsFromRanges(rs, n)
			p.Source = StepsPtscopeStep
		}
	}
	if p.Source == StepsNone {
		b := findStepBounds(p, tr, ivs, classes)
		p.addSteps(b, n)
	}
	for i := range p.Steps {
		spillmem.PollSparse(s.Arena(), i)
		st := &p.Steps[i]
		st.Index = i
		if st.Name == "" {
			st.Name = stepName(i)
		}
		st.StartUS, st.EndUS = tr.TimeUS[st.Start], tr.TimeUS[st.End-1]
	}
	p.annotate(ivs, tr, classes, n)
	p.indexSteps(n)
	segments := p.Steps
	if len(segments) == 0 {
		segments = []Step{{Start: 0, End: n}}
	}
	for k, st := range segments {
		spillmem.PollSparse(s.Arena(), k)
		labelStep(p.Of[st.Start:st.End], tr, classes, st.Start)
	}
	return p
}

// stepBounds are the exclusive ends of a trace's steps, sorted; names
// (when given) name the steps in order, and firstPartial says that what
// comes before the first bound is not a whole step.
type stepBounds struct {
	ends         []int
	names        []string
	firstPartial bool
}

// findStepBounds finds the steps of a trace without ptscope's own step
// ranges, trying in turn: the profiler's ProfilerStep#N ranges, ptscope
// run's forward ranges (each forward starts a step), Optimizer.step ranges
// or the optimizer's frames (each step ends with its zero_grad), and a
// repeating allocation pattern. It sets p.Source to the rule that found them.
func findStepBounds(p *Phases, tr *snapshot.Trace, ivs []interval, classes []frameClass) stepBounds {
	n := tr.Len()
	var b stepBounds
	for _, iv := range ivs {
		if isProfilerStep(iv.name) && !iv.open {
			b.ends = append(b.ends, iv.hi)
			b.names = append(b.names, iv.name)
		}
	}
	if len(b.ends) > 0 {
		p.Source = StepsProfilerStep
		sort.Ints(b.ends)
		return b
	}
	for _, iv := range ivs {
		if phaseAnnotation(iv.name) == PhaseForward && strings.HasPrefix(iv.name, "ptscope:") && iv.lo > 0 {
			b.ends = append(b.ends, iv.lo)
		}
	}
	if len(b.ends) > 0 {
		p.Source = StepsPtscopeRun
		b.firstPartial = true // what ran before the first forward
		if n-b.ends[len(b.ends)-1] > 0 {
			// The last forward's step runs to the end of the trace.
			b.ends = append(b.ends, n)
		}
		sort.Ints(b.ends)
		return b
	}
	var opt []interval
	for _, iv := range ivs {
		if isOptimizerStep(iv.name) && !iv.open {
			opt = append(opt, iv)
		}
	}
	if len(opt) > 0 {
		p.Source = StepsOptimizerStep
	} else if opt = optimizerRuns(tr, classes); len(opt) > 0 {
		p.Source = StepsOptimizerFrames
	}
	for _, o := range opt {
		end := o.hi
		// A zero_grad right after the step belongs to it.
		for _, iv := range ivs {
			if isZeroGrad(iv.name) && iv.lo >= o.hi && iv.lo <= o.hi+4 {
				end = max(end, iv.hi)
			}
		}
		b.ends = append(b.ends, end)
	}
	if len(b.ends) == 0 {
		if per := repeatingPeriod(tr); per.period > 0 && freesMost(tr, per) {
			p.Source = StepsRepeating
			for e := per.first; e < n; e += per.period {
				if e > 0 {
					b.ends = append(b.ends, e)
				}
			}
			if last := b.ends[len(b.ends)-1]; n-last >= per.period*9/10 {
				b.ends = append(b.ends, n) // the tail is a whole iteration
			}
			b.firstPartial = per.first > 0
		}
	}
	sort.Ints(b.ends)
	return b
}

// addSteps makes p's steps from b; the pieces before the first bound and
// after the last are partial.
func (p *Phases) addSteps(b stepBounds, n int) {
	start := 0
	for i, e := range b.ends {
		if e <= start || e > n {
			continue
		}
		st := Step{Start: start, End: e, Partial: i == 0 && b.firstPartial}
		if i < len(b.names) {
			st.Name = b.names[i]
		}
		p.Steps = append(p.Steps, st)
		start = e
	}
	if start < n && len(b.ends) > 0 {
		p.Steps = append(p.Steps, Step{Start: start, End: n, Partial: true})
	}
}

// annotate gives the entries inside annotated ranges their phase (the
// frames label the rest, per step).
func (p *Phases) annotate(ivs []interval, tr *snapshot.Trace, classes []frameClass, n int) {
	for _, iv := range ivs {
		ph := phaseAnnotation(iv.name)
		switch {
		case isOptimizerStep(iv.name):
			ph = PhaseOptimizer
		case isZeroGrad(iv.name):
			ph = PhaseZeroGrad
		}
		if ph == PhaseUnknown {
			continue
		}
		lo := iv.lo
		if strings.HasPrefix(iv.name, "Optimizer.step#") {
			// optimizer.step(closure) runs the closure's forward and
			// backward first: those entries are left to the frames.
			lo = max(lo, closureEnd(tr, classes, iv.lo, min(iv.hi, n)))
		}
		for j := lo; j < iv.hi && j < n; j++ {
			p.Of[j] = ph
		}
	}
}

// indexSteps fills p.StepOf: each entry's step, -1 outside every step.
func (p *Phases) indexSteps(n int) {
	p.StepOf = spillmem.Make[int32](p.arena, n)
	for i := range p.StepOf {
		spillmem.Poll(p.arena, i)
		p.StepOf[i] = -1
	}
	for k, st := range p.Steps {
		for j := st.Start; j < st.End; j++ {
			spillmem.Poll(p.arena, j)
			p.StepOf[j] = int32(k)
		}
	}
}

// closureEnd returns where an optimizer step's own work begins in entries
// [lo, hi) of an Optimizer.step range: after the last allocation that is
// not the optimizer's when the range holds a forward or backward
// allocation (a closure ran in it), else lo.
func closureEnd(tr *snapshot.Trace, classes []frameClass, lo, hi int) int {
	last, closure := -1, false
	for i := lo; i < hi; i++ {
		spillmem.Poll(tr.Arena(), i)
		if tr.Action[i] != snapshot.ActionAlloc {
			continue
		}
		switch classes[tr.Stack[i]] {
		case fcOptim:
			continue
		case fcForward, fcBackward:
			closure = true
		}
		last = i
	}
	if !closure {
		return lo
	}
	return last + 1
}

// measure completes the steps from the replay: each one's peak and end,
// and whether the first one was cut by a truncated recording.
func (p *Phases) measure(r *Replay) {
	if len(p.Steps) > 0 && p.Source != StepsProfilerStep && r.Unmatched > 0 {
		p.Steps[0].Partial = p.Steps[0].Partial || r.Truncated
	}
	alloc := r.Timeline.Allocated
	for i := range p.Steps {
		spillmem.PollSparse(r.arena, i)
		st := &p.Steps[i]
		st.PeakIdx = st.Start
		for j := st.Start; j < st.End; j++ {
			spillmem.Poll(r.arena, j)
			if alloc[j] > alloc[st.PeakIdx] {
				st.PeakIdx = j
			}
		}
		st.Peak = alloc[st.PeakIdx]
		st.EndAllocated = alloc[st.End-1]
	}
}

// labelStep fills unlabelled entries of one step: forward until the first
// sign of backward, backward until the optimizer, other after it.
func labelStep(of []Phase, tr *snapshot.Trace, classes []frameClass, base int) {
	// Without a single module forward in the step (a plain script), the
	// phases are unknown rather than forward.
	state := PhaseUnknown
	for k := range of {
		spillmem.Poll(tr.Arena(), base+k)
		if tr.Action[base+k] == snapshot.ActionAlloc && classes[tr.Stack[base+k]] == fcForward {
			state = PhaseForward
			break
		}
	}
	sawForward := false
	for k := range of {
		i := base + k
		spillmem.Poll(tr.Arena(), i)
		if of[k] == PhaseOptimizer || of[k] == PhaseZeroGrad {
			state = PhaseOther
			continue
		}
		if of[k] != PhaseUnknown {
			state = of[k]
			continue
		}
		if tr.Action[i] == snapshot.ActionAlloc {
			switch classes[tr.Stack[i]] {
			case fcForward:
				sawForward = true
			case fcBackward:
				if state == PhaseForward {
					state = PhaseBackward
				}
			case fcNone:
				// Backward allocations have no Python frames (autograd
				// threads) unless C++ stacks were recorded.
				if state == PhaseForward && sawForward {
					state = PhaseBackward
				}
			case fcOptim:
				state = PhaseOptimizer
				of[k] = PhaseOptimizer
				continue
			}
		}
		of[k] = state
	}
}

// optimizerRuns finds runs of entries allocated from torch.optim frames.
func optimizerRuns(tr *snapshot.Trace, classes []frameClass) []interval {
	var out []interval
	lo, last := -1, -1
	for i := 0; i < tr.Len(); i++ {
		spillmem.Poll(tr.Arena(), i)
		if tr.Action[i] != snapshot.ActionAlloc {
			continue
		}
		if classes[tr.Stack[i]] == fcOptim {
			if lo < 0 {
				lo = i
			}
			last = i
		} else if classes[tr.Stack[i]] == fcForward && lo >= 0 {
			out = append(out, interval{name: "optimizer", lo: lo, hi: last + 1})
			lo = -1
		}
	}
	if lo >= 0 {
		out = append(out, interval{name: "optimizer", lo: lo, hi: last + 1})
	}
	// The run ends where the last optimizer allocation is freed.
	for k := range out {
		for i := out[k].hi; i < tr.Len() && i < out[k].hi+100000; i++ {
			spillmem.Poll(tr.Arena(), i)
			if tr.Action[i] == snapshot.ActionAlloc && classes[tr.Stack[i]] != fcOptim {
				out[k].hi = i
				break
			}
		}
	}
	return out
}

type period struct{ first, period int }

// repeatingPeriod finds the iteration length of a trace without markers:
// the alloc signature (stack, size) that repeats at the most regular and
// longest interval, at least 3 times.
func repeatingPeriod(tr *snapshot.Trace) period {
	type sig struct {
		stack snapshot.StackID
		size  int64
	}
	occ := map[sig][]int{}
	for i := 0; i < tr.Len(); i++ {
		spillmem.Poll(tr.Arena(), i)
		if tr.Action[i] == snapshot.ActionAlloc {
			k := sig{tr.Stack[i], tr.Size[i]}
			if len(occ[k]) < 10000 {
				occ[k] = append(occ[k], i)
			}
		}
	}
	best := period{}
	for _, ix := range occ {
		if len(ix) < 3 || len(ix)*8 > tr.Len() {
			continue
		}
		var sum, sq float64
		for j := 1; j < len(ix); j++ {
			g := float64(ix[j] - ix[j-1])
			sum += g
			sq += g * g
		}
		m := sum / float64(len(ix)-1)
		v := sq/float64(len(ix)-1) - m*m
		if m < 8 || v > 0.0025*m*m { // gaps must agree within ~5%
			continue
		}
		// The longest period wins; among equal ones, the earliest start
		// (the iteration's first allocation).
		switch {
		case m > 1.02*float64(best.period):
			best = period{ix[0], int(m + 0.5)}
		case m >= 0.98*float64(best.period) && ix[0] < best.first:
			best = period{ix[0], best.period}
		}
	}
	return best
}

// monotonic returns t made non-decreasing (a running maximum); t itself
// when it already is, as allocator traces usually are.
func monotonic(t []int64, arena *spillmem.Arena) []int64 {
	sorted := true
	for i := 1; i < len(t) && sorted; i++ {
		spillmem.Poll(arena, i)
		sorted = t[i] >= t[i-1]
	}
	if sorted {
		return t
	}
	out := spillmem.Make[int64](arena, len(t))
	var m int64
	for i, v := range t {
		spillmem.Poll(arena, i)
		m = max(m, v)
		out[i] = m
	}
	return out
}

// freesMost reports whether iterations of the repeating pattern free at least
// half of what they allocate, as training or inference iterations do. The
// layers of one forward pass also repeat, but keep their activations: taking
// them for iterations would report a leak.
func freesMost(tr *snapshot.Trace, per period) bool {
	var allocs, frees int
	for i := per.first; i < tr.Len(); i++ {
		spillmem.Poll(tr.Arena(), i)
		switch tr.Action[i] {
		case snapshot.ActionAlloc:
			allocs++
		case snapshot.ActionFreeRequested:
			frees++
		}
	}
	return allocs > 0 && 2*frees >= allocs
}
