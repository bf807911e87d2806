package chart

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"io"
	"math"

	"golang.org/x/image/vector"
)

// pngScale is the PNG's pixels per SVG pixel.
const pngScale = 2

// writePNG paints s, scaled by pngScale, on a white image. Every item
// becomes an outline (a path's polygon, a stroke's outline, a text's glyph
// outlines) whose anti-aliased coverage golang.org/x/image/vector
// accumulates exactly, then composites over the image in the item's
// colour.
func writePNG(w io.Writer, s *scene) error {
	img, err := paintScene(s)
	if err != nil {
		return err
	}
	if err := encodePNG(w, img); err != nil {
		return fmt.Errorf("chart: writing png: %w", err)
	}
	return nil
}

// paintScene paints s, scaled by pngScale, on a new white image.
func paintScene(s *scene) (*image.RGBA, error) {
	f, err := loadFaces()
	if err != nil {
		return nil, err
	}
	img := image.NewRGBA(image.Rect(0, 0, int(s.w*pngScale+0.5), int(s.h*pngScale+0.5)))
	draw.Draw(img, img.Bounds(), image.White, image.Point{}, draw.Src)
	p := &painter{img: img, f: f}
	for i := range s.items {
		it := &s.items[i]
		switch it.kind {
		case kindPath:
			p.path(it)
		case kindText:
			p.text(it)
		}
	}
	return img, nil
}

// painter holds what painting one scene reuses from item to item.
type painter struct {
	img      *image.RGBA
	f        faces
	z        vector.Rasterizer
	src      image.Uniform
	sh       shape
	sub, arc []pt
}

// paint rasterises the outline collected in p.sh and composites it over
// the image in colour c; only the outline's bounds are rasterised.
func (p *painter) paint(c rgba) {
	sh := &p.sh
	if len(sh.ops) == 0 || c.none() {
		return
	}
	b := p.img.Bounds()
	clampX := func(v float64) int { return int(math.Max(0, math.Min(v, float64(b.Max.X)))) }
	clampY := func(v float64) int { return int(math.Max(0, math.Min(v, float64(b.Max.Y)))) }
	r := image.Rect(clampX(math.Floor(sh.x0)-1), clampY(math.Floor(sh.y0)-1), clampX(math.Ceil(sh.x1)+1), clampY(math.Ceil(sh.y1)+1))
	if r.Empty() {
		return
	}
	z := &p.z
	z.Reset(r.Dx(), r.Dy())
	ox, oy := float64(r.Min.X), float64(r.Min.Y)
	// far outside the image a point's place does not change the coverage
	// inside it much, and the rasteriser loops over the rows a segment
	// spans: points are kept within a margin of the image
	const margin = 1 << 16
	lim := func(v float64) float32 { return float32(math.Max(-margin, math.Min(v, margin))) }
	at := func(q pt) (float32, float32) { return lim(q.x - ox), lim(q.y - oy) }
	for _, o := range sh.ops {
		switch o.op {
		case opMove:
			z.MoveTo(at(o.p[0]))
		case opLine:
			z.LineTo(at(o.p[0]))
		case opQuad:
			ax, ay := at(o.p[0])
			bx, by := at(o.p[1])
			z.QuadTo(ax, ay, bx, by)
		case opCube:
			ax, ay := at(o.p[0])
			bx, by := at(o.p[1])
			cx, cy := at(o.p[2])
			z.CubeTo(ax, ay, bx, by, cx, cy)
		case opClose:
			z.ClosePath()
		}
	}
	p.src.C = color.NRGBA{c.r, c.g, c.b, c.a}
	z.Draw(p.img, r, &p.src, image.Point{})
}

// path paints a path item: its fill, then its stroke (round joins, butt
// ends, dashes restarting on every subpath, as the SVG draws it).
func (p *painter) path(it *item) {
	if len(it.pts) == 0 {
		return
	}
	if !it.fill.none() {
		p.sh.reset()
		p.subpaths(it.pts, func(sub []pt) { p.sh.contour(sub) })
		p.paint(it.fill)
	}
	if it.stroke.none() || it.width <= 0 {
		return
	}
	p.sh.reset()
	lw := it.width * pngScale
	dash := make([]float64, len(it.dash))
	for k, d := range it.dash {
		dash[k] = d * pngScale
	}
	p.subpaths(it.pts, func(sub []pt) {
		if it.closed && len(sub) > 2 {
			sub = append(sub, sub[0])
		}
		if len(dash) == 0 {
			p.stroke(sub, lw, it.closed)
			return
		}
		dashes(sub, dash, func(d []pt) { p.stroke(d, lw, false) })
	})
	p.paint(it.stroke)
}

