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
	W := v.Columns
	h := max(1, e.Height)
	scale := float64(h*subRows) / float64(max(1, v.Y1-v.Y0))
	q := func(b int64) int64 { return int64(math.Floor(float64(b-v.Y0)*scale + 0.5)) }

	// the palette: category, colour key and highlight of the blocks
	type pal struct {
		cat  byte
		flag byte
		key  int32
		all  [5]int32 // with AllKeys: the keys of keyOrder
	}
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

	buf := make([]byte, 0, 64+12*W+12*len(v.Blocks))
	le := binary.LittleEndian
	u32 := func(x uint32) { buf = le.AppendUint32(buf, x) }
	f64 := func(x int64) { buf = le.AppendUint64(buf, math.Float64bits(float64(x))) }
	uv := func(x int64) { buf = binary.AppendUvarint(buf, uint64(x)) }
	sv := func(x int64) { buf = binary.AppendVarint(buf, x) }
	u32(viewVersion)
	u32(uint32(v.X0))
	u32(uint32(v.X1))
	u32(uint32(W))
	u32(uint32(len(v.Blocks)))
	u32(uint32(v.Summarized))
	u32(uint32(h))
	f64(v.Y0)
	f64(v.Y1)
	f64(v.MinBytes)
	var flags byte
	curves := [][]int64{v.AllocMin, v.AllocMax, v.ResMin, v.ResMax}
	if v.Highlighted != nil {
		flags |= 1
		curves = append(curves, v.Highlighted)
	}
	if e.IDs {
		flags |= 2
	}
	if e.AllKeys {
		flags |= 4
	}
	buf = append(buf, flags)
	uv(int64(len(pals)))
	for _, p := range pals {
		buf = append(buf, p.cat, p.flag)
		if !e.AllKeys {
			uv(int64(uint32(p.key)))
			continue
		}
		for _, k := range p.all {
			uv(int64(uint32(k)))
		}
	}
	// curves far outside the plot (zoomed in bytes) are drawn clipped
	// anyway: keep them within a few plot heights, in a few bytes each
	lim := int64(4 * h * subRows)
	for _, col := range curves {
		var prev int64
		for _, x := range col {
			y := min(max(q(x), -lim), lim)
			sv(y - prev)
			prev = y
		}
	}
	for _, p := range v.Phase {
		buf = append(buf, byte(p))
	}
	t0 := m.Time(0)
	var prevUS int64
	for c := 0; c < W; c++ {
		var us int64
		if t := m.Time(v.Col(c)); t != 0 && t0 != 0 {
			us = (t - t0) / 1000
		}
		sv(us - prevUS)
		prevUS = us
	}
	var prevCol, prevBot int64
	var prevID int32
	for k, b := range v.Blocks {
		first := int64(b.Edges[0].Col)
		uv(first - prevCol)
		prevCol = first
		uv(int64(endColumn(v, b.End)) - first)
		uv(int64(palOf[k]))
		uv(max(0, q(v.Y0+b.Size)))
		uv(int64(len(b.Edges)))
		bot := q(b.Edges[0].OffsetBytes)
		sv(bot - prevBot)
		prevBot = bot
		for j := 1; j < len(b.Edges); j++ {
			uv(int64(b.Edges[j].Col - b.Edges[j-1].Col))
			uv(q(b.Edges[j-1].OffsetBytes) - q(b.Edges[j].OffsetBytes))
		}
		if e.IDs {
			uv(int64(b.ID - prevID))
			prevID = b.ID
		}
	}
	return buf
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
