package chart

import (
	_ "embed"
	"encoding/binary"
	"fmt"
	"slices"
)

//go:generate go run gen_glyphs.go

// The face files: what the chart uses of Liberation Sans regular and bold
// (SIL Open Font License 1.1, fontdata/LICENSE-SIL), extracted from the
// TrueType files by gen_glyphs.go. The format is described in package
// internal/glyphgen, which writes it; TestFaceFilesAreUpToDate regenerates
// them and TestFacesMatchSfnt checks every value against sfnt.
//
//go:embed fontdata/sans-regular.bin
var sansRegular []byte

//go:embed fontdata/sans-bold.bin
var sansBold []byte

const faceMagic = "ptscope glyphs 1\n"

// glyphID is a glyph's index in its font; 0 is .notdef, the glyph of
// every rune the font does not map.
type glyphID uint16

// segOp is a segment's operation, numbered as in sfnt.SegmentOp.
type segOp uint8

const (
	segMoveTo segOp = iota
	segLineTo
	segQuadTo
	segCubeTo
)

// fpoint is a point of a glyph outline in font units, y up.
type fpoint struct{ x, y int32 }

// face is one decoded face file. Values are font units.
type face struct {
	data       []byte
	unitsPerEm int
	ascii      [128]glyphID // the glyphs of runes below 128
	runes      []rune       // the mapped runes, ascending
	runeGlyphs []glyphID    // the glyph of runes[i]
	advance    []int        // per glyph
	// The kerning pairs whose first glyph is g are
	// kernSecond[kernAt[g]:kernAt[g+1]], ascending, with kernValue.
	kernAt     []int32
	kernSecond []glyphID
	kernValue  []int
	contours   []int // per contour, the offset in data of its segments
	outlines   []int // per glyph, the offset in data of its references
}

// faceReader reads a face file's varints; a read past the end or a
// malformed varint sets err, and later reads return 0.
type faceReader struct {
	name string
	b    []byte
	off  int
	err  error
}

func (r *faceReader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("chart: font data %s: byte %d: expected %s", r.name, r.off, what)
	}
	r.off = len(r.b)
}

func (r *faceReader) u(what string) uint64 {
	v, n := binary.Uvarint(r.b[r.off:])
	if n <= 0 {
		r.fail(what)
		return 0
	}
	r.off += n
	return v
}

func (r *faceReader) s(what string) int64 {
	v, n := binary.Varint(r.b[r.off:])
	if n <= 0 {
		r.fail(what)
		return 0
	}
	r.off += n
	return v
}

// count reads a count of items that take at least minBytes each.
func (r *faceReader) count(what string, minBytes int) int {
	at := r.off
	v := r.u(what)
	if v > uint64(len(r.b)-r.off)/uint64(minBytes) {
		r.off = at
		r.fail(what + " that fits in the file")
		return 0
	}
	return int(v)
}