// subpaths calls fn with every run of finite points of pts (NaN breaks a
// path), scaled to image pixels; fn may append to its argument.
func (p *painter) subpaths(pts []pt, fn func([]pt)) {
	sub := p.sub[:0]
	flush := func() {
		if len(sub) > 0 {
			fn(sub)
		}
		sub = sub[:0]
	}
	for _, q := range pts {
		if !finite(q.x) || !finite(q.y) {
			flush()
			continue
		}
		sub = append(sub, pt{q.x * pngScale, q.y * pngScale})
	}
	flush()
	p.sub = sub
}

// stroke adds the outline of a polyline of width lw to p.sh: one
// rectangle per segment and a round join filling the outer side of every
// bend. All are wound the same way, so where they overlap the coverage
// only saturates, and where they meet edge to edge it adds up exactly.
// closed joins the last segment to the first.
func (p *painter) stroke(pts []pt, lw float64, closed bool) {
	hw := lw / 2
	var first, prev pt // unit directions
	have := false
	for i := 0; i+1 < len(pts); i++ {
		a, b := pts[i], pts[i+1]
		dx, dy := b.x-a.x, b.y-a.y
		l := math.Hypot(dx, dy)
		if l == 0 {
			continue
		}
		d := pt{dx / l, dy / l}
		if have {
			p.join(a, prev, d, hw)
		} else {
			first = d
		}
		nx, ny := -d.y*hw, d.x*hw
		q := [4]pt{{a.x + nx, a.y + ny}, {b.x + nx, b.y + ny}, {b.x - nx, b.y - ny}, {a.x - nx, a.y - ny}}
		p.sh.polygon(q[:])
		prev, have = d, true
	}
	if closed && have {
		p.join(pts[0], prev, first, hw)
	}
}

// arcTolerance is the most, in pixels, a join's polygon departs from its
// circle.
const arcTolerance = 0.05

// join adds the round join at v between a segment of direction d1 and the
// next of direction d2: the pie slice of radius hw that fills the gap
// between their rectangles on the outer side of the bend.
func (p *painter) join(v, d1, d2 pt, hw float64) {
	cross := d1.x*d2.y - d1.y*d2.x
	dot := d1.x*d2.x + d1.y*d2.y
	if math.Abs(cross) < 1e-9 && dot > 0 {
		return // straight on
	}
	// o1 is the outer normal of the first segment; the turn from d1 to d2
	// turns it into the second's. A U-turn bulges forwards.
	s := -1.0
	if cross < 0 {
		s = 1
	}
	a1 := math.Atan2(s*d1.x, -s*d1.y)
	turn := math.Atan2(cross, dot)
	steps := 1
	if hw > arcTolerance {
		steps = max(1, int(math.Ceil(math.Abs(turn)/(2*math.Acos(1-arcTolerance/hw)))))
	}
	arc := append(p.arc[:0], v)
	for k := 0; k <= steps; k++ {
		sin, cos := math.Sincos(a1 + turn*float64(k)/float64(steps))
		arc = append(arc, pt{v.x + hw*cos, v.y + hw*sin})
	}
	p.sh.polygon(arc)
	p.arc = arc
}

// dashes calls fn with each dash of the polyline pts under pattern (dash
// and gap lengths in pixels, alternating, repeated twice when odd, as in
// SVG); a pattern with a negative length or no length draws pts whole.
func dashes(pts []pt, pattern []float64, fn func([]pt)) {
	total := 0.0
	for _, d := range pattern {
		if d < 0 || !finite(d) {
			total = 0
			break
		}
		total += d
	}
	if total <= 0 {
		fn(pts)
		return
	}
	if len(pattern)%2 == 1 {
		pattern = append(pattern[:len(pattern):len(pattern)], pattern...)
	}
	k, left, on := 0, pattern[0], true
	cur := []pt{pts[0]}
	for i := 0; i+1 < len(pts); i++ {
		a, b := pts[i], pts[i+1]
		l := math.Hypot(b.x-a.x, b.y-a.y)
		if l == 0 {
			continue
		}
		t := 0.0
		for l-t >= left {
			t += left
			q := pt{a.x + (b.x-a.x)*t/l, a.y + (b.y-a.y)*t/l}
			if on {
				fn(append(cur, q))
				cur = cur[:0]
			} else {
				cur = append(cur[:0], q)
			}
			on = !on
			k = (k + 1) % len(pattern)
			left = pattern[k]
		}
		left -= l - t
		if on {
			cur = append(cur, b)
		}
	}
	if on && len(cur) > 1 {
		fn(cur)
	}
}

