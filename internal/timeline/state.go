package timeline

import (
	"sort"

	"github.com/ptscope/ptscope/internal/snapshot"
)

// checkpoints hold the active blocks (allocated or pending free) before
// every K-th entry, so that the live set after any entry is a checkpoint
// plus at most K replayed entries.
type checkpoints struct {
	k    int     // entries between checkpoints, a power of two
	off  []int   // checkpoint j's ids are ids[off[j]:off[j+1]]
	ids  []int32 // block ids in stacking order
	full int     // blocks alive before the first entry
}

// checkpointBudget bounds the ids all checkpoints hold together: four per
// trace entry plus a million, so that a run whose live set grows (a leak)
// gets sparser checkpoints instead of quadratic memory.
func checkpointBudget(n int) int { return 4*n + 1<<20 }

func buildCheckpoints(m *Memory) checkpoints {
	n := m.n
	// Active blocks before entry e, for every e, as prefix sums of deltas.
	delta := make([]int32, n+1)
	base := 0
	for id := range m.Blocks {
		b := &m.Blocks[id]
		if b.Start < 0 {
			base++
		} else {
			delta[b.Start+1]++
		}
		if b.ActiveEnd < int32(n) {
			delta[b.ActiveEnd+1]--
		}
	}
	// count(e) = active blocks before entry e = base + sum(delta[1..e]);
	// an alloc at entry s counts from before entry s+1 on.
	count := make([]int32, n+1)
	cur := int32(base)
	for e := 0; e <= n; e++ {
		cur += delta[e]
		count[e] = cur
	}
	k, total := 256, 0
	for {
		total = 0
		for e := 0; e < n+k; e += k {
			total += int(count[min(e, n)])
		}
		if total <= checkpointBudget(n) || k >= n {
			break
		}
		k *= 2
	}
	c := checkpoints{k: k, full: base, ids: make([]int32, 0, total), off: make([]int, 0, n/k+3)}
	var live []int32
	next := 0 // next block id to start
	for e := 0; ; e += k {
		// live = active before entry e
		for next < len(m.Blocks) && m.Blocks[next].Start < int32(e) {
			live = append(live, int32(next))
			next++
		}
		w := 0
		for _, id := range live {
			if m.Blocks[id].ActiveEnd >= int32(e) {
				live[w] = id
				w++
			}
		}
		live = live[:w]
		c.off = append(c.off, len(c.ids))
		c.ids = append(c.ids, live...)
		if e >= n {
			break
		}
	}
	c.off = append(c.off, len(c.ids))
	return c
}

// LiveAt returns the ids of the blocks active (allocated or pending free)
// after entry i, in stacking order; i = -1 is before the first entry.
func (m *Memory) LiveAt(i int) []int32 {
	i = max(-1, min(i, m.n-1))
	j := (i + 1) / m.ckpt.k
	from := j * m.ckpt.k // the checkpoint is the state before entry from
	out := make([]int32, 0, m.ckpt.off[j+1]-m.ckpt.off[j]+64)
	for _, id := range m.ckpt.ids[m.ckpt.off[j]:m.ckpt.off[j+1]] {
		if m.Blocks[id].ActiveEnd > int32(i) {
			out = append(out, id)
		}
	}
	// blocks allocated at entries from..i: a contiguous run of ids
	lo := sort.Search(len(m.Blocks), func(k int) bool { return m.Blocks[k].Start >= int32(from) })
	for id := lo; id < len(m.Blocks) && m.Blocks[id].Start <= int32(i); id++ {
		if m.Blocks[id].ActiveEnd > int32(i) {
			out = append(out, int32(id))
		}
	}
	return out
}

// AllocatedLiveAt returns the blocks allocated (not yet freed by the
// program) after entry i, in stacking order, with each one's offset: the
// bytes of the allocated blocks under it.
func (m *Memory) AllocatedLiveAt(i int) (ids []int32, offsets []int64) {
	live := m.LiveAt(i)
	ids = live[:0]
	for _, id := range live {
		if m.Blocks[id].End > int32(i) {
			ids = append(ids, id)
		}
	}
	offsets = make([]int64, len(ids))
	var sum int64
	for k, id := range ids {
		offsets[k] = sum
		sum += m.Blocks[id].Size
	}
	return ids, offsets
}

// Hit returns the block that covers bytes y after entry i in the stacked
// timeline, or -1 (y above the allocated bytes, or negative).
func (m *Memory) Hit(i int, y int64) int {
	if y < 0 {
		return -1
	}
	ids, offs := m.AllocatedLiveAt(i)
	k := sort.Search(len(offs), func(k int) bool { return offs[k] > y }) - 1
	if k < 0 || y >= offs[k]+m.Blocks[ids[k]].Size {
		return -1
	}
	return int(ids[k])
}

// segEvent is a segment entry of the trace.
type segEvent struct {
	idx    int32
	action snapshot.Action
	addr   uint64
	size   int64
	stream uint32
}

