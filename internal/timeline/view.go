package timeline

import (
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/ptscope/ptscope/internal/memory"
)

// ViewQuery is a viewport of the memory timeline: entries [X0, X1) across
// Width pixels, bytes [Y0, Y1) across Height pixels (Y1 <= Y0: fit the
// reserved curve of the range).
type ViewQuery struct {
	X0, X1        int
	Width, Height int
	Y0, Y1        int64
	// Highlight, when set, marks the blocks it accepts and sums their
	// bytes per column (selecting a breakdown row).
	Highlight func(m *Memory, id int) bool
}

// Edge is a piece of a block's lower edge: from column Col on, the block
// sits OffsetBytes above zero (until the next edge or the block's end).
type Edge struct {
	Col         int32
	OffsetBytes int64
}

// ViewBlock is a block drawn on its own: [Start, End) in entries (Start
// -1: before the recording; End Len(): never freed) and its lower edge,
// which only ever moves down (blocks under it are freed; new ones go on
// top). Edges[0] is at the block's first column.
type ViewBlock struct {
	ID          int32
	Start, End  int32
	Size        int64
	Highlighted bool
	Edges       []Edge
}

// View is one viewport's answer. Column c covers entries
// [X0 + c*(X1-X0)/Columns, X0 + (c+1)*(X1-X0)/Columns) (integer division).
// Every allocation at least one pixel wide and one pixel tall is in
// Blocks; the rest is the band under the allocated curve, drawn per column
// from the curve's min/max (the blocks are stacked over it at their true
// offsets, so what shows of the band between them is the small blocks).
type View struct {
	X0, X1   int
	Columns  int
	Y0, Y1   int64
	MinBytes int64 // the smallest block size drawn on its own (one pixel)
	// per column: allocated and reserved min/max, phase at the first entry,
	// highlighted bytes after the first entry (nil without a highlight)
	AllocMin, AllocMax []int64
	ResMin, ResMax     []int64
	Phase              []memory.Phase
	Highlighted        []int64
	Blocks             []ViewBlock
	// blocks alive in the range that are drawn only as part of the band
	Summarized int
}

// Col returns the first entry of column c (c may be Columns: X1).
func (v *View) Col(c int) int { return v.X0 + int(int64(c)*int64(v.X1-v.X0)/int64(v.Columns)) }

// View answers one viewport.
func (m *Memory) View(q ViewQuery) (*View, error) {
	if m.n == 0 {
		return nil, fmt.Errorf("the device has no trace entries")
	}
	if q.X0 < 0 || q.X1 > m.n || q.X0 >= q.X1 {
		return nil, fmt.Errorf("range [%d, %d) is not within the %d entries", q.X0, q.X1, m.n)
	}
	if q.Width < 1 || q.Height < 1 || q.Width > 1<<14 || q.Height > 1<<14 {
		return nil, fmt.Errorf("viewport %dx%d pixels is out of range (1..16384)", q.Width, q.Height)
	}
	span := q.X1 - q.X0
	v := &View{X0: q.X0, X1: q.X1, Columns: min(q.Width, span), Y0: q.Y0, Y1: q.Y1}
	W := v.Columns
	v.AllocMin, v.AllocMax = make([]int64, W), make([]int64, W)
	v.ResMin, v.ResMax = make([]int64, W), make([]int64, W)
	v.Phase = make([]memory.Phase, W)
	var top int64
	for c := 0; c < W; c++ {
		lo, hi := v.Col(c), v.Col(c+1)
		v.AllocMin[c], v.AllocMax[c] = m.Allocated.MinMax(lo, hi)
		v.ResMin[c], v.ResMax[c] = m.Reserved.MinMax(lo, hi)
		v.Phase[c] = m.PhaseAt(lo)
		top = max(top, v.ResMax[c], v.AllocMax[c])
	}
	if v.Y1 <= v.Y0 {
		v.Y0, v.Y1 = 0, max(top+top/20, 1)
	}
	// one pixel: bytes per vertical pixel, entries per horizontal pixel
	v.MinBytes = max(1, (v.Y1-v.Y0+int64(q.Height)-1)/int64(q.Height))
	minSpan := int32((span + q.Width - 1) / q.Width)

	// the blocks drawn on their own, in stacking order
	var drawn []int32
	for _, b := range m.bySize {
		if b.size < v.MinBytes {
			break
		}
		if b.start < int32(q.X1) && b.end > int32(q.X0) && b.end-max(b.start, -1) >= minSpan {
			drawn = append(drawn, b.id)
		}
	}
	slices.Sort(drawn)
	// the blocks alive in the range: those allocated after X0, and those
	// allocated inside it (blocks are numbered in allocation order)
	live, offs := m.AllocatedLiveAt(q.X0)
	from := sort.Search(len(m.Blocks), func(k int) bool { return m.Blocks[k].Start > int32(q.X0) })
	to := sort.Search(len(m.Blocks), func(k int) bool { return m.Blocks[k].Start >= int32(q.X1) })
	v.Summarized = len(live) + max(0, to-from) - len(drawn)
	m.layout(v, drawn, live, offs)
	if q.Highlight != nil {
		for p := range v.Blocks {
			v.Blocks[p].Highlighted = q.Highlight(m, int(v.Blocks[p].ID))
		}
		v.Highlighted = m.highlighted(v, q.Highlight, live)
	}
	return v, nil
}

