package memory

import (
	"sort"

	"github.com/ptscope/ptscope/internal/snapshot"
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
	for _, st := range a.ph.Steps {
		if !st.Partial {
			full = append(full, st)
		}
	}
	if len(full) < 3 {
		return PatternUnknown, nil
	}
	// Least-squares slope of end-of-step allocated bytes.
	n := float64(len(full))
	var sx, sy, sxx, sxy float64
	ups := 0
	for i, st := range full {
		x, y := float64(i), float64(st.EndAllocated)
		sx += x
		sy += y
		sxx += x * x
		sxy += x * y
		if i > 0 && st.EndAllocated > full[i-1].EndAllocated {
			ups++
		}
	}
	slope := (n*sxy - sx*sy) / (n*sxx - sx*sx)
	mean := sy / n
	growth := full[len(full)-1].EndAllocated - full[0].EndAllocated
	if slope > leakMinPerStep && slope > leakMinFraction*mean && float64(ups) >= 0.6*float64(len(full)-1) && growth > 0 {
		return PatternLeak, &Leak{PerStepBytes: int64(slope), GrowthBytes: growth, Steps: len(full), Stacks: a.leakStacks(full)}
	}
	peaks := make([]int64, len(full))
	for i, st := range full {
		peaks[i] = st.Peak
	}
	sort.Slice(peaks, func(i, j int) bool { return peaks[i] < peaks[j] })
	med := peaks[len(peaks)/2]
	if top := peaks[len(peaks)-1]; float64(top) > spikeFactor*float64(med) && top-med > spikeMinBytes {
		return PatternSpike, nil
	}
	return PatternStable, nil
}

// leakStacks groups allocations made during full steps and never freed.
func (a *analyzer) leakStacks(full []Step) []StackGroup {
	lo, hi := full[0].Start, full[len(full)-1].End
	type acc struct {
		g     StackGroup
		cats  [numCategories]int64
		first *Alloc
	}
	by := map[snapshot.StackID]*acc{}
	for i := range a.r.Allocs {
		al := &a.r.Allocs[i]
		if al.FreeReqIdx >= 0 || al.AllocIdx < int32(lo) || al.AllocIdx >= int32(hi) {
			continue
		}
		g := by[al.Stack]
		if g == nil {
			g = &acc{first: al}
			by[al.Stack] = g
		}
		g.g.Bytes += al.Size
		g.g.Count++
		g.cats[al.Category] += al.Size
	}
	ids := make([]snapshot.StackID, 0, len(by))
	for id := range by {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool {
		if by[ids[i]].g.Bytes != by[ids[j]].g.Bytes {
			return by[ids[i]].g.Bytes > by[ids[j]].g.Bytes
		}
		return ids[i] < ids[j]
	})
	out := make([]StackGroup, 0, len(ids))
	for _, id := range ids {
		g := by[id]
		for c := range g.cats {
			if g.cats[c] > g.cats[g.g.Category] {
				g.g.Category = Category(c)
			}
		}
		g.g.Source, _ = a.st.source(id)
		g.g.Stack = a.resultStack(id, g.first)
		out = append(out, g.g)
	}
	return out
}
