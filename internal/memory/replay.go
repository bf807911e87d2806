// Package memory analyses allocator snapshots: it replays a device's trace
// into timelines, finds the peak and what was alive then, attributes memory
// to stacks, source locations, categories and keyword groups, splits the run
// into steps, classifies the pattern (stable, leak, spike), measures
// fragmentation, explains out-of-memory events and turns all of it into
// findings. Every function here is pure: it reads a snapshot.Snapshot and
// returns result structs; nothing parses or prints.
package memory

import (
	"fmt"
	"sort"

	"github.com/ptscope/ptscope/internal/snapshot"
	"github.com/ptscope/ptscope/internal/spillmem"
)

// Origin says how an allocation became known.
type Origin uint8

// Origins.
const (
	FromTrace       Origin = iota // alloc event in the trace
	BeforeUnmatched               // freed in the trace without a recorded alloc
	BeforeGhost                   // alive in the final segments, never seen in the trace
)

// Alloc is one allocation's life on a device. Indices are trace entry
// indices; -1 means before the first entry (AllocIdx) or still alive at the
// end (FreeReqIdx, FreeIdx).
type Alloc struct {
	Addr       uint64
	Size       int64 // block bytes (what memory_allocated counts)
	Requested  int64 // bytes the program asked for
	Stream     uint32
	Stack      snapshot.StackID // stack at allocation (for unmatched frees: at free)
	FreeStack  snapshot.StackID
	AllocIdx   int32
	FreeReqIdx int32 // free_requested: allocated bytes drop here
	FreeIdx    int32 // free_completed: active bytes drop here
	Origin     Origin
	Exact      bool // Size is the real block size (from the final segments)
	Category   Category
	Metadata   uint32 // user_metadata string id at allocation (module path under ptscope run)
}

// Alive reports whether a was allocated (not yet freed by the program)
// just after entry i.
func (a *Alloc) Alive(i int) bool {
	return int(a.AllocIdx) <= i && (a.FreeReqIdx < 0 || int(a.FreeReqIdx) > i)
}

// Timeline is the replayed state after each trace entry, in columns.
type Timeline struct {
	TimeUS    []int64 // entry time (0 when the snapshot has none)
	Allocated []int64 // block bytes handed to the program (memory_allocated)
	Requested []int64 // bytes requested by the program
	Active    []int64 // allocated plus freed-but-pending blocks
	Reserved  []int64 // segment bytes held from CUDA (memory_reserved)
}

// Len is the number of points.
func (t *Timeline) Len() int { return len(t.Allocated) }

// Replay is a device's trace turned into allocations and timelines.
type Replay struct {
	Device    int
	Allocs    []Alloc
	Timeline  Timeline
	Baseline  ReplayState // before the first entry
	End       ReplayState // after the last entry (matches the final segments)
	Truncated bool        // the ring buffer evidently lost older entries
	// TruncationEvidence explains Truncated (unmatched frees, allocator flag).
	TruncationEvidence string
	Unmatched          int // frees whose alloc was not recorded
	Ghosts             int // live blocks never seen in the trace

	arena *spillmem.Arena // where the columns go (the snapshot's); nil: the heap
}

// ReplayState is a point of the timeline.
type ReplayState struct {
	Allocated, Requested, Active, Reserved int64
}

// RoundSize is the caching allocator's rounding of a request to a block
// size (c10 CUDACachingAllocator round_size without power-of-two divisions).
func RoundSize(n int64) int64 {
	const minBlock = 512
	if n < minBlock {
		return minBlock
	}
	return (n + minBlock - 1) / minBlock * minBlock
}

// NewReplay replays device d of s.
func NewReplay(s *snapshot.Snapshot, d int) *Replay {
	tr := s.Trace(d)
	r := &Replay{Device: d, arena: s.Arena()}
	final, end := finalBlocks(s.DeviceSegments(d))
	live := newAddrTable(1024)    // addr -> index in r.Allocs of the live allocation
	pending := newAddrTable(1024) // freed by the program, not yet by the allocator
	r.matchAllocs(tr, len(final), live, pending)
	r.takeExactSizes(live, pending, final)
	r.addGhosts(final)
	r.modelBlockSizes(s, d, tr)
	r.buildTimeline(tr, end.Reserved)
	r.End = end
	r.detectTruncation(s, tr)
	return r
}

// liveBlock is a block alive at the end with its segment.
type liveBlock struct {
	b   snapshot.Block
	seg *snapshot.Segment
}

// finalBlocks is the blocks alive at the end in segs (allocated or
// pending free), by address, and the state they add up to.
func finalBlocks(segs []snapshot.Segment) (map[uint64]liveBlock, ReplayState) {
	final := map[uint64]liveBlock{}
	var end ReplayState
	for i := range segs {
		g := &segs[i]
		end.Reserved += g.TotalSize
		for _, b := range g.Blocks {
			switch b.State {
			case snapshot.BlockActiveAllocated:
				end.Allocated += b.Size
				end.Active += b.Size
				end.Requested += b.RequestedSize
				final[b.Address] = liveBlock{b, g}
			case snapshot.BlockActivePendingFree:
				end.Active += b.Size
				final[b.Address] = liveBlock{b, g}
			}
		}
	}
	return final, end
}

