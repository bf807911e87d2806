package chart

import (
	"fmt"
	"image/color"
	"io"
	"math"

	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/vgimg"
)

// pngScale is the PNG's pixels per SVG pixel.
const pngScale = 2

// writePNG paints s with gonum's raster backend. Scene units become points
// on a canvas of 72*pngScale DPI, so one SVG pixel is pngScale PNG pixels.
func writePNG(w io.Writer, s *scene) error {
	f, err := loadFaces()
	if err != nil {
		return err
	}
	c := vgimg.NewWith(vgimg.UseWH(vg.Length(s.w), vg.Length(s.h)), vgimg.UseDPI(72*pngScale))
	h := s.h
	for i := range s.items {
		it := &s.items[i]
		switch it.kind {
		case kindPath:
			pngPath(c, it, h)
		case kindText:
			pngText(c, f, it, h)
		}
	}
	if _, err := (vgimg.PngCanvas{Canvas: c}).WriteTo(w); err != nil {
		return fmt.Errorf("chart: writing png: %w", err)
	}
	return nil
}

func nrgba(c rgba) color.NRGBA { return color.NRGBA{c.r, c.g, c.b, c.a} }

func pngPath(c *vgimg.Canvas, it *item, h float64) {
	if len(it.pts) == 0 {
		return
	}
	p := pathOf(it.pts, h)
	if it.closed {
		p.Close()
	}
	if !it.fill.none() {
		c.SetColor(nrgba(it.fill))
		c.Fill(p)
	}
	if !it.stroke.none() && it.width > 0 {
		c.SetColor(nrgba(it.stroke))
		c.SetLineWidth(vg.Length(it.width))
		dash := make([]vg.Length, len(it.dash))
		for k, d := range it.dash {
			dash[k] = vg.Length(d)
		}
		c.SetLineDash(dash, 0)
		if it.closed || len(it.dash) > 0 || len(it.pts) <= strokeChunk {
			c.Stroke(p)
			return
		}
		// The rasteriser's cost grows with the square of a path's cells:
		// long lines are stroked in pieces (sharing their end points).
		for lo := 0; lo < len(it.pts)-1; lo += strokeChunk {
			c.Stroke(pathOf(it.pts[lo:min(lo+strokeChunk+1, len(it.pts))], h))
		}
	}
}

// strokeChunk is the most points stroked as one path.
const strokeChunk = 64

// pathOf turns points into an open path, breaking it at gaps.
func pathOf(pts []pt, h float64) vg.Path {
	var p vg.Path
	move := true
	for _, q := range pts {
		if math.IsNaN(q.x) {
			move = true
			continue
		}
		v := vg.Point{X: vg.Length(q.x), Y: vg.Length(h - q.y)}
		if move {
			p.Move(v)
			move = false
		} else {
			p.Line(v)
		}
	}
	return p
}

func pngText(c *vgimg.Canvas, f faces, it *item, h float64) {
	face := f.face(it.size, it.bold)
	dx := 0.0
	switch it.anchor {
	case anchorMiddle:
		dx = -float64(face.Width(it.text)) / 2
	case anchorEnd:
		dx = -float64(face.Width(it.text))
	}
	c.SetColor(nrgba(it.color))
	if it.rotate == 0 {
		c.FillString(face, vg.Point{X: vg.Length(it.x + dx), Y: vg.Length(h - it.y)}, it.text)
		return
	}
	c.Push()
	c.Translate(vg.Point{X: vg.Length(it.x), Y: vg.Length(h - it.y)})
	c.Rotate(-it.rotate * math.Pi / 180)
	c.FillString(face, vg.Point{X: vg.Length(dx)}, it.text)
	c.Pop()
}