// text paints a text item: the outlines of its glyphs, placed along the
// baseline by the walk that layout measured them with, from the anchor,
// rotated about (x, y).
func (p *painter) text(it *item) {
	fnt := p.f.font(it.bold)
	k := it.size * pngScale / float64(fnt.unitsPerEm) // pixels per font unit
	dx := 0.0
	switch it.anchor {
	case anchorMiddle:
		dx = -float64(fnt.glyphs(it.text, nil)) * k / 2
	case anchorEnd:
		dx = -float64(fnt.glyphs(it.text, nil)) * k
	}
	sin, cos := math.Sincos(it.rotate * math.Pi / 180)
	ox, oy := it.x*pngScale, it.y*pngScale
	at := func(x, y float64) pt { return pt{ox + x*cos - y*sin, oy + x*sin + y*cos} }
	p.sh.reset()
	fnt.glyphs(it.text, func(g glyphID, x int) {
		gx := dx + float64(x)*k
		q := func(v fpoint) pt { return at(gx+float64(v.x)*k, float64(v.y)*k) }
		open := false
		fnt.outline(g, func(op segOp, a [3]fpoint) {
			switch op {
			case segMoveTo:
				if open {
					p.sh.close()
				}
				p.sh.moveTo(q(a[0]))
				open = true
			case segLineTo:
				p.sh.lineTo(q(a[0]))
			case segQuadTo:
				p.sh.quadTo(q(a[0]), q(a[1]))
			case segCubeTo:
				p.sh.cubeTo(q(a[0]), q(a[1]), q(a[2]))
			}
		})
		if open {
			p.sh.close()
		}
	})
	p.paint(it.color)
}

type shapeOpKind uint8

const (
	opMove shapeOpKind = iota
	opLine
	opQuad
	opCube
	opClose
)

type shapeOp struct {
	op shapeOpKind
	p  [3]pt
}

// shape is an outline in image pixels, made of closed contours, and its
// bounds (of every point, control points included, which bound curves).
type shape struct {
	ops            []shapeOp
	x0, y0, x1, y1 float64
}

func (sh *shape) reset() {
	sh.ops = sh.ops[:0]
	sh.x0, sh.y0 = math.Inf(1), math.Inf(1)
	sh.x1, sh.y1 = math.Inf(-1), math.Inf(-1)
}

func (sh *shape) grow(q pt) {
	sh.x0, sh.y0 = math.Min(sh.x0, q.x), math.Min(sh.y0, q.y)
	sh.x1, sh.y1 = math.Max(sh.x1, q.x), math.Max(sh.y1, q.y)
}

func (sh *shape) moveTo(a pt) {
	sh.grow(a)
	sh.ops = append(sh.ops, shapeOp{op: opMove, p: [3]pt{a}})
}

func (sh *shape) lineTo(a pt) {
	sh.grow(a)
	sh.ops = append(sh.ops, shapeOp{op: opLine, p: [3]pt{a}})
}

func (sh *shape) quadTo(a, b pt) {
	sh.grow(a)
	sh.grow(b)
	sh.ops = append(sh.ops, shapeOp{op: opQuad, p: [3]pt{a, b}})
}

func (sh *shape) cubeTo(a, b, c pt) {
	sh.grow(a)
	sh.grow(b)
	sh.grow(c)
	sh.ops = append(sh.ops, shapeOp{op: opCube, p: [3]pt{a, b, c}})
}

func (sh *shape) close() { sh.ops = append(sh.ops, shapeOp{op: opClose}) }

// contour adds pts as one closed contour, as given.
func (sh *shape) contour(pts []pt) {
	sh.moveTo(pts[0])
	for _, q := range pts[1:] {
		sh.lineTo(q)
	}
	sh.close()
}

// polygon adds pts as one closed contour wound with a positive signed area
// (clockwise on screen), whatever their order; a polygon without area adds
// nothing.
func (sh *shape) polygon(pts []pt) {
	area := 0.0
	for i, a := range pts {
		b := pts[(i+1)%len(pts)]
		area += a.x*b.y - b.x*a.y
	}
	switch {
	case area > 0:
		sh.contour(pts)
	case area < 0:
		sh.moveTo(pts[len(pts)-1])
		for i := len(pts) - 2; i >= 0; i-- {
			sh.lineTo(pts[i])
		}
		sh.close()
	}
}
