// Package glyphgen extracts, at go generate time, what the chart package
// needs of its two fonts (Liberation Sans regular and bold, SIL Open Font
// License 1.1) into a compact binary file per face, which chart embeds. The
// binary then needs neither golang.org/x/image/font/sfnt (and the x/text it
// pulls in) nor the TrueType files: only the chart's tests and this
// generator import them.
//
// Every value is what sfnt itself reports, at a ppem of unitsPerEm, where
// sfnt's 26.6 results are exact font units: the glyph of every rune that
// GlyphIndex maps, each glyph's GlyphAdvance (unhinted), every glyph pair
// for which Kern returns a non-zero value (all pairs are asked, so it does
// not matter whether sfnt reads the value from GPOS or from the kern
// table), and each glyph's LoadGlyph segments.
//
// # Format
//
// All integers are encoding/binary varints: u = Uvarint, s = Varint
// (zigzag). A face file is:
//
//	magic       "ptscope glyphs 1\n"
//	u unitsPerEm
//	u numGlyphs
//	u runeCount, then per mapped rune in ascending order:
//	            u rune - previous rune (the first: rune + 1)
//	            s glyph - previous glyph (the first: glyph)
//	per glyph:  s advance
//	u kernCount, then per pair in ascending (first, second) order:
//	            u first - previous first
//	            u second, or second - previous second when first repeats
//	            s kerning
//	u contourCount, then per contour:
//	            u segmentCount (after the contour's MoveTo)
//	            per segment: a byte, the sfnt.SegmentOp (LineTo 1,
//	            QuadTo 2, CubeTo 3), then per argument point s dx, s dy
//	            from the previous point, the first from the MoveTo point
//	per glyph:  u contour reference count, then per reference
//	            u contour index, s MoveTo x, s MoveTo y
//
// A glyph's segments are, for each of its references in turn, a MoveTo to
// the reference's point followed by the contour's segments, translated by
// that point. Contours are shared: an accented letter, a composite glyph,
// repeats its base letter's contours at another place, which halves the
// file.
package glyphgen

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unicode/utf8"

	"codeberg.org/go-fonts/liberation/liberationsansbold"
	"codeberg.org/go-fonts/liberation/liberationsansregular"
	"golang.org/x/image/font"
	"golang.org/x/image/font/sfnt"
	"golang.org/x/image/math/fixed"
)

// Magic starts every face file; its number changes with the format.
const Magic = "ptscope glyphs 1\n"

// Face is one font the chart draws with: the file the generator writes
// (relative to the chart package) and the TrueType data it is made from.
type Face struct {
	File string
	TTF  []byte
}

// Faces are the chart's fonts, in the order chart embeds them.
var Faces = []Face{
	{"fontdata/sans-regular.bin", liberationsansregular.TTF},
	{"fontdata/sans-bold.bin", liberationsansbold.TTF},
}

// Extract parses a TrueType font with sfnt and returns its face file.
func Extract(ttf []byte) ([]byte, error) {
	f, err := sfnt.Parse(ttf)
	if err != nil {
		return nil, err
	}
	var buf sfnt.Buffer
	upem := int(f.UnitsPerEm())
	ppem := fixed.Int26_6(upem) // sfnt's values are then font units
	n := f.NumGlyphs()
	if n > 1<<16 {
		return nil, fmt.Errorf("%d glyphs", n)
	}
	out := []byte(Magic)
	out = binary.AppendUvarint(out, uint64(upem))
	out = binary.AppendUvarint(out, uint64(n))

	// The rune map: every rune GlyphIndex maps to a glyph other than
	// .notdef (glyph 0), which is what an unmapped rune gets.
	var runes []rune
	var glyphs []sfnt.GlyphIndex
	for r := rune(0); r <= utf8.MaxRune; r++ {
		g, err := f.GlyphIndex(&buf, r)
		if err != nil {
			return nil, fmt.Errorf("rune %U: %w", r, err)
		}
		if g != 0 {
			runes = append(runes, r)
			glyphs = append(glyphs, g)
		}
	}
	out = binary.AppendUvarint(out, uint64(len(runes)))
	prevR, prevG := rune(-1), 0
	for i, r := range runes {
		out = binary.AppendUvarint(out, uint64(r-prevR))
		out = binary.AppendVarint(out, int64(int(glyphs[i])-prevG))
		prevR, prevG = r, int(glyphs[i])
	}

	for g := range n {
		adv, err := f.GlyphAdvance(&buf, sfnt.GlyphIndex(g), ppem, font.HintingNone)
		if err != nil {
			return nil, fmt.Errorf("glyph %d: advance: %w", g, err)
		}
		out = binary.AppendVarint(out, int64(adv))
	}

	out, err = appendKerning(out, f, &buf, n, ppem)
	if err != nil {
		return nil, err
	}
	return appendOutlines(out, f, &buf, n, ppem)
}

