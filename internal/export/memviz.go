package export

import (
	"io"
	"sort"

	"github.com/ptscope/ptscope/internal/memory"
	"github.com/ptscope/ptscope/internal/snapshot"
)

// MemVizDevice is one device of a memory_viz export and the trace entries
// it keeps.
type MemVizDevice struct {
	*Memory
	Window Window // entries Lo..Hi are written; FullWindow keeps all
}

// FullWindow is every trace entry of m.
func FullWindow(m *Memory) Window { return Window{0, m.Entries() - 1} }

// MemVizSummary says what a memory_viz export holds.
type MemVizSummary struct {
	Entries  int // trace entries written, over all devices
	Segments int
	Blocks   int // active blocks in the segments
	// Misplaced counts blocks of a reconstructed state that fit no
	// segment (or overlap another) and were left out.
	Misplaced int
}

// WriteMemViz writes the devices of s as a snapshot in the JSON form that
// PyTorch's memory_viz (MemoryViz.js, which tries JSON before pickle) and,
// once loaded with json.load, torch.cuda._memory_viz read: "segments"
// (device, address, total_size, allocated_size, stream, blocks covering
// each segment with size, requested_size, state and frames) and
// "device_traces" (one list per device of entries with action, addr, size,
// stream, time_us and frames).
//
// A device's window keeps only its trace entries Lo..Hi; its segments are
// then the allocator's state just after entry Hi, rebuilt from the final
// segments by undoing the later segment events and from the replay's
// allocations, so that memory_viz's backward replay from the segments stays
// consistent. minSize > 0 keeps only allocations that requested at least
// that many bytes, in the trace and in the segments (smaller blocks become
// free space), so that a snapshot too big for memory_viz can be opened.
func WriteMemViz(w io.Writer, s *snapshot.Snapshot, devs []MemVizDevice, minSize int64) (*MemVizSummary, error) {
	return writeMemViz(newJSONTree(w, s), s, devs, minSize)
}

// WriteMemVizPickle writes what WriteMemViz writes as a protocol 4 pickle,
// the form torch.cuda.memory._dump_snapshot writes: what
// `python -m torch.cuda._memory_viz` (which reads pickles only) and older
// memory_viz pages take. Strings, frames and frame lists are memoized, so
// the file is about as small as the original.
func WriteMemVizPickle(w io.Writer, s *snapshot.Snapshot, devs []MemVizDevice, minSize int64) (*MemVizSummary, error) {
	return writeMemViz(newPickleTree(w, s), s, devs, minSize)
}

func writeMemViz(t tree, s *snapshot.Snapshot, devs []MemVizDevice, minSize int64) (*MemVizSummary, error) {
	v := &memViz{t: t, s: s, sum: &MemVizSummary{}, minSize: minSize}
	t.dict()
	t.key("segments")
	t.list()
	for _, d := range devs {
		for _, g := range v.segments(d) {
			v.segment(d.Memory, g)
		}
	}
	t.end()
	t.key("device_traces")
	t.list()
	ndev := len(s.Traces)
	for _, d := range devs {
		ndev = max(ndev, d.Device+1)
	}
	for dev := 0; dev < ndev; dev++ {
		t.list()
		for _, d := range devs {
			if d.Device == dev {
				v.trace(d)
			}
		}
		t.end()
	}
	t.end()
	t.key("external_annotations")
	t.list()
	v.annotations(devs)
	t.end()
	t.key("allocator_settings")
	t.dict()
	for _, st := range s.Settings.All {
		t.key(st.Key)
		t.str(st.Value)
	}
	t.end()
	t.end()
	return v.sum, t.flush()
}

type memViz struct {
	t       tree
	s       *snapshot.Snapshot
	sum     *MemVizSummary
	minSize int64
}

// vizBlock is an active block of a segment.
type vizBlock struct {
	addr      uint64
	size      int64
	requested int64
	pending   bool // active_pending_free
	stack     snapshot.StackID
}

