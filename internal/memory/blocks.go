package memory

import (
	"cmp"
	"slices"
	"sort"

	"github.com/ptscope/ptscope/internal/snapshot"
	"github.com/ptscope/ptscope/internal/spillmem"
)

// The allocator's trace records what a program asked for (the requested
// size), not the block it got. Small-pool blocks are the request rounded
// to 512 bytes, but a large-pool request takes a whole free block when
// splitting it would leave 1 MiB or less (c10's should_split), so the
// block, and memory_allocated, can be up to 1 MiB larger than the rounded
// request: a 32,768,000-byte tensor in a fresh 33,554,432-byte segment
// holds all of it. Counted by rounded requests, real training peaks came
// out 1-2% below torch.cuda.max_memory_allocated.
//
// modelBlockSizes recovers those blocks by replaying where large blocks
// sit in their segments: an allocation at address A takes the free block
// that starts at A, which reaches up to the next block still in use (not
// yet free_completed) or the segment's end, and the split rule decides
// whether it keeps all of it.
const smallSize = 1 << 20 // kSmallSize: larger requests use the large pool

// modelBlockSizes sets Size of the allocations whose size the final
// segments do not give (Exact) to the block the caching allocator handed
// out. Expandable segments split every block (the rounded request is the
// block), so they need nothing; neither does a trace without large
// requests.
func (r *Replay) modelBlockSizes(s *snapshot.Snapshot, d int, tr *snapshot.Trace) {
	if s.Settings.ExpandableSegments {
		return
	}
	segs := s.DeviceSegments(d)
	for i := range segs {
		if segs[i].Expandable {
			return
		}
	}
	maxSplit := s.Settings.MaxSplitSize // -1 or 0: unlimited
	// at[i] is the large allocation that entry i allocates or completes
	// the free of, +1 (0: none).
	var at []int32
	var before []int32 // large allocations in use before the first entry
	for k := range r.Allocs {
		spillmem.Poll(r.arena, k)
		a := &r.Allocs[k]
		if RoundSize(a.Requested) <= smallSize && a.Size <= smallSize {
			continue
		}
		if at == nil {
			at = spillmem.Make[int32](s.Arena(), tr.Len())
		}
		if a.AllocIdx >= 0 {
			at[a.AllocIdx] = int32(k) + 1
		} else {
			before = append(before, int32(k))
		}
		if a.FreeIdx >= 0 {
			at[a.FreeIdx] = int32(k) + 1
		}
	}
	if at == nil {
		return
	}
	// Segments alive before the first entry: the final ones, undone through
	// the trace's segment events from the end.
	start := map[uint64]int64{}
	for i := range segs {
		start[segs[i].Address] = segs[i].TotalSize
	}
	for i := tr.Len() - 1; i >= 0; i-- {
		spillmem.Poll(r.arena, i)
		switch tr.Action[i] {
		case snapshot.ActionSegmentAlloc:
			delete(start, tr.Addr[i])
		case snapshot.ActionSegmentFree:
			start[tr.Addr[i]] = tr.Size[i]
		}
	}
	sg := newSegmentSet(start)
	for _, k := range before {
		sg.use(r.Allocs[k].Addr)
	}
	for i, k := range at {
		spillmem.Poll(r.arena, i)
		switch tr.Action[i] {
		case snapshot.ActionSegmentAlloc:
			sg.add(tr.Addr[i], tr.Size[i])
			continue
		case snapshot.ActionSegmentFree:
			sg.remove(tr.Addr[i])
			continue
		}
		if k == 0 {
			continue
		}
		a := &r.Allocs[k-1]
		if int(a.AllocIdx) != i {
			sg.release(a.Addr) // its free completed
			continue
		}
		if free, ok := sg.freeBlockAt(a.Addr); ok && !a.Exact {
			a.Size = blockFor(RoundSize(a.Requested), free, maxSplit)
		}
		sg.use(a.Addr)
	}
}

// blockFor is the block a large request of rounded size s gets from a free
// block of size free: s when the allocator splits the remainder off (more
// than 1 MiB remains and s is below max_split_size), else all of it.
func blockFor(s, free, maxSplit int64) int64 {
	if free < s {
		return s // the trace disagrees with the layout: keep the request
	}
	if (maxSplit <= 0 || s < maxSplit) && free-s > smallSize {
		return s
	}
	return free
}

// segmentSet holds the segments alive at a point of the trace, sorted by
// address, each with the addresses of its large blocks in use (allocated
// or freed but not yet free_completed), sorted.
type segmentSet struct {
	segs []segment
}

type segment struct {
	addr uint64
	size int64
	used []uint64
}

func newSegmentSet(m map[uint64]int64) *segmentSet {
	sg := &segmentSet{}
	for a, n := range m {
		sg.segs = append(sg.segs, segment{addr: a, size: n})
	}
	slices.SortFunc(sg.segs, func(x, y segment) int { return cmp.Compare(x.addr, y.addr) })
	return sg
}

// find returns the index of the segment holding addr, or -1.
func (sg *segmentSet) find(addr uint64) int {
	i := sort.Search(len(sg.segs), func(i int) bool { return sg.segs[i].addr > addr }) - 1
	if i < 0 || addr >= sg.segs[i].addr+uint64(sg.segs[i].size) {
		return -1
	}
	return i
}

func (sg *segmentSet) add(addr uint64, size int64) {
	i, ok := slices.BinarySearchFunc(sg.segs, addr, func(g segment, a uint64) int { return cmp.Compare(g.addr, a) })
	if ok {
		sg.segs[i] = segment{addr: addr, size: size}
		return
	}
	sg.segs = slices.Insert(sg.segs, i, segment{addr: addr, size: size})
}

func (sg *segmentSet) remove(addr uint64) {
	if i, ok := slices.BinarySearchFunc(sg.segs, addr, func(g segment, a uint64) int { return cmp.Compare(g.addr, a) }); ok {
		sg.segs = slices.Delete(sg.segs, i, i+1)
	}
}

// use marks the block at addr in use.
func (sg *segmentSet) use(addr uint64) {
	if i := sg.find(addr); i >= 0 {
		u := sg.segs[i].used
		if j, ok := slices.BinarySearch(u, addr); !ok {
			sg.segs[i].used = slices.Insert(u, j, addr)
		}
	}
}

// release marks the block at addr free.
func (sg *segmentSet) release(addr uint64) {
	if i := sg.find(addr); i >= 0 {
		u := sg.segs[i].used
		if j, ok := slices.BinarySearch(u, addr); ok {
			sg.segs[i].used = slices.Delete(u, j, j+1)
		}
	}
}

// freeBlockAt is the size of the free block starting at addr: up to the
// next large block in use or the end of addr's segment, whichever comes
// first. ok is false when addr lies in no known segment or is itself in
// use (an inconsistent trace).
func (sg *segmentSet) freeBlockAt(addr uint64) (int64, bool) {
	i := sg.find(addr)
	if i < 0 {
		return 0, false
	}
	g := &sg.segs[i]
	end := g.addr + uint64(g.size)
	j, inUse := slices.BinarySearch(g.used, addr)
	if inUse {
		return 0, false
	}
	if j < len(g.used) {
		end = g.used[j]
	}
	return int64(end - addr), true
}
