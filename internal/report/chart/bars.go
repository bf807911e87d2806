package chart

import (
	"fmt"
	"math"
)

// Bar chart geometry, in pixels.
const (
	rowH         = 22.0  // horizontal bars: one row per label
	barThick     = 14.0  // horizontal bars: bar thickness
	maxHLabel    = 290.0 // horizontal bars: widest category label
	maxVLabel    = 140.0 // vertical bars: longest rotated category label
	valueSize    = 10.0  // bar total labels
	minCanvasH   = 160.0
	maxHBars     = 150 // horizontal bars: more labels are left out, with a note
	rotatedAngle = -45.0
)

// barTotals holds each label's positive and negative stack heights.
type barTotals struct {
	pos, neg []float64
	lo, hi   float64
}

func (b Bars) totals() barTotals {
	t := barTotals{pos: make([]float64, len(b.Labels)), neg: make([]float64, len(b.Labels))}
	for _, s := range b.Stacks {
		for i, v := range s.Y {
			v = val(v)
			if v >= 0 {
				t.pos[i] += v
			} else {
				t.neg[i] += v
			}
		}
	}
	for i := range b.Labels {
		t.lo = math.Min(t.lo, t.neg[i])
		t.hi = math.Max(t.hi, t.pos[i])
	}
	return t
}

func (b Bars) plan() (*scene, error) {
	f, err := loadFaces()
	if err != nil {
		return nil, err
	}
	for i, s := range b.Stacks {
		if len(s.Y) != len(b.Labels) {
			return nil, fmt.Errorf("chart: bars %q: stack %d (%q) has %d values for %d labels", b.Title, i, s.Name, len(s.Y), len(b.Labels))
		}
	}
	hidden := 0
	if b.Horizontal && len(b.Labels) > maxHBars {
		// Keep the canvas (and the PNG's memory) bounded.
		hidden = len(b.Labels) - maxHBars
		b.Labels = b.Labels[:maxHBars]
		stacks := make([]Series, len(b.Stacks))
		for i, s := range b.Stacks {
			stacks[i] = Series{Name: s.Name, Y: s.Y[:maxHBars]}
		}
		b.Stacks = stacks
	}
	labels := make([]string, len(b.Labels))
	for i, l := range b.Labels {
		labels[i] = sanitizeText(l)
	}
	t := b.totals()
	h := canvasH
	if b.Horizontal {
		h = 0 // set once the header height is known
	}
	fr := newFrame(f, canvasW, h, b.Title)
	if len(b.Stacks) > 1 {
		names := make([]string, len(b.Stacks))
		for i, s := range b.Stacks {
			names[i] = s.Name
		}
		fr.legend(names, pad, canvasW-pad, false)
	}
	if b.Horizontal {
		b.horizontal(fr, labels, t, hidden)
	} else {
		b.vertical(fr, labels, t)
	}
	return fr.s, nil
}

// color returns the colour of stack layer l: the first palette colour for a
// plain bar chart, else the layer's own.
func (b Bars) color(l int) rgba { return seriesColor(l) }

// totalLabel formats the total shown at the end of bar i, or "" for none.
func (b Bars) totalLabel(t barTotals, i int) string {
	if len(b.Stacks) == 0 {
		return ""
	}
	return valueLabel(b.Unit, t.pos[i]+t.neg[i])
}

func (b Bars) horizontal(fr *frame, labels []string, t barTotals, hidden int) {
	f, s := fr.f, fr.s
	xlabel := sanitizeText(b.XLabel)
	n := len(labels)
	p := plotBox{y0: fr.top + 4}
	p.y1 = p.y0 + math.Max(float64(n), 1)*rowH
	h := p.y1 + 6 + tickSize*ascent + 4 + pad
	if hidden > 0 {
		h += tickSize + 8
	}
	if xlabel != "" {
		h += labelSize + 8
	}
	h = math.Max(h, minCanvasH)
	fr.setHeight(h)

	cats := make([]string, n)
	labelW := 0.0
	for i, l := range labels {
		cats[i] = f.truncate(l, tickSize, false, maxHLabel)
		labelW = math.Max(labelW, room(f.measure(cats[i], tickSize, false)))
	}
	totals := make([]string, n)
	valueW := 0.0
	for i := range labels {
		totals[i] = b.totalLabel(t, i)
		valueW = math.Max(valueW, room(f.measure(totals[i], valueSize, false)))
	}
	p.x0 = pad + labelW + 8
	p.x1 = s.w - pad - valueW - 6
	va := fitAxis(f, t.lo, t.hi, b.Unit, p, true)

	for i, v := range va.ticks {
		x := crisp(va.pos(v, p.x0, p.x1))
		c := colGrid
		if v == 0 {
			c = colAxis
		}
		s.line(x, p.y0, x, p.y1, c, 1)
		fr.tickLabelBelow(x, p.y1+6+tickSize*ascent, va.labels[i])
	}
	if n == 0 {
		fr.noData(p)
	}
	for i := range labels {
		mid := p.y0 + (float64(i)+0.5)*rowH
		s.text(p.x0-8, mid+tickSize*capCenter, cats[i], tickSize, false, anchorEnd, colText)
		spans, posAcc := b.spans(i)
		for l, sp := range spans {
			x0, x1 := va.pos(sp[0], p.x0, p.x1), va.pos(sp[1], p.x0, p.x1)
			s.rect(x0, mid-barThick/2, x1-x0, barThick, b.color(l))
		}
		end := va.pos(math.Max(posAcc, 0), p.x0, p.x1)
		s.text(end+4, mid+valueSize*capCenter, totals[i], valueSize, false, anchorStart, colMuted)
	}
	if hidden > 0 {
		note := "+" + itoa(hidden) + " more not shown"
		s.text(pad, p.y1+6+tickSize*ascent+tickSize+8, note, tickSize, false, anchorStart, colMuted)
	}
	if xlabel != "" {
		tl := f.truncate(xlabel, labelSize, false, p.x1-p.x0)
		s.text((p.x0+p.x1)/2, h-pad-labelSize*0.2, tl, labelSize, false, anchorMiddle, colText)
	}
}