type vizSegment struct {
	addr       uint64
	size       int64
	stream     uint32
	typ        string
	pool       [2]int64
	expandable bool
	stack      snapshot.StackID
	blocks     []vizBlock // active blocks by address; nil with orig set
	orig       *snapshot.Segment
}

func (g *vizSegment) end() uint64 { return g.addr + uint64(g.size) }

// segments returns the device's segments as memory_viz gets them: the
// final ones when the window reaches the last entry, else the state just
// after the window's last entry.
func (v *memViz) segments(d MemVizDevice) []*vizSegment {
	m := d.Memory
	final := m.Snap.DeviceSegments(m.Device)
	if d.Window.Hi >= m.Entries()-1 {
		out := make([]*vizSegment, len(final))
		for i := range final {
			g := &final[i]
			out[i] = &vizSegment{addr: g.Address, size: g.TotalSize, stream: g.Stream, typ: g.Type, pool: g.Pool,
				expandable: g.Expandable, stack: g.Stack, orig: g}
		}
		return out
	}
	return v.stateAt(m, final, d.Window.Hi)
}

// stateAt rebuilds the segments and their active blocks just after entry
// hi: the final segments with the later segment events undone (as
// memory_viz replays backwards: a segment freed later existed, one
// allocated later did not; expandable segments map and unmap ranges), and
// the replay's allocations alive or pending then.
func (v *memViz) stateAt(m *Memory, final []snapshot.Segment, hi int) []*vizSegment {
	var segs []*vizSegment
	for i := range final {
		g := &final[i]
		segs = append(segs, &vizSegment{addr: g.Address, size: g.TotalSize, stream: g.Stream, typ: g.Type, pool: g.Pool,
			expandable: g.Expandable, stack: g.Stack})
	}
	tr := m.Snap.Trace(m.Device)
	for i := m.Entries() - 1; i > hi; i-- {
		addr, size := tr.Addr[i], tr.Size[i]
		switch tr.Action[i] {
		case snapshot.ActionSegmentAlloc:
			segs = removeSegment(segs, addr)
		case snapshot.ActionSegmentFree:
			segs = append(segs, &vizSegment{addr: addr, size: size, stream: tr.Stream[i], typ: poolType(size), stack: tr.Stack[i]})
		case snapshot.ActionSegmentMap:
			segs = unmapRange(segs, addr, size)
		case snapshot.ActionSegmentUnmap:
			segs = mapRange(segs, &vizSegment{addr: addr, size: size, stream: tr.Stream[i], typ: poolType(size),
				expandable: true, stack: tr.Stack[i]})
		}
	}
	sort.Slice(segs, func(a, b int) bool { return segs[a].addr < segs[b].addr })

	var blocks []vizBlock
	for k := range m.Replay.Allocs {
		a := &m.Replay.Allocs[k]
		if int(a.AllocIdx) > hi || (a.FreeIdx >= 0 && int(a.FreeIdx) <= hi) || a.Requested < v.minSize {
			continue
		}
		blocks = append(blocks, vizBlock{addr: a.Addr, size: a.Size, requested: a.Requested,
			pending: a.FreeReqIdx >= 0 && int(a.FreeReqIdx) <= hi, stack: a.Stack})
	}
	sort.Slice(blocks, func(a, b int) bool { return blocks[a].addr < blocks[b].addr })
	for _, b := range blocks {
		k := sort.Search(len(segs), func(i int) bool { return segs[i].end() > b.addr })
		if k == len(segs) || segs[k].addr > b.addr || b.addr+uint64(b.size) > segs[k].end() {
			v.sum.Misplaced++
			continue
		}
		g := segs[k]
		if n := len(g.blocks); n > 0 && g.blocks[n-1].addr+uint64(g.blocks[n-1].size) > b.addr {
			v.sum.Misplaced++
			continue
		}
		g.blocks = append(g.blocks, b)
	}
	return segs
}

// poolType is the pool of a segment the trace names only by its size:
// small-pool segments are 2 MiB (kSmallBuffer).
func poolType(size int64) string {
	if size == 2<<20 {
		return "small"
	}
	return "large"
}