// matchAllocs matches tr's allocs with their frees by address into
// r.Allocs, with room for nfinal more (the ghosts), counting the frees
// without their alloc (r.Unmatched). It leaves in live the allocations
// still alive at the end and in pending those freed by the program but
// not yet by the allocator, each by address.
func (r *Replay) matchAllocs(tr *snapshot.Trace, nfinal int, live, pending *addrTable) {
	n := tr.Len()
	// Allocs holds one entry per alloc, per free whose alloc was not
	// recorded and per block alive since before the recording: counting
	// the allocs first spares the copies of growing it (unmatched frees
	// are few unless the ring buffer wrapped).
	allocs := 0
	for i, a := range tr.Action {
		spillmem.Poll(r.arena, i)
		if a == snapshot.ActionAlloc || r.arena != nil && (a == snapshot.ActionFreeRequested || a == snapshot.ActionFreeCompleted) {
			// In a spill arena, room that is never used costs neither
			// memory nor disk: make room for every free to be unmatched,
			// so that appending never moves Allocs to the heap.
			allocs++
		}
	}
	r.Allocs = spillmem.MakeCap[Alloc](r.arena, 0, allocs+nfinal+1024)
	for i := 0; i < n; i++ {
		spillmem.Poll(r.arena, i)
		addr := tr.Addr[i]
		switch tr.Action[i] {
		case snapshot.ActionAlloc:
			r.Allocs = append(r.Allocs, Alloc{Addr: addr, Requested: tr.Size[i], Size: RoundSize(tr.Size[i]),
				Stream: tr.Stream[i], Stack: tr.Stack[i], AllocIdx: int32(i), FreeReqIdx: -1, FreeIdx: -1,
				Metadata: tr.UserMetadata[i]})
			live.put(addr, int32(len(r.Allocs)-1))
		case snapshot.ActionFreeRequested:
			k, ok := live.take(addr)
			if !ok {
				r.Allocs = append(r.Allocs, Alloc{Addr: addr, Requested: tr.Size[i], Size: RoundSize(tr.Size[i]),
					Stream: tr.Stream[i], Stack: tr.Stack[i], FreeStack: tr.Stack[i], AllocIdx: -1,
					FreeReqIdx: int32(i), FreeIdx: -1, Origin: BeforeUnmatched})
				k = int32(len(r.Allocs) - 1)
				r.Unmatched++
			} else {
				r.Allocs[k].FreeReqIdx = int32(i)
				r.Allocs[k].FreeStack = tr.Stack[i]
			}
			pending.put(addr, k)
		case snapshot.ActionFreeCompleted:
			if k, ok := pending.take(addr); ok {
				r.Allocs[k].FreeIdx = int32(i)
				continue
			}
			if k, ok := live.take(addr); ok {
				// A merged "free" (no free_requested): both at once.
				r.Allocs[k].FreeReqIdx, r.Allocs[k].FreeIdx = int32(i), int32(i)
				r.Allocs[k].FreeStack = tr.Stack[i]
				continue
			}
			r.Allocs = append(r.Allocs, Alloc{Addr: addr, Requested: tr.Size[i], Size: RoundSize(tr.Size[i]),
				Stream: tr.Stream[i], Stack: tr.Stack[i], FreeStack: tr.Stack[i], AllocIdx: -1,
				FreeReqIdx: int32(i), FreeIdx: int32(i), Origin: BeforeUnmatched})
			r.Unmatched++
		}
	}
}

// takeExactSizes gives the allocations still alive (live) or pending
// free at the end their exact size from the final blocks, and removes
// those blocks from final.
func (r *Replay) takeExactSizes(live, pending *addrTable, final map[uint64]liveBlock) {
	live.each(func(addr uint64, k int32) {
		if lb, ok := final[addr]; ok && lb.b.State == snapshot.BlockActiveAllocated {
			r.Allocs[k].Size, r.Allocs[k].Exact = lb.b.Size, true
			delete(final, addr)
		}
	})
	pending.each(func(addr uint64, k int32) {
		if lb, ok := final[addr]; ok && lb.b.State == snapshot.BlockActivePendingFree {
			r.Allocs[k].Size, r.Allocs[k].Exact = lb.b.Size, true
			delete(final, addr)
		}
	})
}

