package memory

import (
	"fmt"

	"github.com/ptscope/ptscope/internal/snapshot"
	"github.com/ptscope/ptscope/internal/spillmem"
	"github.com/ptscope/ptscope/internal/units"
)

// OOM explains one out-of-memory event of the trace.
type OOM struct {
	EventIndex       int   `json:"event_index"`
	TimeNS           int64 `json:"time_ns"`
	RequestedBytes   int64 `json:"requested_bytes"`
	DeviceFreeBytes  int64 `json:"device_free_bytes"`
	AllocatedBytes   int64 `json:"allocated_bytes"`
	ReservedBytes    int64 `json:"reserved_bytes"`
	CachedFreeBytes  int64 `json:"cached_free_bytes"`
	LargestFreeBytes int64 `json:"largest_free_bytes"` // -1 if unknown at that moment
	// AllowedBytes is what the allocator could hold then: the process's
	// own limit (torch.cuda.set_per_process_memory_fraction) when Limited,
	// else what it reserved plus what was free on the device.
	AllowedBytes int64           `json:"allowed_bytes"`
	Limited      bool            `json:"limited"`
	Verdict      Verdict         `json:"verdict"`
	Phase        Phase           `json:"phase"`
	Step         int             `json:"step"`      // index into Steps; -1 outside any step
	Filled       []CategoryGroup `json:"filled_by"` // categories alive at the OOM
	// PhaseStartAllocatedBytes is what was allocated as the phase the
	// error came in began (a ptscope run bundle's phases; 0: unknown):
	// AllocatedBytes minus it is what that phase allocated before failing.
	PhaseStartAllocatedBytes int64 `json:"phase_start_allocated_bytes,omitempty"`
	// Caught is set when the program went on after the error (a ptscope
	// run bundle's phase began after it): it caught the error, as a
	// batch-size finder or a loop that skips the batch does.
	Caught bool `json:"caught,omitempty"`
	Stack       // where the failing allocation came from
}

// ooms explains every oom entry of the device.
func (a *analyzer) ooms() []OOM {
	tr, r := a.tr, a.r
	out := []OOM{}
	lastAlloc := -1
	for i := tr.Len() - 1; i >= 0; i-- {
		spillmem.Poll(a.r.arena, i)
		if tr.Action[i] == snapshot.ActionAlloc || tr.Action[i] == snapshot.ActionSegmentAlloc {
			lastAlloc = i
			break
		}
	}
	t := &r.Timeline
	for i := 0; i < tr.Len(); i++ {
		spillmem.Poll(a.r.arena, i)
		if tr.Action[i] != snapshot.ActionOOM {
			continue
		}
		x := OOM{EventIndex: i, TimeNS: a.timeNS(i), RequestedBytes: tr.Size[i], DeviceFreeBytes: int64(tr.Addr[i]),
			AllocatedBytes: t.Allocated[i], ReservedBytes: t.Reserved[i], LargestFreeBytes: -1, Phase: a.ph.Of[i], Step: -1}
		if k := a.ph.StepOf[i]; k >= 0 {
			x.Step = int(k)
		}
		x.CachedFreeBytes = max(t.Reserved[i]-t.Active[i], 0)
		if i > lastAlloc {
			// Nothing was allocated after the OOM: the final segments are the
			// state the allocator failed in.
			for _, g := range a.s.DeviceSegments(r.Device) {
				for _, b := range g.Blocks {
					if b.State == snapshot.BlockInactive {
						x.LargestFreeBytes = max(x.LargestFreeBytes, b.Size)
					}
				}
			}
			x.LargestFreeBytes = max(x.LargestFreeBytes, 0)
		}
		a.judgeOOM(&x, r.LiveAt(i))
		x.Stack = a.resultStack(tr.Stack[i], &Alloc{AllocIdx: int32(i)})
		out = append(out, x)
	}
	return out
}

