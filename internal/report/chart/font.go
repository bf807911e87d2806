package chart

import "sync"

// Fonts: Liberation Sans (metric-compatible with Arial and Helvetica, which
// the SVG names as fallbacks), regular and bold, decoded once from the face
// files the package embeds (glyphs.go). Layout measures text with them,
// and the PNG writer draws their outlines.
type faces struct{ regular, bold *face }

var loadFaces = sync.OnceValues(func() (faces, error) {
	var f faces
	var err error
	if f.regular, err = decodeFace("sans-regular.bin", sansRegular); err != nil {
		return f, err
	}
	if f.bold, err = decodeFace("sans-bold.bin", sansBold); err != nil {
		return f, err
	}
	return f, nil
})

func (f faces) font(bold bool) *face {
	if bold {
		return f.bold
	}
	return f.regular
}

// glyphs calls fn for every glyph of str with its pen position, both in
// font units: advances plus pair kerning, unhinted, as sfnt computes them
// at a ppem of unitsPerEm. It returns the advance of the whole string in
// font units. Text that layout measures and text that the PNG writer
// draws are placed by this one walk, so the pixels line up with the widths
// the layout reserved.
func (f *face) glyphs(str string, fn func(g glyphID, x int)) int {
	width := 0
	var prev glyphID
	for i, r := range str {
		g := f.glyph(r)
		if i > 0 {
			width += f.kern(prev, g)
		}
		if fn != nil {
			fn(g, width)
		}
		width += f.advance[g]
		prev = g
	}
	return width
}

// measure returns the width of str in pixels at size (pixels per em).
func (f faces) measure(str string, size float64, bold bool) float64 {
	fnt := f.font(bold)
	w := fnt.glyphs(str, nil)
	return float64(w) * (size / float64(fnt.unitsPerEm))
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