func segmentEvents(tr *snapshot.Trace) []segEvent {
	var out []segEvent
	for i, a := range tr.Action {
		switch a {
		case snapshot.ActionSegmentAlloc, snapshot.ActionSegmentFree, snapshot.ActionSegmentMap, snapshot.ActionSegmentUnmap:
			out = append(out, segEvent{int32(i), a, tr.Addr[i], tr.Size[i], tr.Stream[i]})
		}
	}
	return out
}

// SegmentState is one segment (a cudaMalloc'd or mapped range) at an entry.
type SegmentState struct {
	Address    uint64       `json:"address"`
	SizeBytes  int64        `json:"size_bytes"`
	Stream     int64        `json:"stream"`
	Expandable bool         `json:"expandable"`
	Blocks     []StateBlock `json:"blocks"`
	// free space: the segment bytes no active block covers (inactive blocks
	// in the allocator's terms), and the largest contiguous piece of it
	FreeBytes        int64 `json:"free_bytes"`
	LargestFreeBytes int64 `json:"largest_free_bytes"`
}

// StateBlock is an active block at an entry.
type StateBlock struct {
	ID             int32  `json:"id"`
	Address        uint64 `json:"address"`
	SizeBytes      int64  `json:"size_bytes"`
	RequestedBytes int64  `json:"requested_bytes"`
	State          string `json:"state"` // active_allocated or active_pending_free
	Category       string `json:"category"`
}

// State is the allocator's state after one entry: its segments with their
// active blocks, blocks no known segment holds (a truncated trace) and the
// fragmentation of that instant.
type State struct {
	EventIndex int            `json:"event_index"`
	TimeNS     int64          `json:"time_ns"`
	Segments   []SegmentState `json:"segments"`
	Unplaced   []StateBlock   `json:"unplaced_blocks"`
	// what the replay counts after the entry
	AllocatedBytes int64 `json:"allocated_bytes"`
	ActiveBytes    int64 `json:"active_bytes"`
	ReservedBytes  int64 `json:"reserved_bytes"`
	// the segments' bytes (equal to ReservedBytes when the trace holds every
	// segment event since the recording started)
	SegmentBytes int64 `json:"segment_bytes"`
	// reserved bytes no active block covers, the largest contiguous free
	// range, how many free ranges there are, allocated / reserved, and
	// 1 - largest free / free (0: all free memory in one piece)
	InactiveBytes      int64   `json:"inactive_bytes"`
	LargestFreeBytes   int64   `json:"largest_free_bytes"`
	FreeRanges         int     `json:"free_ranges"`
	EfficiencyRatio    float64 `json:"efficiency_ratio"`
	FragmentationRatio float64 `json:"fragmentation_ratio"`
	PendingFreeBlocks  int     `json:"pending_free_blocks"`
	ActiveBlocks       int     `json:"active_blocks"`
	// the checkpoint the state was replayed from and how many entries that took
	CheckpointIndex int `json:"checkpoint_event_index"`
	Replayed        int `json:"replayed_events"`
}

// segRange is a piece of reserved address space.
type segRange struct {
	addr       uint64
	size       int64
	stream     uint32
	expandable bool
}

// segmentsAt rewinds the final segments through the trace's segment
// entries after entry i.
func (m *Memory) segmentsAt(i int) []segRange {
	var rs []segRange
	for _, g := range m.Snap.DeviceSegments(m.Device) {
		rs = append(rs, segRange{g.Address, g.TotalSize, g.Stream, g.Expandable})
	}
	for k := len(m.segEvents) - 1; k >= 0 && int(m.segEvents[k].idx) > i; k-- {
		e := m.segEvents[k]
		switch e.action {
		case snapshot.ActionSegmentAlloc, snapshot.ActionSegmentMap:
			rs = cutRange(rs, e.addr, e.size)
		case snapshot.ActionSegmentFree, snapshot.ActionSegmentUnmap:
			rs = append(cutRange(rs, e.addr, e.size), segRange{e.addr, e.size, e.stream, e.action == snapshot.ActionSegmentUnmap})
		}
	}
	sort.Slice(rs, func(a, b int) bool { return rs[a].addr < rs[b].addr })
	// mapped pages of an expandable segment form one range
	w := 0
	for _, r := range rs {
		if w > 0 && r.expandable && rs[w-1].expandable && rs[w-1].addr+uint64(rs[w-1].size) == r.addr && rs[w-1].stream == r.stream {
			rs[w-1].size += r.size
			continue
		}
		rs[w] = r
		w++
	}
	return rs[:w]
}