func removeSegment(segs []*vizSegment, addr uint64) []*vizSegment {
	for i, g := range segs {
		if g.addr == addr {
			return append(segs[:i], segs[i+1:]...)
		}
	}
	return segs
}

// unmapRange takes [addr, addr+size) out of the expandable segment that
// holds it, shrinking or splitting it.
func unmapRange(segs []*vizSegment, addr uint64, size int64) []*vizSegment {
	end := addr + uint64(size)
	for i, g := range segs {
		if g.addr > addr || end > g.end() {
			continue
		}
		switch {
		case g.addr == addr && g.end() == end:
			return append(segs[:i], segs[i+1:]...)
		case g.addr == addr:
			g.addr, g.size = end, g.size-size
		case g.end() == end:
			g.size -= size
		default:
			tail := *g
			tail.addr, tail.size = end, int64(g.end()-end)
			g.size = int64(addr - g.addr)
			segs = append(segs, &tail)
		}
		return segs
	}
	return segs
}

// mapRange adds a mapped range, merging it with adjacent expandable
// segments of the same stream.
func mapRange(segs []*vizSegment, n *vizSegment) []*vizSegment {
	for i := 0; i < len(segs); i++ {
		g := segs[i]
		if !g.expandable || g.stream != n.stream {
			continue
		}
		switch {
		case g.end() == n.addr:
			n.addr, n.size, n.stack = g.addr, n.size+g.size, g.stack
		case n.end() == g.addr:
			n.size += g.size
		default:
			continue
		}
		segs = append(segs[:i], segs[i+1:]...)
		i--
	}
	return append(segs, n)
}

// segment writes one segment with blocks that cover it: its own blocks
// (small ones freed under minSize), or the rebuilt active blocks with free
// space between them.
func (v *memViz) segment(m *Memory, g *vizSegment) {
	s := v.s
	type blk struct {
		size, requested int64
		state           snapshot.BlockState
		stack           snapshot.StackID
	}
	var blocks []blk
	if g.orig != nil {
		for _, b := range g.orig.Blocks {
			// as the snapshot has them, inactive blocks' stale requested
			// sizes and stacks included (torch.cuda._memory_viz prints them)
			x := blk{b.Size, b.RequestedSize, b.State, b.Stack}
			if x.state != snapshot.BlockInactive && x.requested < v.minSize {
				x = blk{size: b.Size, state: snapshot.BlockInactive}
			}
			blocks = append(blocks, x)
		}
	} else {
		at := g.addr
		for _, b := range g.blocks {
			if b.addr > at {
				blocks = append(blocks, blk{size: int64(b.addr - at), state: snapshot.BlockInactive})
			}
			st := snapshot.BlockActiveAllocated
			if b.pending {
				st = snapshot.BlockActivePendingFree
			}
			blocks = append(blocks, blk{b.size, b.requested, st, b.stack})
			at = b.addr + uint64(b.size)
		}
		if at < g.end() {
			blocks = append(blocks, blk{size: int64(g.end() - at), state: snapshot.BlockInactive})
		}
	}
	var allocated, active, requested int64
	for _, b := range blocks {
		switch b.state {
		case snapshot.BlockActiveAllocated:
			allocated += b.size
			active += b.size
			requested += b.requested
		case snapshot.BlockActivePendingFree:
			active += b.size
		}
	}
	typ := g.typ
	if typ == "" {
		typ = poolType(g.size)
	}
	t := v.t
	t.dict()
	t.key("device")
	t.int(int64(m.Device))
	t.key("address")
	t.uint(g.addr)
	t.key("total_size")
	t.int(g.size)
	t.key("allocated_size")
	t.int(allocated)
	t.key("active_size")
	t.int(active)
	t.key("requested_size")
	t.int(requested)
	t.key("stream")
	t.int(streamValue(s, g.stream))
	t.key("segment_type")
	t.str(typ)
	t.key("segment_pool_id")
	t.list()
	t.int(g.pool[0])
	t.int(g.pool[1])
	t.end()
	t.key("is_expandable")
	t.boolean(g.expandable)
	t.key("frames")
	t.frames(g.stack)
	t.key("blocks")
	t.list()
	for _, b := range blocks {
		t.dict()
		t.key("size")
		t.int(b.size)
		t.key("requested_size")
		t.int(b.requested)
		t.key("state")
		t.str(b.state.String())
		t.key("frames")
		t.frames(b.stack)
		t.end()
		if b.state != snapshot.BlockInactive {
			v.sum.Blocks++
		}
	}
	t.end()
	t.end()
	v.sum.Segments++
}

