package chart

import (
	"bufio"
	"io"
	"math"
	"strconv"
	"strings"
)

// svgFontFamily names Liberation Sans, used to measure text, and its
// metric-compatible stand-ins.
const svgFontFamily = "'Liberation Sans', Arial, Helvetica, sans-serif"

// writeSVG paints s as SVG. Coordinates are rounded to 0.01 px, so the
// output is byte-for-byte deterministic.
func writeSVG(w io.Writer, s *scene) error {
	bw := bufio.NewWriter(w)
	b := make([]byte, 0, 4096)
	b = append(b, `<svg xmlns="http://www.w3.org/2000/svg" width="`...)
	b = num(b, s.w)
	b = append(b, `" height="`...)
	b = num(b, s.h)
	b = append(b, `" viewBox="0 0 `...)
	b = num(b, s.w)
	b = append(b, ' ')
	b = num(b, s.h)
	b = append(b, `" font-family="`...)
	b = append(b, svgFontFamily...)
	b = append(b, "\">\n"...)
	if s.title != "" {
		b = append(b, "<title>"...)
		b = esc(b, s.title)
		b = append(b, "</title>\n"...)
	}
	for i := range s.items {
		it := &s.items[i]
		switch it.kind {
		case kindPath:
			b = svgPath(b, it)
		case kindText:
			b = svgText(b, it)
		}
		if len(b) > 32<<10 {
			if _, err := bw.Write(b); err != nil {
				return err
			}
			b = b[:0]
		}
	}
	b = append(b, "</svg>\n"...)
	if _, err := bw.Write(b); err != nil {
		return err
	}
	return bw.Flush()
}

func svgPath(b []byte, it *item) []byte {
	if len(it.pts) == 0 {
		return b
	}
	b = append(b, `<path d="`...)
	move := true
	for _, p := range it.pts {
		if math.IsNaN(p.x) {
			move = true
			continue
		}
		if move {
			b = append(b, 'M')
			move = false
		} else {
			b = append(b, 'L')
		}
		b = num(b, p.x)
		b = append(b, ' ')
		b = num(b, p.y)
	}
	if it.closed {
		b = append(b, 'Z')
	}
	b = append(b, '"')
	if it.fill.none() {
		b = append(b, ` fill="none"`...)
	} else {
		b = svgColor(b, " fill", it.fill)
	}
	if !it.stroke.none() && it.width > 0 {
		b = svgColor(b, " stroke", it.stroke)
		b = append(b, ` stroke-width="`...)
		b = num(b, it.width)
		b = append(b, '"')
		if len(it.pts) > 2 {
			b = append(b, ` stroke-linejoin="round"`...)
		}
		if len(it.dash) > 0 {
			b = append(b, ` stroke-dasharray="`...)
			for k, d := range it.dash {
				if k > 0 {
					b = append(b, ' ')
				}
				b = num(b, d)
			}
			b = append(b, '"')
		}
	}
	return append(b, "/>\n"...)
}

func svgText(b []byte, it *item) []byte {
	b = append(b, `<text x="`...)
	b = num(b, it.x)
	b = append(b, `" y="`...)
	b = num(b, it.y)
	b = append(b, `" font-size="`...)
	b = num(b, it.size)
	b = append(b, '"')
	if it.bold {
		b = append(b, ` font-weight="bold"`...)
	}
	switch it.anchor {
	case anchorMiddle:
		b = append(b, ` text-anchor="middle"`...)
	case anchorEnd:
		b = append(b, ` text-anchor="end"`...)
	}
	if it.rotate != 0 {
		b = append(b, ` transform="rotate(`...)
		b = num(b, it.rotate)
		b = append(b, ' ')
		b = num(b, it.x)
		b = append(b, ' ')
		b = num(b, it.y)
		b = append(b, `)"`...)
	}
	b = svgColor(b, " fill", it.color)
	b = append(b, '>')
	b = esc(b, it.text)
	return append(b, "</text>\n"...)
}

func num(b []byte, v float64) []byte {
	v = math.Round(v*100) / 100
	if v == 0 {
		v = 0 // no "-0"
	}
	return strconv.AppendFloat(b, v, 'f', -1, 64)
}

func svgColor(b []byte, attr string, c rgba) []byte {
	const digits = "0123456789abcdef"
	b = append(b, attr...)
	b = append(b, `="#`...)
	for _, v := range []uint8{c.r, c.g, c.b} {
		b = append(b, digits[v>>4], digits[v&15])
	}
	b = append(b, '"')
	if c.a != 255 {
		b = append(b, attr...)
		b = append(b, `-opacity="`...)
		b = num(b, float64(c.a)/255)
		b = append(b, '"')
	}
	return b
}

var xmlEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&#39;")

func esc(b []byte, s string) []byte {
	return append(b, xmlEscaper.Replace(s)...)
}
