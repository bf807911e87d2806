package view

import (
	"encoding/binary"
	"math"

	"github.com/ptscope/ptscope/internal/timeline"
)

// viewVersion is the layout of EncodeView's output (ui/src/data.js reads it).
const viewVersion = 3

// subRows is how finely byte positions are kept: 1/subRows of a pixel row.
const subRows = 8

// ViewEncoding says how a view is written.
type ViewEncoding struct {
	Color timeline.By // what the colour key of each block is
	// Height is the plot's height in pixels that positions are quantised to
	// (the viewport's).
	Height int
	// IDs adds each block's id (the page asks for a clicked block by id).
	IDs bool
	// AllKeys gives each palette entry the block's key in every colouring
	// (--html files, whose page changes the colouring without a server).
	AllKeys bool
}

// keyOrder is the order of the keys of an AllKeys palette entry after its
// category (timeline.By values).
var keyOrder = []timeline.By{timeline.ByStack, timeline.BySource, timeline.ByModule, timeline.ByModuleGroup, timeline.ByGroup}

// EncodeView writes a view in the page's binary layout. Positions are
// quantised to the pixels they are drawn at: entries to the view's columns,
// bytes to 1/8 of a pixel row (y0 + rows/8 * (y1-y0)/(8*height)), as
// varints (unsigned LEB128; signed ones zigzag), so that a block costs a
// few bytes whatever its size or place:
//
//	u32 version, x0, x1, columns, blocks, summarized, height
//	f64 y0, y1, min_bytes
//	u8  flags (1: a highlighted-bytes curve follows the curves; 2: block ids;
//	    4: all keys)
//	uvarint palette entries; per entry: u8 category, u8 flags (1: highlighted),
//	    uvarint colour key; with all keys, instead of the colour key, the
//	    block's key by stack, source, module, module_group and group
//	curves alloc_min, alloc_max, reserved_min, reserved_max [, highlighted]:
//	    per column the sub-rows (clamped to +-4 plot heights) as a svarint
//	    delta from the previous column's (from 0)
//	u8  phase[columns]
//	time of each column's first entry in microseconds since the snapshot's
//	    first entry, as a svarint delta from the previous column's (from 0;
//	    all 0 when the snapshot records no times)
//	per block, in stacking order:
//	    uvarint first column (delta from the previous block's), columns wide,
//	            palette entry, size in sub-rows, edges
//	    svarint lower edge at the first column, in sub-rows (delta from the previous block's)
//	    per further edge: uvarint columns since the previous edge, sub-rows it moved down
//	    with ids: uvarint id (delta from the previous block's)
//
// A block covers its columns [first, first+wide) and, from each edge's column
// to the next, the sub-rows [edge, edge+size). Exact numbers (sizes, entries)
// come from the block panel.
func EncodeView(m *timeline.Memory, v *timeline.View, e ViewEncoding) []byte {
	h := max(1, e.Height)
	w := &viewWriter{v: v, scale: float64(h*subRows) / float64(max(1, v.Y1-v.Y0)),
		buf: make([]byte, 0, 64+12*v.Columns+12*len(v.Blocks))}
	pals, palOf := viewPalette(m, v, e)
	w.header(e, h, pals)
	w.curves(h)
	for _, p := range v.Phase {
		w.buf = append(w.buf, byte(p))
	}
	w.times(m)
	w.blocks(e, palOf)
	return w.buf
}

// pal is one palette entry of a view: category, colour key and highlight
// of the blocks that use it.
type pal struct {
	cat  byte
	flag byte
	key  int32
	all  [5]int32 // with AllKeys: the keys of keyOrder
}

// viewPalette returns the view's palette and each block's entry in it.
func viewPalette(m *timeline.Memory, v *timeline.View, e ViewEncoding) ([]pal, []int) {
	palette := map[pal]int{}
	var pals []pal
	palOf := make([]int, len(v.Blocks))
	last := -1
	for k, b := range v.Blocks {
		p := pal{cat: byte(m.Category(int(b.ID))), key: m.Key(e.Color, int(b.ID))}
		if e.AllKeys {
			p.key = 0
			for k, by := range keyOrder {
				p.all[k] = m.Key(by, int(b.ID))
			}
		}
		if b.Highlighted {
			p.flag = 1
		}
		if last >= 0 && pals[last] == p { // neighbours often share one
			palOf[k] = last
			continue
		}
		i, ok := palette[p]
		if !ok {
			i = len(pals)
			palette[p] = i
			pals = append(pals, p)
		}
		palOf[k], last = i, i
	}
	return pals, palOf
}

// viewWriter appends the parts of an encoded view to buf.
type viewWriter struct {
	v     *timeline.View
	scale float64 // sub-rows per byte
	buf   []byte
}

