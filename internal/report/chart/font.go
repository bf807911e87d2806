package chart

import (
	"fmt"
	"sync"

	"codeberg.org/go-fonts/liberation/liberationsansbold"
	"codeberg.org/go-fonts/liberation/liberationsansregular"
	"golang.org/x/image/font"
	"golang.org/x/image/font/sfnt"
	"golang.org/x/image/math/fixed"
)

// Fonts: Liberation Sans (metric-compatible with Arial and Helvetica, which
// the SVG names as fallbacks), regular and bold, parsed once from the TTF
// files that codeberg.org/go-fonts/liberation embeds (data only, no code).
// Layout measures text with them, and the PNG writer draws their outlines.
type faces struct{ regular, bold *sfnt.Font }

var loadFaces = sync.OnceValues(func() (faces, error) {
	var f faces
	var err error
	if f.regular, err = sfnt.Parse(liberationsansregular.TTF); err != nil {
		return f, fmt.Errorf("chart: Liberation Sans: %w", err)
	}
	if f.bold, err = sfnt.Parse(liberationsansbold.TTF); err != nil {
		return f, fmt.Errorf("chart: Liberation Sans Bold: %w", err)
	}
	return f, nil
})

func (f faces) font(bold bool) *sfnt.Font {
	if bold {
		return f.bold
	}
	return f.regular
}

// glyphs calls fn for every glyph of str with its pen position, both in
// font units: advances plus pair kerning, unhinted. It returns the
// advance of the whole string in font units. Text that layout measures
// and text that the PNG writer draws are placed by this one walk, so the
// pixels line up with the widths the layout reserved.
func glyphs(fnt *sfnt.Font, buf *sfnt.Buffer, str string, fn func(g sfnt.GlyphIndex, x int)) int {
	// At a ppem of unitsPerEm (in 26.6), sfnt's scaled values are font
	// units, exactly.
	ppem := fixed.Int26_6(fnt.UnitsPerEm())
	width := 0
	var prev sfnt.GlyphIndex
	for i, r := range str {
		g, err := fnt.GlyphIndex(buf, r)
		if err != nil {
			g = 0 // .notdef
		}
		if i > 0 {
			if k, err := fnt.Kern(buf, prev, g, ppem, font.HintingNone); err == nil {
				width += int(k) // else no kerning for the pair (sfnt.ErrNotFound)
			}
		}
		if fn != nil {
			fn(g, width)
		}
		if adv, err := fnt.GlyphAdvance(buf, g, ppem, font.HintingNone); err == nil {
			width += int(adv)
		}
		prev = g
	}
	return width
}

// measure returns the width of str in pixels at size (pixels per em).
func (f faces) measure(str string, size float64, bold bool) float64 {
	fnt := f.font(bold)
	var buf sfnt.Buffer
	w := glyphs(fnt, &buf, str, nil)
	return float64(w) * (size / float64(fnt.UnitsPerEm()))
}

// truncate shortens str with a trailing ellipsis so that it fits in max
// pixels. It returns "" if not even the ellipsis fits.
func (f faces) truncate(str string, size float64, bold bool, max float64) string {
	if f.measure(str, size, bold) <= max {
		return str
	}
	const ell = "…"
	if f.measure(ell, size, bold) > max {
		return ""
	}
	// Binary search on the number of runes kept.
	runes := []rune(str)
	lo, hi := 0, len(runes)
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if f.measure(string(runes[:mid])+ell, size, bold) <= max {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return string(runes[:lo]) + ell
}
