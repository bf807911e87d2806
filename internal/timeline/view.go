package timeline

import (
	"fmt"
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
	for _, id := range m.bySize {
		b := &m.Blocks[id]
		if b.Size < v.MinBytes {
			break
		}
		if b.Start < int32(q.X1) && b.End > int32(q.X0) && b.End-max(b.Start, -1) >= minSpan {
			drawn = append(drawn, id)
		}
	}
	sort.Slice(drawn, func(i, j int) bool { return drawn[i] < drawn[j] })
	for id := range m.Blocks {
		if b := &m.Blocks[id]; b.Start < int32(q.X1) && b.End > int32(q.X0) {
			v.Summarized++
		}
	}
	v.Summarized -= len(drawn)
	m.layout(v, drawn)
	if q.Highlight != nil {
		for p := range v.Blocks {
			v.Blocks[p].Highlighted = q.Highlight(m, int(v.Blocks[p].ID))
		}
	}
	if q.Highlight != nil {
		v.Highlighted = m.highlighted(v, q.Highlight)
	}
	return v, nil
}

// layout computes the drawn blocks' lower edges by sweeping the range once:
// a block alive at X0 starts from the live set there (a checkpoint plus a
// replay), one allocated inside starts at the allocated bytes minus its own
// size (it is on top), and every free inside moves the drawn blocks above
// the freed one down, through a Fenwick tree over the drawn blocks.
func (m *Memory) layout(v *View, drawn []int32) {
	W, x0 := v.Columns, v.X0
	half := max(1, v.MinBytes/2) // an edge moves once the offset moved half a pixel
	v.Blocks = make([]ViewBlock, len(drawn))
	fw := make([]int64, len(drawn)+1) // range add (from a position on), point query
	add := func(p int, d int64) {
		for p++; p < len(fw); p += p & -p {
			fw[p] += d
		}
	}
	sum := func(p int) int64 {
		var s int64
		for p++; p > 0; p -= p & -p {
			s += fw[p]
		}
		return s
	}
	// a block's offset is base[p] + sum(p); last[p] is its last edge's offset
	base := make([]int64, len(drawn))
	last := make([]int64, len(drawn))
	var active []int // drawn positions alive, in stacking order
	start := func(p, col int, off int64) {
		base[p], last[p] = off-sum(p), off
		v.Blocks[p].Edges = append(v.Blocks[p].Edges, Edge{int32(col), off})
		active = append(active, p)
	}
	if len(drawn) == 0 {
		return
	}
	// the sweep ends with the last drawn block; frees of blocks allocated
	// after every drawn one are above all of them and move none
	end, top := int32(v.X1), drawn[len(drawn)-1]
	lastEnd := int32(0)
	for _, id := range drawn {
		lastEnd = max(lastEnd, m.Blocks[id].End)
	}
	end = min(end, lastEnd)
	ids, offs := m.AllocatedLiveAt(x0)
	k, next := 0, 0 // next: the first drawn position not started yet
	for p, id := range drawn {
		b := &m.Blocks[id]
		v.Blocks[p] = ViewBlock{ID: id, Start: b.Start, End: b.End, Size: b.Size}
		if b.Start > int32(x0) {
			continue
		}
		next = p + 1
		for k < len(ids) && ids[k] < id {
			k++
		}
		if k < len(ids) && ids[k] == id { // drawn blocks overlap the range: alive after X0
			start(p, 0, offs[k])
		}
	}
	c, nextCol := 0, v.Col(1)
	for i := x0 + 1; i < int(end); i++ {
		boundary := c+1 < W && nextCol == i
		if boundary {
			c++
			nextCol = v.Col(c + 1)
		}
		if f := m.freeAt[i]; f >= 0 && f < top {
			if p := sort.Search(len(drawn), func(k int) bool { return drawn[k] > f }); p < len(drawn) {
				add(p, -m.Blocks[f].Size)
			}
		}
		started := next
		for next < len(drawn) && m.Blocks[drawn[next]].Start == int32(i) {
			start(next, c, m.AllocatedAt(i)-m.Blocks[drawn[next]].Size)
			next++
		}
		if !boundary {
			continue
		}
		w := 0
		for _, p := range active {
			b := &m.Blocks[drawn[p]]
			if b.End <= int32(i) {
				continue
			}
			active[w] = p
			w++
			if p >= started {
				continue
			}
			if off := base[p] + sum(p); last[p]-off >= half {
				v.Blocks[p].Edges = append(v.Blocks[p].Edges, Edge{int32(c), off})
				last[p] = off
			}
		}
		active = active[:w]
	}
}

// highlighted sums, per column, the allocated bytes of the blocks accept
// takes after the column's first entry.
func (m *Memory) highlighted(v *View, accept func(m *Memory, id int) bool) []int64 {
	out := make([]int64, v.Columns)
	ids, _ := m.AllocatedLiveAt(v.X0)
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
