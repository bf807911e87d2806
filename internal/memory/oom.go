package memory

import (
	"github.com/ptscope/ptscope/internal/snapshot"
)

// OOM explains one out-of-memory event of the trace.
type OOM struct {
	EventIndex       int             `json:"event_index"`
	TimeNS           int64           `json:"time_ns"`
	RequestedBytes   int64           `json:"requested_bytes"`
	DeviceFreeBytes  int64           `json:"device_free_bytes"`
	AllocatedBytes   int64           `json:"allocated_bytes"`
	ReservedBytes    int64           `json:"reserved_bytes"`
	CachedFreeBytes  int64           `json:"cached_free_bytes"`
	LargestFreeBytes int64           `json:"largest_free_bytes"` // -1 if unknown at that moment
	Verdict          Verdict         `json:"verdict"`
	Phase            Phase           `json:"phase"`
	Step             int             `json:"step"`      // index into Steps; -1 outside any step
	Filled           []CategoryGroup `json:"filled_by"` // categories alive at the OOM
	Stack                            // where the failing allocation came from
}

// ooms explains every oom entry of the device.
func (a *analyzer) ooms() []OOM {
	tr, r := a.tr, a.r
	out := []OOM{}
	lastAlloc := -1
	for i := tr.Len() - 1; i >= 0; i-- {
		if tr.Action[i] == snapshot.ActionAlloc || tr.Action[i] == snapshot.ActionSegmentAlloc {
			lastAlloc = i
			break
		}
	}
	t := &r.Timeline
	for i := 0; i < tr.Len(); i++ {
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
		if x.DeviceFreeBytes+x.CachedFreeBytes < RoundSize(x.RequestedBytes) {
			x.Verdict = VerdictCapacity
		} else {
			x.Verdict = VerdictFragmentation
		}
		var cats [numCategories]CategoryGroup
		for _, al := range r.LiveAt(i) {
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
		x.Stack = a.resultStack(tr.Stack[i], &Alloc{AllocIdx: int32(i)})
		out = append(out, x)
	}
	return out
}

// sortCategories orders category groups largest first.
func sortCategories(g []CategoryGroup) {
	for i := 1; i < len(g); i++ {
		for j := i; j > 0 && (g[j].Bytes > g[j-1].Bytes || g[j].Bytes == g[j-1].Bytes && g[j].Category < g[j-1].Category); j-- {
			g[j], g[j-1] = g[j-1], g[j]
		}
	}
}