// cutRange removes [addr, addr+size) from the ranges.
func cutRange(rs []segRange, addr uint64, size int64) []segRange {
	end := addr + uint64(size)
	out := rs[:0:0]
	for _, r := range rs {
		re := r.addr + uint64(r.size)
		if re <= addr || r.addr >= end {
			out = append(out, r)
			continue
		}
		if r.addr < addr {
			out = append(out, segRange{r.addr, int64(addr - r.addr), r.stream, r.expandable})
		}
		if re > end {
			out = append(out, segRange{end, int64(re - end), r.stream, r.expandable})
		}
	}
	return out
}

// State returns the allocator state after entry i (-1: before the first).
func (m *Memory) State(i int) *State {
	i = max(-1, min(i, m.n-1))
	st := &State{EventIndex: i, TimeNS: m.Time(i), CheckpointIndex: (i+1)/m.ckpt.k*m.ckpt.k - 1}
	st.Replayed = i - st.CheckpointIndex
	if i < 0 || m.n == 0 {
		b := m.Replay.Baseline
		st.AllocatedBytes, st.ActiveBytes, st.ReservedBytes = b.Allocated, b.Active, b.Reserved
	} else {
		t := &m.Replay.Timeline
		st.AllocatedBytes, st.ActiveBytes, st.ReservedBytes = t.Allocated[i], t.Active[i], t.Reserved[i]
	}
	st.Unplaced = []StateBlock{}
	rs := m.segmentsAt(i)
	st.Segments = make([]SegmentState, len(rs))
	for k, r := range rs {
		st.Segments[k] = SegmentState{Address: r.addr, SizeBytes: r.size, Stream: m.stream(r.stream), Expandable: r.expandable, Blocks: []StateBlock{}}
		st.SegmentBytes += r.size
	}
	for _, id := range m.LiveAt(i) {
		a := m.Alloc(int(id))
		sb := StateBlock{ID: id, Address: a.Addr, SizeBytes: a.Size, RequestedBytes: a.Requested,
			State: snapshot.BlockActiveAllocated.String(), Category: a.Category.String()}
		if m.Blocks[id].End <= int32(i) {
			sb.State = snapshot.BlockActivePendingFree.String()
			st.PendingFreeBlocks++
		}
		st.ActiveBlocks++
		k := sort.Search(len(rs), func(k int) bool { return rs[k].addr > a.Addr }) - 1
		if k >= 0 && a.Addr+uint64(a.Size) <= rs[k].addr+uint64(rs[k].size) {
			st.Segments[k].Blocks = append(st.Segments[k].Blocks, sb)
		} else {
			st.Unplaced = append(st.Unplaced, sb)
		}
	}
	var free int64
	for k := range st.Segments {
		g := &st.Segments[k]
		sort.Slice(g.Blocks, func(a, b int) bool { return g.Blocks[a].Address < g.Blocks[b].Address })
		at := g.Address
		gap := func(to uint64) {
			if to > at {
				d := int64(to - at)
				g.FreeBytes += d
				g.LargestFreeBytes = max(g.LargestFreeBytes, d)
				st.FreeRanges++
			}
		}
		for _, b := range g.Blocks {
			gap(b.Address)
			at = max(at, b.Address+uint64(b.SizeBytes))
		}
		gap(g.Address + uint64(g.SizeBytes))
		free += g.FreeBytes
		st.LargestFreeBytes = max(st.LargestFreeBytes, g.LargestFreeBytes)
	}
	st.InactiveBytes = free
	if st.ReservedBytes > 0 {
		st.EfficiencyRatio = float64(st.AllocatedBytes) / float64(st.ReservedBytes)
	}
	if free > 0 {
		st.FragmentationRatio = 1 - float64(st.LargestFreeBytes)/float64(free)
	}
	return st
}

// stream returns the raw cudaStream_t value of a stream index.
func (m *Memory) stream(i uint32) int64 {
	if int(i) < len(m.Snap.Streams) {
		return m.Snap.Streams[i]
	}
	return 0
}

// CheckpointEvery is K: the most entries a state query replays.
func (m *Memory) CheckpointEvery() int { return m.ckpt.k }

// BlockAt returns the block that entry i allocates, frees or completes
// freeing, or -1.
func (m *Memory) BlockAt(i int) int {
	if i < 0 || i >= m.n {
		return -1
	}
	if f := m.freeAt[i]; f >= 0 {
		return int(f)
	}
	k := sort.Search(len(m.Blocks), func(k int) bool { return m.Blocks[k].Start >= int32(i) })
	if k < len(m.Blocks) && m.Blocks[k].Start == int32(i) {
		return k
	}
	for _, id := range m.LiveAt(i - 1) {
		if m.Blocks[id].ActiveEnd == int32(i) {
			return int(id)
		}
	}
	return -1
}

// EntryAt returns the last entry whose time is at or before t (Unix ns),
// -1 when t is before the first entry.
func (m *Memory) EntryAt(t int64) int {
	ts := m.Replay.Timeline.TimeUS
	return sort.Search(len(ts), func(i int) bool { return ts[i]*1000 > t }) - 1
}