// q is the sub-row of a byte level.
func (w *viewWriter) q(b int64) int64 { return int64(math.Floor(float64(b-w.v.Y0)*w.scale + 0.5)) }

func (w *viewWriter) u32(x uint32) { w.buf = binary.LittleEndian.AppendUint32(w.buf, x) }
func (w *viewWriter) f64(x int64) {
	w.buf = binary.LittleEndian.AppendUint64(w.buf, math.Float64bits(float64(x)))
}
func (w *viewWriter) uv(x int64) { w.buf = binary.AppendUvarint(w.buf, uint64(x)) }
func (w *viewWriter) sv(x int64) { w.buf = binary.AppendVarint(w.buf, x) }

// header writes the fixed fields, the flags and the palette.
func (w *viewWriter) header(e ViewEncoding, h int, pals []pal) {
	v := w.v
	w.u32(viewVersion)
	w.u32(uint32(v.X0))
	w.u32(uint32(v.X1))
	w.u32(uint32(v.Columns))
	w.u32(uint32(len(v.Blocks)))
	w.u32(uint32(v.Summarized))
	w.u32(uint32(h))
	w.f64(v.Y0)
	w.f64(v.Y1)
	w.f64(v.MinBytes)
	var flags byte
	if v.Highlighted != nil {
		flags |= 1
	}
	if e.IDs {
		flags |= 2
	}
	if e.AllKeys {
		flags |= 4
	}
	w.buf = append(w.buf, flags)
	w.uv(int64(len(pals)))
	for _, p := range pals {
		w.buf = append(w.buf, p.cat, p.flag)
		if !e.AllKeys {
			w.uv(int64(uint32(p.key)))
			continue
		}
		for _, k := range p.all {
			w.uv(int64(uint32(k)))
		}
	}
}

// curves writes the allocated and reserved bands (and the highlighted
// curve) as sub-row deltas. Curves far outside the plot (zoomed in bytes)
// are drawn clipped anyway: they are kept within a few plot heights, in a
// few bytes each.
func (w *viewWriter) curves(h int) {
	v := w.v
	curves := [][]int64{v.AllocMin, v.AllocMax, v.ResMin, v.ResMax}
	if v.Highlighted != nil {
		curves = append(curves, v.Highlighted)
	}
	lim := int64(4 * h * subRows)
	for _, col := range curves {
		var prev int64
		for _, x := range col {
			y := min(max(w.q(x), -lim), lim)
			w.sv(y - prev)
			prev = y
		}
	}
}

// times writes each column's time from the first entry, in µs deltas.
func (w *viewWriter) times(m *timeline.Memory) {
	t0 := m.Time(0)
	var prevUS int64
	for c := 0; c < w.v.Columns; c++ {
		var us int64
		if t := m.Time(w.v.Col(c)); t != 0 && t0 != 0 {
			us = (t - t0) / 1000
		}
		w.sv(us - prevUS)
		prevUS = us
	}
}

// blocks writes each block: its columns, palette entry, size and edges.
func (w *viewWriter) blocks(e ViewEncoding, palOf []int) {
	v := w.v
	var prevCol, prevBot int64
	var prevID int32
	for k, b := range v.Blocks {
		first := int64(b.Edges[0].Col)
		w.uv(first - prevCol)
		prevCol = first
		w.uv(int64(endColumn(v, b.End)) - first)
		w.uv(int64(palOf[k]))
		w.uv(max(0, w.q(v.Y0+b.Size)))
		w.uv(int64(len(b.Edges)))
		bot := w.q(b.Edges[0].OffsetBytes)
		w.sv(bot - prevBot)
		prevBot = bot
		for j := 1; j < len(b.Edges); j++ {
			w.uv(int64(b.Edges[j].Col - b.Edges[j-1].Col))
			w.uv(w.q(b.Edges[j-1].OffsetBytes) - w.q(b.Edges[j].OffsetBytes))
		}
		if e.IDs {
			w.uv(int64(b.ID - prevID))
			prevID = b.ID
		}
	}
}

// endColumn is the column after the one holding entry end-1 (a block
// allocated through end-1 is drawn to there), or the view's columns for a
// block alive at its right edge.
func endColumn(v *timeline.View, end int32) int {
	if int(end) >= v.X1 {
		return v.Columns
	}
	// the last column whose first entry is at or before end-1
	lo, hi := 0, v.Columns-1
	for lo < hi {
		c := (lo + hi + 1) / 2
		if v.Col(c) <= int(end)-1 {
			lo = c
		} else {
			hi = c - 1
		}
	}
	return lo + 1
}