func streamValue(s *snapshot.Snapshot, i uint32) int64 {
	if int(i) < len(s.Streams) {
		return s.Streams[i]
	}
	return 0
}

// trace writes the window's entries of one device, leaving out those of
// allocations that requested less than minSize.
func (v *memViz) trace(d MemVizDevice) {
	m := d.Memory
	tr := m.Snap.Trace(m.Device)
	s := v.s
	var owner []int32
	if v.minSize > 0 {
		owner = allocOwners(m.Replay, tr.Len())
	}
	t := v.t
	for i := max(d.Window.Lo, 0); i <= d.Window.Hi && i < tr.Len(); i++ {
		act := tr.Action[i]
		if owner != nil && owner[i] > 0 && m.Replay.Allocs[owner[i]-1].Requested < v.minSize {
			continue
		}
		t.dict()
		t.key("action")
		t.str(act.String())
		if act == snapshot.ActionOOM {
			t.key("device_free")
		} else {
			t.key("addr")
		}
		t.uint(tr.Addr[i])
		t.key("size")
		t.int(tr.Size[i])
		t.key("stream")
		t.int(streamValue(s, tr.Stream[i]))
		if tr.HasTime {
			t.key("time_us")
			t.int(tr.TimeUS[i])
		}
		if c := tr.CompileContext[i]; c != 0 {
			t.key("compile_context")
			t.str(s.Strings[c])
		}
		if u := tr.UserMetadata[i]; u != 0 {
			t.key("user_metadata")
			t.str(s.Strings[u])
		}
		t.key("frames")
		t.frames(tr.Stack[i])
		t.end()
		v.sum.Entries++
	}
}

// allocOwners maps each trace entry to the allocation it allocates or
// frees (k+1; 0 for other entries).
func allocOwners(r *memory.Replay, n int) []int32 {
	owner := make([]int32, n)
	for k := range r.Allocs {
		a := &r.Allocs[k]
		for _, i := range [...]int32{a.AllocIdx, a.FreeReqIdx, a.FreeIdx} {
			if i >= 0 && int(i) < n {
				owner[i] = int32(k + 1)
			}
		}
	}
	return owner
}

// annotations writes the record_function markers of the devices within
// the time of their windows.
func (v *memViz) annotations(devs []MemVizDevice) {
	t := v.t
	for _, a := range v.s.Annotations {
		keep := false
		for _, d := range devs {
			if a.Device >= 0 && a.Device != d.Device && len(v.s.Traces) > 1 {
				continue
			}
			n := d.Entries()
			if n == 0 || !v.s.Trace(d.Device).HasTime {
				// no times to place it by: only a whole trace keeps it
				keep = keep || (d.Window.Hi >= n-1 && d.Window.Lo <= 0)
				continue
			}
			t := d.Replay.Timeline.TimeUS
			lo, hi := max(d.Window.Lo, 0), min(d.Window.Hi, n-1)
			if lo <= hi && a.TimeUS >= t[lo] && a.TimeUS <= t[hi] {
				keep = true
			}
		}
		if !keep {
			continue
		}
		t.dict()
		t.key("device")
		t.int(int64(a.Device))
		t.key("stage")
		t.str(a.Stage)
		t.key("name")
		t.str(a.Name)
		t.key("time_us")
		t.int(a.TimeUS)
		t.end()
	}
}