func (b Bars) vertical(fr *frame, labels []string, t barTotals) {
	f, s := fr.f, fr.s
	xlabel := sanitizeText(b.XLabel)
	n := len(labels)
	p := plotBox{y0: fr.top + valueSize + 8, x1: s.w - pad - 4}
	bottom := s.h - pad
	if xlabel != "" {
		bottom -= labelSize + 8
	}
	// First pass: the value axis for an estimated height fixes the left
	// margin, the margin fixes the slot width, the slot width decides
	// whether category labels are rotated, and that fixes the height.
	va := newAxis(t.lo, t.hi, b.Unit, 8, true)
	p.x0 = pad + maxWidth(f, va.labels, tickSize) + 8
	slot := (p.x1 - p.x0) / math.Max(float64(n), 1)
	labelW := maxWidth(f, labels, tickSize)
	rotate := labelW > slot-6
	cats := make([]string, n)
	for i, l := range labels {
		cats[i] = l
		if rotate {
			cats[i] = f.truncate(l, tickSize, false, maxVLabel)
		}
	}
	if rotate {
		p.y1 = bottom - maxWidth(f, cats, tickSize)*math.Sqrt2/2 - tickSize - 8
	} else {
		p.y1 = bottom - tickSize - 8
	}
	va = newAxis(t.lo, t.hi, b.Unit, max(2, int((p.y1-p.y0)/50)), true)
	p.x0 = pad + maxWidth(f, va.labels, tickSize) + 8
	slot = (p.x1 - p.x0) / math.Max(float64(n), 1)
	if rotate && n > 0 {
		// The first rotated label reaches left of its bar by its width
		// times cos 45°; keep it on the canvas.
		reach := room(f.measure(cats[0], tickSize, false))*math.Sqrt2/2 + 4
		if need := reach - slot/2; p.x0 < need {
			p.x0 = need
			slot = (p.x1 - p.x0) / float64(n)
		}
	}

	for i, v := range va.ticks {
		y := crisp(va.pos(v, p.y1, p.y0))
		c := colGrid
		if v == 0 {
			c = colAxis
		}
		s.line(p.x0, y, p.x1, y, c, 1)
		s.text(p.x0-6, y+tickSize*capCenter, va.labels[i], tickSize, false, anchorEnd, colMuted)
	}
	if n == 0 {
		fr.noData(p)
	}
	barW := math.Min(slot*0.7, 80)
	for i := range labels {
		cx := p.x0 + (float64(i)+0.5)*slot
		spans, posAcc := b.spans(i)
		for l, sp := range spans {
			y0, y1 := va.pos(sp[1], p.y1, p.y0), va.pos(sp[0], p.y1, p.y0)
			s.rect(cx-barW/2, y0, barW, y1-y0, b.color(l))
		}
		if tl := b.totalLabel(t, i); tl != "" && room(f.measure(tl, valueSize, false)) <= slot-2 {
			top := va.pos(math.Max(posAcc, 0), p.y1, p.y0)
			s.text(cx, top-4, tl, valueSize, false, anchorMiddle, colMuted)
		}
		zero := crisp(va.pos(0, p.y1, p.y0))
		if rotate {
			s.line(crisp(cx), zero, crisp(cx), zero+4, colAxis, 1)
			s.rotatedText(cx+tickSize*0.3, p.y1+8+tickSize*0.3, cats[i], tickSize, anchorEnd, rotatedAngle, colText)
		} else {
			s.text(cx, p.y1+6+tickSize*ascent, cats[i], tickSize, false, anchorMiddle, colText)
		}
	}
	if xlabel != "" {
		tl := f.truncate(xlabel, labelSize, false, p.x1-p.x0)
		s.text((p.x0+p.x1)/2, s.h-pad-labelSize*0.2, tl, labelSize, false, anchorMiddle, colText)
	}
}

// maxWidth is the room to reserve for the widest of ss.
func maxWidth(f faces, ss []string, size float64) float64 {
	w := 0.0
	for _, s := range ss {
		w = math.Max(w, room(f.measure(s, size, false)))
	}
	return w
}

// spans returns the value range [from, to] of each stack layer of bar i
// (positive values stack up from 0, negative ones down) and the positive total.
func (b Bars) spans(i int) ([][2]float64, float64) {
	out := make([][2]float64, len(b.Stacks))
	pos, neg := 0.0, 0.0
	for l, st := range b.Stacks {
		if v := val(st.Y[i]); v >= 0 {
			out[l] = [2]float64{pos, pos + v}
			pos += v
		} else {
			out[l] = [2]float64{neg + v, neg}
			neg += v
		}
	}
	return out, pos
}
