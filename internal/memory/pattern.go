package memory

import (
	"sort"

	"github.com/ptscope/ptscope/internal/snapshot"
)

// Leak describes memory that accumulates step after step.
type Leak struct {
	BytesPerStep int64        `json:"bytes_per_step"`
	GrowthBytes  int64        `json:"growth_bytes"`
	Steps        int          `json:"steps"`
	Stacks       []StackGroup `json:"stacks"` // where the accumulating allocations come from
}

// Pattern thresholds.
const (
	leakMinPerStep  = 1 << 20 // 1 MiB per step
	leakMinFraction = 0.005   // and 0.5% of the end-of-step memory
	spikeFactor     = 1.25    // a step peak 25% above the median peak
	spikeMinBytes   = 64 << 20
)

// classifyPattern labels the step series stable, leak, spike or unknown.
func classifyPattern(s *snapshot.Snapshot, r *Replay, ph *Phases, o Options) (string, *Leak) {
	var full []Step
	for _, st := range ph.Steps {
		if !st.Partial {
			full = append(full, st)
		}
	}
	if len(full) < 3 {
		return "unknown", nil
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
		return "leak", &Leak{BytesPerStep: int64(slope), GrowthBytes: growth, Steps: len(full), Stacks: leakStacks(s, r, full, o)}
	}
	peaks := make([]int64, len(full))
	for i, st := range full {
		peaks[i] = st.Peak
	}
	sort.Slice(peaks, func(i, j int) bool { return peaks[i] < peaks[j] })
	med := peaks[len(peaks)/2]
	if top := peaks[len(peaks)-1]; float64(top) > spikeFactor*float64(med) && top-med > spikeMinBytes {
		return "spike", nil
	}
	return "stable", nil
}

// leakStacks groups allocations made during full steps and never freed.
func leakStacks(s *snapshot.Snapshot, r *Replay, full []Step, o Options) []StackGroup {
	lo, hi := full[0].Start, full[len(full)-1].End
	by := map[snapshot.StackID]*StackGroup{}
	cat := map[snapshot.StackID]Category{}
	for i := range r.Allocs {
		a := &r.Allocs[i]
		if a.FreeReqIdx >= 0 || a.AllocIdx < int32(lo) || a.AllocIdx >= int32(hi) {
			continue
		}
		g := by[a.Stack]
		if g == nil {
			g = &StackGroup{}
			by[a.Stack] = g
			cat[a.Stack] = a.Category
		}
		g.Bytes += a.Size
		g.Count++
	}
	ids := make([]snapshot.StackID, 0, len(by))
	for id := range by {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return by[ids[i]].Bytes > by[ids[j]].Bytes })
	var out []StackGroup
	for i, id := range ids {
		if i >= 5 {
			break
		}
		g := *by[id]
		g.Category = cat[id].String()
		for _, f := range ShortStack(s, id, o.StackDepth, o.FullStacks) {
			g.Frames = append(g.Frames, FrameOut{f.Filename, f.Line, f.Name})
		}
		out = append(out, g)
	}
	return out
}
