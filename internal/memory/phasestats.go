package memory

import "github.com/ptscope/ptscope/internal/spillmem"

// PhaseStat is one phase of one step (forward, backward, optimizer,
// zero_grad or other): allocated memory before its first entry and after
// its last, and its peak. A phase whose entries the labels split into
// several runs within a step is one row spanning them.
type PhaseStat struct {
	Phase                Phase `json:"phase"`
	Step                 int   `json:"step"` // index into Steps; -1 outside any step
	StartIndex           int   `json:"start_index"`
	EndIndex             int   `json:"end_index"` // entries [start_index, end_index)
	DurationNS           int64 `json:"duration_ns"`
	AllocatedBeforeBytes int64 `json:"allocated_before_bytes"`
	AllocatedAfterBytes  int64 `json:"allocated_after_bytes"`
	PeakBytes            int64 `json:"peak_bytes"`
}

// phaseStats summarises every (step, phase) of the trace, in order of each
// phase's first entry.
func (a *analyzer) phaseStats() []PhaseStat {
	out := []PhaseStat{}
	of, alloc := a.ph.Of, a.r.Timeline.Allocated
	type key struct {
		step  int32
		phase Phase
	}
	at := map[key]int{}
	lo := 0
	for run := 0; lo < len(of); run++ {
		spillmem.PollSparse(a.r.arena, run)
		hi := lo + 1
		// a run ends where the phase or the step changes: a forward-only
		// recording is one run of forward entries over all its steps
		for hi < len(of) && of[hi] == of[lo] && a.ph.StepOf[hi] == a.ph.StepOf[lo] {
			hi++
		}
		if of[lo] != PhaseUnknown {
			step := a.ph.StepOf[lo]
			before := a.r.Baseline.Allocated
			if lo > 0 {
				before = alloc[lo-1]
			}
			peak := alloc[lo]
			for _, v := range alloc[lo:hi] {
				peak = max(peak, v)
			}
			k := key{step, of[lo]}
			if i, ok := at[k]; ok {
				s := &out[i]
				s.EndIndex, s.AllocatedAfterBytes, s.PeakBytes = hi, alloc[hi-1], max(s.PeakBytes, peak)
			} else {
				at[k] = len(out)
				out = append(out, PhaseStat{Phase: of[lo], Step: int(step), StartIndex: lo, EndIndex: hi,
					AllocatedBeforeBytes: before, AllocatedAfterBytes: alloc[hi-1], PeakBytes: peak})
			}
		}
		lo = hi
	}
	for i := range out {
		spillmem.PollSparse(a.r.arena, i)
		s := &out[i]
		s.DurationNS = a.timeNS(s.EndIndex-1) - a.timeNS(s.StartIndex)
	}
	return out
}