// layout computes the drawn blocks' lower edges by sweeping the range once.
// A block alive at X0 starts from the live set there (live, offs: a
// checkpoint plus a replay), one allocated inside starts at the allocated
// bytes minus its own size (it is on top). Every free inside moves the
// drawn blocks above the freed one down: the sweep keeps the drawn blocks
// alive, in stacking order, and a free adds its size to a pending
// decrement of those above it (found by binary search; most frees are of
// blocks above all of them and cost one comparison), which each column
// boundary applies in one pass. The cost is one step per entry in range
// plus one pass over the live drawn blocks per column where something
// under them was freed.
func (m *Memory) layout(v *View, drawn, live []int32, offs []int64) {
	v.Blocks = make([]ViewBlock, len(drawn))
	if len(drawn) == 0 {
		return
	}
	s := &layoutSweep{m: m, drawn: drawn}
	next := s.startLive(v, live, offs)
	s.sweep(v, next)
	flattenEdges(v, s.edges)
}

// layoutEdge is an edge of drawn block p, before flattenEdges.
type layoutEdge struct {
	p   int32
	col int32
	off int64
}

// layoutAct is a drawn block alive in the sweep.
type layoutAct struct {
	id, p     int32
	end       int32
	off, last int64
	dec       int64 // pending: subtract from this block and all above it
}

// layoutSweep is layout's state: the edges emitted so far, the drawn
// blocks alive in stacking order, and the sum of their pending
// decrements.
type layoutSweep struct {
	m       *Memory
	drawn   []int32
	edges   []layoutEdge
	active  []layoutAct
	pending int64
}

// start makes drawn block p alive from column col at offset off.
func (s *layoutSweep) start(p, col int, off int64) {
	b := &s.m.Blocks[s.drawn[p]]
	s.edges = append(s.edges, layoutEdge{int32(p), int32(col), off})
	// the pending decrements apply to it when they are resolved: add them
	s.active = append(s.active, layoutAct{id: s.drawn[p], p: int32(p), end: b.End, off: off + s.pending, last: off})
}

// below frees the drawn blocks above f by the size of f (f < the topmost
// alive).
func (s *layoutSweep) below(f int32) {
	active := s.active
	lo, hi := 0, len(active)-1 // the first active block above f
	for lo < hi {
		if h := int(uint(lo+hi) >> 1); active[h].id > f {
			hi = h
		} else {
			lo = h + 1
		}
	}
	sz := s.m.Blocks[f].Size
	active[lo].dec += sz
	s.pending += sz
}

// startLive fills v.Blocks and starts the drawn blocks allocated before
// or at X0 that are alive there (live, offs: the live set at X0 and their
// offsets); it returns the first drawn position not started yet.
func (s *layoutSweep) startLive(v *View, live []int32, offs []int64) (next int) {
	m, x0 := s.m, v.X0
	k := 0
	for p, id := range s.drawn {
		b := &m.Blocks[id]
		v.Blocks[p] = ViewBlock{ID: id, Start: b.Start, End: b.End, Size: b.Size}
		if b.Start > int32(x0) {
			continue
		}
		next = p + 1
		for k < len(live) && live[k] < id {
			k++
		}
		if k < len(live) && live[k] == id { // drawn blocks overlap the range: alive after X0
			s.start(p, 0, offs[k])
		}
	}
	return next
}

