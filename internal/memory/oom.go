package memory

import (
	"github.com/ptscope/ptscope/internal/snapshot"
)

// OOM explains one out-of-memory event of the trace.
type OOM struct {
	EventIndex       int        `json:"event_index"`
	TimeUS           int64      `json:"time_us"`
	RequestedBytes   int64      `json:"requested_bytes"`
	DeviceFreeBytes  int64      `json:"device_free_bytes"`
	AllocatedBytes   int64      `json:"allocated_bytes"`
	ReservedBytes    int64      `json:"reserved_bytes"`
	CachedFreeBytes  int64      `json:"cached_free_bytes"`
	LargestFreeBytes int64      `json:"largest_free_bytes"` // -1 if unknown at that moment
	Verdict          string     `json:"verdict"`            // "capacity" or "fragmentation"
	Reason           string     `json:"reason"`
	Phase            string     `json:"phase"`
	Filled           []Group    `json:"filled_by"` // categories alive at the OOM
	Stack            []FrameOut `json:"frames"`    // where the failing allocation came from
}

// explainOOMs explains every oom entry of device d.
func explainOOMs(s *snapshot.Snapshot, d int, r *Replay, f *Fragmentation, o Options) []OOM {
	tr := s.Trace(d)
	var out []OOM
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
		x := OOM{EventIndex: i, TimeUS: tr.TimeUS[i], RequestedBytes: tr.Size[i], DeviceFreeBytes: int64(tr.Addr[i]),
			AllocatedBytes: t.Allocated[i], ReservedBytes: t.Reserved[i], LargestFreeBytes: -1}
		x.CachedFreeBytes = max(t.Reserved[i]-t.Active[i], 0)
		if i > lastAlloc {
			// Nothing was allocated after the OOM: the final segments are the
			// state the allocator failed in.
			x.LargestFreeBytes = f.LargestFree
		}
		need := RoundSize(x.RequestedBytes)
		switch {
		case x.DeviceFreeBytes+x.CachedFreeBytes < need:
			x.Verdict = "capacity"
			x.Reason = "the request is larger than everything free on the device plus all cached free blocks: it does not fit"
		default:
			x.Verdict = "fragmentation"
			x.Reason = "enough memory was free in total, but not in one piece: cached free blocks are scattered in segments that also hold live tensors"
		}
		x.Phase = "unknown"
		live := r.LiveAt(i)
		cats := map[string]*Group{}
		for _, a := range live {
			g := cats[a.Category.String()]
			if g == nil {
				g = &Group{Name: a.Category.String()}
				cats[g.Name] = g
			}
			g.Bytes += a.Size
			g.Count++
		}
		x.Filled = sortedGroups(cats, 0)
		for _, fr := range ShortStack(s, tr.Stack[i], o.StackDepth, o.FullStacks) {
			x.Stack = append(x.Stack, FrameOut{fr.Filename, fr.Line, fr.Name})
		}
		out = append(out, x)
	}
	return out
}