// appendKerning asks sfnt for every ordered glyph pair (about 7M for these
// fonts, a fraction of a second) and keeps the non-zero values.
func appendKerning(out []byte, f *sfnt.Font, buf *sfnt.Buffer, n int, ppem fixed.Int26_6) ([]byte, error) {
	type pair struct {
		a, b int
		k    int64
	}
	var pairs []pair
	for a := range n {
		for b := range n {
			k, err := f.Kern(buf, sfnt.GlyphIndex(a), sfnt.GlyphIndex(b), ppem, font.HintingNone)
			if errors.Is(err, sfnt.ErrNotFound) || err == nil && k == 0 {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("kerning %d, %d: %w", a, b, err)
			}
			pairs = append(pairs, pair{a, b, int64(k)})
		}
	}
	out = binary.AppendUvarint(out, uint64(len(pairs)))
	prevA, prevB := 0, 0
	for _, p := range pairs {
		out = binary.AppendUvarint(out, uint64(p.a-prevA))
		if p.a == prevA {
			out = binary.AppendUvarint(out, uint64(p.b-prevB))
		} else {
			out = binary.AppendUvarint(out, uint64(p.b))
		}
		out = binary.AppendVarint(out, p.k)
		prevA, prevB = p.a, p.b
	}
	return out, nil
}

// contourRef places a shared contour in a glyph.
type contourRef struct {
	contour int
	x, y    int64
}

// appendOutlines writes the shared contours, then each glyph's references.
func appendOutlines(out []byte, f *sfnt.Font, buf *sfnt.Buffer, n int, ppem fixed.Int26_6) ([]byte, error) {
	index := map[string]int{} // a contour's encoding -> its index
	var contours []byte
	refs := make([][]contourRef, n)
	for g := range n {
		segs, err := f.LoadGlyph(buf, sfnt.GlyphIndex(g), ppem, nil)
		if err != nil {
			return nil, fmt.Errorf("glyph %d: outline: %w", g, err)
		}
		for len(segs) > 0 {
			if segs[0].Op != sfnt.SegmentOpMoveTo {
				return nil, fmt.Errorf("glyph %d: a contour starts with segment op %d, not a MoveTo", g, segs[0].Op)
			}
			end := 1
			for end < len(segs) && segs[end].Op != sfnt.SegmentOpMoveTo {
				end++
			}
			start := segs[0].Args[0]
			enc, err := encodeContour(segs[1:end], start)
			if err != nil {
				return nil, fmt.Errorf("glyph %d: %w", g, err)
			}
			i, ok := index[string(enc)]
			if !ok {
				i = len(index)
				index[string(enc)] = i
				contours = append(contours, enc...)
			}
			refs[g] = append(refs[g], contourRef{i, int64(start.X), int64(start.Y)})
			segs = segs[end:]
		}
	}
	out = binary.AppendUvarint(out, uint64(len(index)))
	out = append(out, contours...)
	for _, rs := range refs {
		out = binary.AppendUvarint(out, uint64(len(rs)))
		for _, r := range rs {
			out = binary.AppendUvarint(out, uint64(r.contour))
			out = binary.AppendVarint(out, r.x)
			out = binary.AppendVarint(out, r.y)
		}
	}
	return out, nil
}

// encodeContour encodes the segments that follow a MoveTo to start.
func encodeContour(segs []sfnt.Segment, start fixed.Point26_6) ([]byte, error) {
	enc := binary.AppendUvarint(nil, uint64(len(segs)))
	prev := start
	for _, s := range segs {
		var args int
		switch s.Op {
		case sfnt.SegmentOpLineTo:
			args = 1
		case sfnt.SegmentOpQuadTo:
			args = 2
		case sfnt.SegmentOpCubeTo:
			args = 3
		default:
			return nil, fmt.Errorf("segment op %d inside a contour", s.Op)
		}
		enc = append(enc, byte(s.Op))
		for _, p := range s.Args[:args] {
			enc = binary.AppendVarint(enc, int64(p.X-prev.X))
			enc = binary.AppendVarint(enc, int64(p.Y-prev.Y))
			prev = p
		}
	}
	return enc, nil
}