// sweep runs the entries of the range after X0, starting the drawn
// blocks from next as their entries come, and at each column boundary
// where something under a drawn block was freed resolves the decrements
// and emits the edges that moved half a pixel or more.
func (s *layoutSweep) sweep(v *View, next int) {
	m, drawn := s.m, s.drawn
	W, x0 := v.Columns, v.X0
	half := max(1, v.MinBytes/2) // an edge moves once the offset moved half a pixel
	// the sweep ends with the last drawn block; frees of blocks allocated
	// after every drawn one are above all of them and move none
	end := int32(v.X1)
	lastEnd := int32(0)
	for _, id := range drawn {
		lastEnd = max(lastEnd, m.Blocks[id].End)
	}
	end = min(end, lastEnd)
	minEnd := int32(math.MaxInt32)
	for _, a := range s.active {
		minEnd = min(minEnd, a.end)
	}
	startOf := func(p int) int32 {
		if p < len(drawn) {
			return m.Blocks[drawn[p]].Start
		}
		return math.MaxInt32
	}
	nextStart := startOf(next)
	// top: the frees that move drawn blocks are of blocks under the
	// topmost one alive (as unsigned, no free (-1) is under it)
	top := uint32(0)
	if len(s.active) > 0 {
		top = uint32(s.active[len(s.active)-1].id)
	}
	freeAt := m.freeAt[:end]
	c, nextCol := 0, int32(v.Col(1))
	if W == 1 {
		nextCol = math.MaxInt32
	}
	for i := int32(x0 + 1); i < end; i++ {
		// entries up to the next column boundary or drawn block's start
		// only move blocks
		for stop := min(end, nextCol, nextStart); i < stop; i++ {
			if f := freeAt[i]; uint32(f) < top {
				s.below(f)
			}
		}
		if i == end {
			break
		}
		boundary := i == nextCol
		if boundary {
			c++
			nextCol = math.MaxInt32
			if c+1 < W {
				nextCol = int32(v.Col(c + 1))
			}
		}
		if f := freeAt[i]; uint32(f) < top {
			s.below(f)
		}
		started := len(s.active)
		for nextStart == i {
			s.start(next, c, m.AllocatedAt(int(i))-m.Blocks[drawn[next]].Size)
			minEnd = min(minEnd, m.Blocks[drawn[next]].End)
			top = uint32(drawn[next])
			next++
			nextStart = startOf(next)
		}
		if !boundary || (s.pending == 0 && i < minEnd) {
			continue
		}
		minEnd, top = s.resolve(i, c, started, half)
	}
}

// resolve applies the pending decrements at entry i, column c, emits the
// edges of the blocks started before (started) that moved half or more,
// and drops the blocks ended; it returns the earliest end and the topmost
// block of those left.
func (s *layoutSweep) resolve(i int32, c, started int, half int64) (minEnd int32, top uint32) {
	active := s.active
	var run int64
	w := 0
	minEnd = math.MaxInt32
	for q := range active {
		a := active[q]
		run += a.dec
		a.dec = 0
		a.off -= run
		if a.end <= i {
			continue
		}
		if q < started && a.last-a.off >= half {
			s.edges = append(s.edges, layoutEdge{a.p, int32(c), a.off})
			a.last = a.off
		}
		minEnd = min(minEnd, a.end)
		active[w] = a
		w++
	}
	s.active = active[:w]
	s.pending = 0
	if w > 0 {
		top = uint32(active[w-1].id)
	}
	return minEnd, top
}

// flattenEdges puts the edges into one array, by block, and gives each
// of v.Blocks its part.
func flattenEdges(v *View, edges []layoutEdge) {
	n := len(v.Blocks)
	count := make([]int32, n+1)
	for _, e := range edges {
		count[e.p+1]++
	}
	for p := 1; p < len(count); p++ {
		count[p] += count[p-1]
	}
	flat := make([]Edge, len(edges))
	at := append([]int32(nil), count[:n]...)
	for _, e := range edges {
		flat[at[e.p]] = Edge{e.col, e.off}
		at[e.p]++
	}
	for p := range v.Blocks {
		v.Blocks[p].Edges = flat[count[p]:count[p+1]:count[p+1]]
	}
}

// highlighted sums, per column, the allocated bytes of the blocks accept
// takes after the column's first entry.
func (m *Memory) highlighted(v *View, accept func(m *Memory, id int) bool, ids []int32) []int64 {
	out := make([]int64, v.Columns)
	var cur int64
	for _, id := range ids {
		if accept(m, int(id)) {
			cur += m.Blocks[id].Size
		}
	}
	out[0] = cur
	next := sort.Search(len(m.Blocks), func(k int) bool { return m.Blocks[k].Start > int32(v.X0) })
	c, nextCol := 0, v.Col(1)
	for i := v.X0 + 1; i < v.X1; i++ {
		if f := m.freeAt[i]; f >= 0 && m.Blocks[f].Start <= int32(i) && accept(m, int(f)) {
			cur -= m.Blocks[f].Size
		}
		for next < len(m.Blocks) && m.Blocks[next].Start == int32(i) {
			if m.Blocks[next].End > int32(i) && accept(m, next) {
				cur += m.Blocks[next].Size
			}
			next++
		}
		if c+1 < v.Columns && nextCol == i {
			c++
			out[c] = cur
			nextCol = v.Col(c + 1)
		}
	}
	return out
}