// decodeFace decodes a face file, checking every index it holds, so that
// the lookups below need no checks.
func decodeFace(name string, b []byte) (*face, error) {
	if len(b) < len(faceMagic) || string(b[:len(faceMagic)]) != faceMagic {
		return nil, fmt.Errorf("chart: font data %s: byte 0: expected %q", name, faceMagic)
	}
	r := &faceReader{name: name, b: b, off: len(faceMagic)}
	f := &face{data: b}
	f.unitsPerEm = int(r.u("units per em"))
	n := r.count("glyph count", 1)
	if r.err == nil && (f.unitsPerEm == 0 || n == 0 || n > 1<<16) {
		r.fail("a non-zero units per em and 1 to 65536 glyphs")
	}

	nr := r.count("rune count", 2)
	f.runes, f.runeGlyphs = make([]rune, nr), make([]glyphID, nr)
	prevR, prevG := int64(-1), int64(0)
	for i := range nr {
		rn := prevR + int64(r.u("rune delta"))
		g := prevG + r.s("glyph delta")
		if r.err == nil && (rn <= prevR || rn > 0x10FFFF || g < 0 || g >= int64(n)) {
			r.fail("an ascending rune and a glyph index")
		}
		if r.err != nil {
			return nil, r.err
		}
		f.runes[i], f.runeGlyphs[i] = rune(rn), glyphID(g)
		if rn < 128 {
			f.ascii[rn] = glyphID(g)
		}
		prevR, prevG = rn, g
	}

	f.advance = make([]int, n)
	for g := range f.advance {
		f.advance[g] = int(r.s("advance"))
	}

	nk := r.count("kerning pair count", 3)
	f.kernAt = make([]int32, n+1)
	f.kernSecond, f.kernValue = make([]glyphID, nk), make([]int, nk)
	a, b2 := int64(0), int64(0)
	for i := range nk {
		da := int64(r.u("first glyph delta"))
		if a += da; da != 0 {
			b2 = 0
		}
		b2 += int64(r.u("second glyph"))
		if r.err == nil && (a >= int64(n) || b2 >= int64(n) || i > 0 && da == 0 && int(b2) <= int(f.kernSecond[i-1])) {
			r.fail("ascending glyph pairs")
		}
		if r.err != nil {
			return nil, r.err
		}
		f.kernAt[a+1]++
		f.kernSecond[i], f.kernValue[i] = glyphID(b2), int(r.s("kerning"))
	}
	for g := range n {
		f.kernAt[g+1] += f.kernAt[g]
	}

	nc := r.count("contour count", 1)
	f.contours = make([]int, nc)
	for c := range f.contours {
		f.contours[c] = r.off
		for range r.count("segment count", 3) {
			var op segOp
			if r.off < len(r.b) {
				op = segOp(r.b[r.off])
				r.off++
			}
			if op < segLineTo || op > segCubeTo {
				r.fail("a segment op 1, 2 or 3")
			}
			for range 2 * int(op) {
				r.s("coordinate")
			}
		}
	}

	f.outlines = make([]int, n)
	for g := range f.outlines {
		f.outlines[g] = r.off
		for range r.count("contour reference count", 3) {
			if c := r.u("contour index"); r.err == nil && c >= uint64(nc) {
				r.fail("a contour index")
			}
			r.s("x")
			r.s("y")
		}
	}
	if r.err == nil && r.off != len(b) {
		r.fail("the end of the file")
	}
	if r.err != nil {
		return nil, r.err
	}
	return f, nil
}

// glyph returns the glyph of r, 0 (.notdef) if the font does not map r.
func (f *face) glyph(r rune) glyphID {
	if r >= 0 && r < 128 {
		return f.ascii[r]
	}
	if i, ok := slices.BinarySearch(f.runes, r); ok {
		return f.runeGlyphs[i]
	}
	return 0
}

// kern returns the kerning of the pair a, b.
func (f *face) kern(a, b glyphID) int {
	lo, hi := f.kernAt[a], f.kernAt[a+1]
	if lo == hi {
		return 0
	}
	if i, ok := slices.BinarySearch(f.kernSecond[lo:hi], b); ok {
		return f.kernValue[int(lo)+i]
	}
	return 0
}

// outline calls fn for each segment of glyph g's outline, in font units:
// the segments sfnt's LoadGlyph returns at a ppem of unitsPerEm. The
// arguments beyond the op's (1 for MoveTo and LineTo, 2 for QuadTo, 3 for
// CubeTo) are zero.
func (f *face) outline(g glyphID, fn func(op segOp, args [3]fpoint)) {
	// decodeFace checked the data: the reads below cannot fail.
	b := f.data
	off := f.outlines[g]
	u := func() int {
		v, n := binary.Uvarint(b[off:])
		off += n
		return int(v)
	}
	s := func() int32 {
		v, n := binary.Varint(b[off:])
		off += n
		return int32(v)
	}
	for range u() {
		c := u()
		at := fpoint{s(), s()}
		fn(segMoveTo, [3]fpoint{at})
		ret := off
		off = f.contours[c]
		for range u() {
			op := segOp(b[off])
			off++
			var args [3]fpoint
			for i := range int(op) {
				at.x += s()
				at.y += s()
				args[i] = at
			}
			fn(op, args)
		}
		off = ret
	}
}
