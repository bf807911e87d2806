package memory

import (
	"sort"

	"github.com/ptscope/ptscope/internal/snapshot"
	"github.com/ptscope/ptscope/internal/spillmem"
)

// Leak describes memory that accumulates step after step.
type Leak struct {
	PerStepBytes int64 `json:"per_step_bytes"` // least-squares growth of end-of-step memory
	GrowthBytes  int64 `json:"growth_bytes"`   // last full step's end minus the first's
	Steps        int   `json:"steps"`          // full steps measured
	// Stacks are where the allocations made in those steps and never
	// freed come from, largest first.
	Stacks []StackGroup `json:"stacks"`
}

// Pattern thresholds.
const (
	leakMinPerStep  = 1 << 20 // 1 MiB per step
	leakMinFraction = 0.005   // and 0.5% of the end-of-step memory
	spikeFactor     = 1.25    // a step peak 25% above the median peak
	spikeMinBytes   = 64 << 20
)

// pattern labels the step series stable, leak, spike or unknown.
func (a *analyzer) pattern() (Pattern, *Leak) {
	var full []Step
	var ends, peaks []int64
	for _, st := range a.ph.Steps {
		if !st.Partial {
			full = append(full, st)
			ends = append(ends, st.EndAllocated)
			peaks = append(peaks, st.Peak)
		}
	}
	p, l := classifySteps(ends, peaks)
	if l != nil {
		l.Stacks = a.leakStacks(full)
	}
	return p, l
}

// classifySteps labels a run's full steps from their end-of-step allocated
// bytes (ends, in step order) and the peaks known among them: leak when the
// least-squares growth of ends is above leakMinPerStep and leakMinFraction
// of their mean, with most steps ending higher than the one before; else
// spike when the highest peak stands well above the median one (three
// peaks at least); else stable. Fewer than 3 steps: unknown. A leak's
// Stacks are left to the caller.
func classifySteps(ends, peaks []int64) (Pattern, *Leak) {
	if len(ends) < 3 {
		return PatternUnknown, nil
	}
	// Least-squares slope of end-of-step allocated bytes.
	n := float64(len(ends))
	var sx, sy, sxx, sxy float64
	ups := 0
	for i, e := range ends {
		x, y := float64(i), float64(e)
		sx += x
		sy += y
		sxx += x * x
		sxy += x * y
		if i > 0 && e > ends[i-1] {
			ups++
		}
	}
	slope := (n*sxy - sx*sy) / (n*sxx - sx*sx)
	mean := sy / n
	growth := ends[len(ends)-1] - ends[0]
	if slope > leakMinPerStep && slope > leakMinFraction*mean && float64(ups) >= 0.6*float64(len(ends)-1) && growth > 0 {
		return PatternLeak, &Leak{PerStepBytes: int64(slope), GrowthBytes: growth, Steps: len(ends)}
	}
	if len(peaks) < 3 {
		return PatternStable, nil
	}
	peaks = append([]int64(nil), peaks...)
	sort.Slice(peaks, func(i, j int) bool { return peaks[i] < peaks[j] })
	med := peaks[len(peaks)/2]
	if top := peaks[len(peaks)-1]; float64(top) > spikeFactor*float64(med) && top-med > spikeMinBytes {
		return PatternSpike, nil
	}
	return PatternStable, nil
}

// leakStacks groups the allocations made during full steps that outlive
// the last of them, by stack, largest first: what accumulates. A stack
// whose surviving allocations were all made in one step is left out: a
// one-time allocation (AdamW's state, made in the first step) is not a
// leak. Allocations made in steps without stacks (ptscope run records them
// in windows of steps) join the stack of a stacked one of the same size,
// category and recorded module path: the same allocation site in another
// step.
func (a *analyzer) leakStacks(full []Step) []StackGroup {
	lo, hi := full[0].Start, full[len(full)-1].End
	type acc struct {
		g     StackGroup
		first *Alloc
		steps map[int32]bool
	}
	type site struct {
		size int64
		meta uint32
		cat  Category
	}
	by := map[stackKey]*acc{}
	add := func(id snapshot.StackID, al *Alloc) {
		k := stackKey{id, al.Category}
		g := by[k]
		if g == nil {
			g = &acc{first: al, steps: map[int32]bool{}}
			g.g.Category = al.Category
			by[k] = g
		}
		g.g.Bytes += al.Size
		g.g.Count++
		g.steps[a.ph.StepOf[al.AllocIdx]] = true
	}
	framed := map[site]snapshot.StackID{} // a stacked site of each (size, module)
	// ptscope run records module paths only where it records stacks (its
	// module hooks run in those steps), so a bare allocation without a path
	// joins the stacked site of its size and category when only one stack
	// has them (meta 0: any path)
	framedAny := map[site]snapshot.StackID{}
	var bare []*Alloc
	for i := range a.r.Allocs {
		spillmem.Poll(a.r.arena, i)
		al := &a.r.Allocs[i]
		if al.AllocIdx < int32(lo) || al.AllocIdx >= int32(hi) || al.FreeReqIdx >= 0 && al.FreeReqIdx < int32(hi) {
			continue
		}
		if len(a.s.Stacks[al.Stack]) == 0 {
			bare = append(bare, al)
			continue
		}
		if k := (site{al.Size, al.Metadata, al.Category}); al.Metadata != 0 {
			if _, ok := framed[k]; !ok {
				framed[k] = al.Stack
			}
		}
		if id, ok := framedAny[site{al.Size, 0, al.Category}]; !ok {
			framedAny[site{al.Size, 0, al.Category}] = al.Stack
		} else if id != al.Stack {
			framedAny[site{al.Size, 0, al.Category}] = 0 // two stacks: ambiguous (stack 0 has no frames)
		}
		add(al.Stack, al)
	}
	// Bare allocations of no stacked site accumulate when their own site
	// (size, category, module path) recurs in two steps or more.
	siteSteps := map[site]map[int32]bool{}
	for _, al := range bare {
		k := site{al.Size, al.Metadata, al.Category}
		if siteSteps[k] == nil {
			siteSteps[k] = map[int32]bool{}
		}
		siteSteps[k][a.ph.StepOf[al.AllocIdx]] = true
	}
	recurring := map[snapshot.StackID]bool{}
	for _, al := range bare {
		k := site{al.Size, al.Metadata, al.Category}
		if id, ok := framed[k]; ok && al.Metadata != 0 {
			add(id, al)
		} else if id, ok := framedAny[site{al.Size, 0, al.Category}]; ok && al.Metadata == 0 && id != 0 {
			add(id, al)
		} else if len(siteSteps[k]) >= 2 {
			add(al.Stack, al)
			recurring[al.Stack] = true
		}
	}
	ids := make([]stackKey, 0, len(by))
	for k, g := range by {
		if len(g.steps) >= 2 && (len(a.s.Stacks[k.id]) > 0 || recurring[k.id]) {
			ids = append(ids, k)
		}
	}
	sortStackKeys(ids, func(k stackKey) int64 { return by[k].g.Bytes })
	out := make([]StackGroup, 0, len(ids))
	for _, k := range ids {
		g := by[k]
		g.g.Source, _ = a.st.source(k.id)
		g.g.Stack = a.resultStack(k.id, g.first)
		out = append(out, g.g)
	}
	return out
}