// judgeOOM completes an OOM whose state is known: what the allocator
// could have held (the process's own limit where one is set), the verdict,
// and what the allocations alive at the error were, by category.
func (a *analyzer) judgeOOM(x *OOM, live []*Alloc) {
	if x.TimeNS > 0 {
		x.PhaseStartAllocatedBytes = phaseStartAt(a.o.PhaseStarts, x.TimeNS)
		x.Caught = WentOn(a.o.PhaseStarts, x.TimeNS)
	}
	x.AllowedBytes = x.ReservedBytes + x.DeviceFreeBytes
	if l := a.o.AllowedBytes; l > 0 && l < x.AllowedBytes {
		x.AllowedBytes, x.Limited = l, true
	}
	x.Verdict = verdict(*x)
	var cats [numCategories]CategoryGroup
	for _, al := range live {
		cats[al.Category].Bytes += al.Size
		cats[al.Category].Count++
	}
	x.Filled = []CategoryGroup{}
	for c := range cats {
		if cats[c].Count > 0 {
			cats[c].Category = Category(c)
			x.Filled = append(x.Filled, cats[c])
		}
	}
	sortCategories(x.Filled)
}

// atLimit is the share of what the allocator could hold above which live
// tensors and the request leave too little for fragmentation to be the
// story: packing the cached blocks perfectly would win a few percent, and the
// allocations after this one would run out anyway.
const atLimit = 0.95

// verdict says why an allocation failed: capacity when the request does not
// fit in what the allocator could still get (free under its limit plus its
// cached free blocks), or when live tensors and the request take more than
// atLimit of what it could hold; fragmentation when enough was free, but
// not in one piece.
func verdict(x OOM) Verdict {
	req := RoundSize(x.RequestedBytes)
	free := x.AllowedBytes - x.ReservedBytes
	if x.DeviceFreeBytes < free {
		free = x.DeviceFreeBytes
	}
	switch {
	case max(free, 0)+x.CachedFreeBytes < req:
		return VerdictCapacity
	case x.AllowedBytes > 0 && float64(x.AllocatedBytes+req) > atLimit*float64(x.AllowedBytes):
		return VerdictCapacity
	}
	return VerdictFragmentation
}

// sortCategories orders category groups largest first.
func sortCategories(g []CategoryGroup) {
	for i := 1; i < len(g); i++ {
		for j := i; j > 0 && (g[j].Bytes > g[j-1].Bytes || g[j].Bytes == g[j-1].Bytes && g[j].Category < g[j-1].Category); j-- {
			g[j], g[j-1] = g[j-1], g[j]
		}
	}
}

// WentOn reports whether a program went on after an out-of-memory error
// at time t: one of its phases began after it, so it caught the error.
func WentOn(phases []PhaseStart, t int64) bool {
	for _, p := range phases {
		if p.StartNS > t {
			return true
		}
	}
	return false
}

// phaseStartAt is the allocated bytes the innermost phase holding time t
// began with (the latest to start of those whose span holds t), 0 when no
// phase holds it.
func phaseStartAt(phases []PhaseStart, t int64) int64 {
	var best *PhaseStart
	for i := range phases {
		p := &phases[i]
		if p.StartNS <= t && t <= p.EndNS && (best == nil || p.StartNS >= best.StartNS) {
			best = p
		}
	}
	if best == nil {
		return 0
	}
	return best.AllocatedBytes
}

// OOMPhaseGrowth says what the phase an out-of-memory error came in had
// allocated before it failed ("The forward of step 6 allocated 5.16 GiB of
// the 5.81 GiB, from 665 MiB as it began"), for a bundle whose phases say; "" when
// unknown or when the phase freed more than it allocated. steps are the
// result's, which x.Step indexes.
func OOMPhaseGrowth(x *OOM, steps []StepRow) string {
	start := x.PhaseStartAllocatedBytes
	if start <= 0 || x.AllocatedBytes <= start {
		return ""
	}
	what := "The phase"
	if x.Phase != PhaseUnknown {
		what = "The " + x.Phase.String()
	}
	if x.Step >= 0 && x.Step < len(steps) {
		what += " of " + steps[x.Step].Name
	}
	return fmt.Sprintf("%s allocated %s of the %s, from %s as it began", what, units.Bytes(x.AllocatedBytes-start), units.Bytes(x.AllocatedBytes), units.Bytes(start))
}