// addGhosts appends the allocated blocks of final, those the trace never
// saw, as allocations that predate recording (ghosts), by address.
func (r *Replay) addGhosts(final map[uint64]liveBlock) {
	ghostAddrs := make([]uint64, 0, len(final))
	for addr, lb := range final {
		if lb.b.State == snapshot.BlockActiveAllocated {
			ghostAddrs = append(ghostAddrs, addr)
		}
	}
	sort.Slice(ghostAddrs, func(i, j int) bool { return ghostAddrs[i] < ghostAddrs[j] })
	for _, addr := range ghostAddrs {
		lb := final[addr]
		r.Allocs = append(r.Allocs, Alloc{Addr: addr, Size: lb.b.Size, Requested: lb.b.RequestedSize,
			Stream: lb.seg.Stream, Stack: lb.b.Stack, AllocIdx: -1, FreeReqIdx: -1, FreeIdx: -1,
			Origin: BeforeGhost, Exact: true})
		r.Ghosts++
	}
}

// buildTimeline turns allocations into per-entry deltas and prefix sums.
// The four columns are independent, so each is built on its own goroutine.
func (r *Replay) buildTimeline(tr *snapshot.Trace, endReserved int64) {
	n := tr.Len()
	t := &r.Timeline
	t.TimeUS = tr.TimeUS
	var base ReplayState
	waits := []func(){
		goPanicSafe(func() { t.Allocated, base.Allocated = r.column(n, false, false) }),
		goPanicSafe(func() { t.Requested, base.Requested = r.column(n, true, false) }),
		goPanicSafe(func() { t.Active, base.Active = r.column(n, false, true) }),
	}
	// Reserved: work back from the final segments through segment events.
	t.Reserved = spillmem.Make[int64](r.arena, n)
	var segDelta int64
	for i, a := range tr.Action {
		spillmem.Poll(r.arena, i)
		segDelta += reservedDelta(a, tr.Size[i])
	}
	base.Reserved = endReserved - segDelta
	cur := base.Reserved
	for i, a := range tr.Action {
		spillmem.Poll(r.arena, i)
		cur += reservedDelta(a, tr.Size[i])
		t.Reserved[i] = cur
	}
	for _, w := range waits {
		w()
	}
	r.Baseline = base
}

// column is one timeline column over n entries and its value before the
// first: block bytes (or requested bytes) added at each alloc and taken
// away at the free_requested (or, for active bytes, the free_completed).
func (r *Replay) column(n int, requested, active bool) ([]int64, int64) {
	col := spillmem.Make[int64](r.arena, n)
	var base int64
	for i := range r.Allocs {
		spillmem.Poll(r.arena, i)
		a := &r.Allocs[i]
		v, free := a.Size, a.FreeReqIdx
		if requested {
			v = a.Requested
		}
		if active {
			free = a.FreeIdx
		}
		if a.AllocIdx < 0 {
			base += v
		} else {
			col[a.AllocIdx] += v
		}
		if free >= 0 {
			col[free] -= v
		}
	}
	cur := base
	for i, d := range col {
		spillmem.Poll(r.arena, i)
		cur += d
		col[i] = cur
	}
	return col, base
}

// reservedDelta is the change of reserved bytes an entry makes.
func reservedDelta(a snapshot.Action, size int64) int64 {
	switch a {
	case snapshot.ActionSegmentAlloc, snapshot.ActionSegmentMap:
		return size
	case snapshot.ActionSegmentFree, snapshot.ActionSegmentUnmap:
		return -size
	}
	return 0
}

func (r *Replay) detectTruncation(s *snapshot.Snapshot, tr *snapshot.Trace) {
	st := s.Settings
	n := tr.Len()
	switch {
	case st.OverflowKnown && st.TraceOverflowed:
		r.Truncated = true
		r.TruncationEvidence = "the allocator reports that the trace ring buffer overflowed"
	case st.TraceMaxEntries > 1 && int64(n) >= st.TraceMaxEntries:
		r.Truncated = true
		r.TruncationEvidence = "the trace holds exactly max_entries entries: older ones were dropped"
	case r.Unmatched > 0 && n >= 1000 && n%1000 == 0:
		// A wrapped ring buffer holds exactly max_entries entries, and people
		// choose round numbers for it; frees without their alloc confirm it.
		r.Truncated = true
		r.TruncationEvidence = fmt.Sprintf("%d frees have no recorded alloc and the trace holds a round %d entries: the ring buffer (max_entries) dropped older entries", r.Unmatched, n)
	case r.Unmatched > 0 && n > 0 && tr.Action[0] != snapshot.ActionAlloc && r.Unmatched*20 > n:
		r.Truncated = true
		r.TruncationEvidence = fmt.Sprintf("%d of %d entries are frees without their alloc and the trace starts mid-stream: the ring buffer (max_entries) probably dropped older entries", r.Unmatched, n)
	case r.Unmatched > 0:
		r.TruncationEvidence = fmt.Sprintf("%d frees have no recorded alloc: recording started mid-run (or the ring buffer dropped entries; raise max_entries if in doubt)", r.Unmatched)
	}
}
