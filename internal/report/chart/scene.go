package chart

import (
	"fmt"
	"math"
	"unicode/utf8"
)

// A scene is the backend-neutral drawing of one chart: a canvas size in
// pixels (y grows downwards, as in SVG) and a list of items painted in order.
// Layout happens once, into a scene; the SVG and PNG writers only paint it.
type scene struct {
	w, h  float64
	title string
	items []item
}

type pt struct{ x, y float64 }

// gap is a point that breaks a path (a "move to" before the next point).
var gap = pt{math.NaN(), math.NaN()}

type rgba struct{ r, g, b, a uint8 }

func (c rgba) none() bool { return c.a == 0 }

func hex(s string) rgba {
	var c rgba
	fmt.Sscanf(s, "#%02x%02x%02x", &c.r, &c.g, &c.b)
	c.a = 255
	return c
}

type anchor uint8

const (
	anchorStart anchor = iota
	anchorMiddle
	anchorEnd
)

type itemKind uint8

const (
	kindPath itemKind = iota
	kindText
)

// item is a path (open or closed, filled and/or stroked) or a text.
type item struct {
	kind itemKind

	// path
	pts    []pt
	closed bool
	fill   rgba
	stroke rgba
	width  float64
	dash   []float64

	// text: (x, y) is the baseline point the anchor refers to; rotate is in
	// degrees, clockwise on screen, around (x, y).
	text   string
	x, y   float64
	size   float64
	bold   bool
	anchor anchor
	rotate float64
	color  rgba
}

func (s *scene) path(pts []pt, stroke rgba, width float64, dash ...float64) {
	s.items = append(s.items, item{kind: kindPath, pts: pts, stroke: stroke, width: width, dash: dash})
}

func (s *scene) line(x0, y0, x1, y1 float64, stroke rgba, width float64, dash ...float64) {
	s.path([]pt{{x0, y0}, {x1, y1}}, stroke, width, dash...)
}

func (s *scene) polygon(pts []pt, fill rgba) {
	s.items = append(s.items, item{kind: kindPath, pts: pts, closed: true, fill: fill})
}

func (s *scene) rect(x, y, w, h float64, fill rgba) {
	if w <= 0 || h <= 0 {
		return
	}
	s.polygon([]pt{{x, y}, {x + w, y}, {x + w, y + h}, {x, y + h}}, fill)
}

func (s *scene) text(x, y float64, str string, size float64, bold bool, a anchor, color rgba) {
	if str == "" {
		return
	}
	s.items = append(s.items, item{kind: kindText, text: str, x: x, y: y, size: size, bold: bold, anchor: a, color: color})
}

func (s *scene) rotatedText(x, y float64, str string, size float64, a anchor, deg float64, color rgba) {
	if str == "" {
		return
	}
	s.items = append(s.items, item{kind: kindText, text: str, x: x, y: y, size: size, anchor: a, rotate: deg, color: color})
}

// Theme colours and sizes, shared by every chart.
var (
	colText    = hex("#222222")
	colMuted   = hex("#555555")
	colAxis    = hex("#9a9a9a")
	colGrid    = hex("#e6e6e6")
	colMarker  = hex("#444444")
	colWhite   = hex("#ffffff")
	colNoData  = hex("#888888")
	titleSize  = 16.0
	labelSize  = 12.0
	tickSize   = 11.0
	markerSize = 10.0
)

// palette holds Tableau 10, then the lighter half of Tableau 20.
var palette = [...]string{
	"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
	"#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac",
	"#a0cbe8", "#ffbe7d", "#ff9d9a", "#86bcb6", "#8cd17d",
	"#f1ce63", "#d4a6c8", "#fabfd2", "#d7b5a6", "#79706e",
}

// seriesColor returns the stable colour of series i.
func seriesColor(i int) rgba {
	return hex(palette[i%len(palette)])
}

// sanitizeText drops invalid UTF-8 and control characters from labels.
func sanitizeText(s string) string {
	ok := true
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r == utf8.RuneError {
			ok = false
			break
		}
	}
	if ok {
		return s
	}
	out := make([]rune, 0, len(s))
	for _, r := range s {
		switch {
		case r == utf8.RuneError:
			out = append(out, '?')
		case r < 0x20 || r == 0x7f:
			out = append(out, ' ')
		default:
			out = append(out, r)
		}
	}
	return string(out)
}
