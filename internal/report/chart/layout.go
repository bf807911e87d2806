package chart

import "math"

// Canvas sizes and spacing, in pixels.
const (
	canvasW   = 960.0
	canvasH   = 540.0
	pad       = 16.0
	ascent    = 0.9  // baseline offset below the top of a line, per font size
	capCenter = 0.36 // baseline offset below a centre line, per font size
)

// plotBox is the data area; y0 is its top edge, y1 its bottom edge.
type plotBox struct{ x0, y0, x1, y1 float64 }

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// slack is how much wider than Liberation Sans text may render: SVG
// viewers without Liberation Sans, Arial or Helvetica fall back to fonts
// such as DejaVu Sans, about 10% wider. Space reserved for text allows it.
const slack = 1.12

// room is the space to reserve for text measured w pixels wide.
func room(w float64) float64 { return w * slack }

// crisp puts a 1-pixel line on a pixel centre.
func crisp(v float64) float64 { return math.Floor(v) + 0.5 }

// frame lays a chart out from the top down: title, legend, then the plot.
type frame struct {
	f   faces
	s   *scene
	top float64 // first free y below what is laid out so far
}

func newFrame(f faces, w, h float64, title string) *frame {
	title = sanitizeText(title)
	s := &scene{w: w, h: h, title: title}
	s.items = append(s.items, item{kind: kindPath, closed: true, fill: colWhite}) // background, see setHeight
	fr := &frame{f: f, s: s, top: pad}
	fr.setHeight(h)
	if t := f.truncate(title, titleSize, true, w-2*pad); t != "" {
		s.text(pad, pad+titleSize*ascent, t, titleSize, true, anchorStart, colText)
		fr.top = pad + titleSize + 10
	}
	return fr
}

// setHeight sets the canvas height and sizes the background to match.
func (fr *frame) setHeight(h float64) {
	fr.s.h = h
	fr.s.items[0].pts = []pt{{0, 0}, {fr.s.w, 0}, {fr.s.w, h}, {0, h}}
}

// legend flows one entry per named series into rows between x0 and x1.
// Series without a name get no entry. When the entries do not fit in four
// rows, the last ones are summarised as "+N more".
func (fr *frame) legend(names []string, x0, x1 float64, lineSwatch bool) {
	const (
		rowH    = 18.0
		swatchW = 12.0
		maxRows = 4
		maxText = 240.0
	)
	var entries []legendEntry
	for i, n := range names {
		n = sanitizeText(n)
		if n == "" {
			continue
		}
		t := fr.f.truncate(n, labelSize, false, maxText)
		entries = append(entries, legendEntry{i, t, swatchW + 5 + room(fr.f.measure(t, labelSize, false))})
	}
	if len(entries) == 0 {
		return
	}
	var pos []pt
	var note string
	for m := len(entries); m >= 0; m-- {
		note = ""
		if m < len(entries) {
			note = "+" + itoa(len(entries)-m) + " more"
		}
		var ok bool
		if pos, ok = flow(entries[:m], fr.f.measure(note, labelSize, false), x0, x1, maxRows); ok {
			entries = entries[:m]
			break
		}
	}
	rows := 0
	for k, e := range entries {
		base := fr.top + pos[k].y*rowH + labelSize*ascent
		mid := base - labelSize*capCenter
		c := seriesColor(e.i)
		if lineSwatch {
			fr.s.line(pos[k].x, mid, pos[k].x+swatchW, mid, c, 3)
		} else {
			fr.s.rect(pos[k].x, mid-5, swatchW, 10, c)
		}
		fr.s.text(pos[k].x+swatchW+5, base, e.text, labelSize, false, anchorStart, colText)
		rows = int(pos[k].y) + 1
	}
	if note != "" {
		np := pos[len(entries)]
		fr.s.text(np.x, fr.top+np.y*rowH+labelSize*ascent, note, labelSize, false, anchorStart, colMuted)
		rows = int(np.y) + 1
	}
	fr.top += float64(rows)*rowH + 4
}

type legendEntry struct {
	i    int
	text string
	w    float64
}

// flow places entries (and a trailing note of width noteW, if non-zero)
// left to right in rows; pt.y is the row number. It reports false if more
// than maxRows rows are needed.
func flow(es []legendEntry, noteW, x0, x1 float64, maxRows int) ([]pt, bool) {
	pos := make([]pt, 0, len(es)+1)
	row, x := 0, x0
	place := func(w float64) bool {
		if x > x0 && x+w > x1 {
			row, x = row+1, x0
		}
		if row >= maxRows {
			return false
		}
		pos = append(pos, pt{x, float64(row)})
		x += w + 16
		return true
	}
	for _, e := range es {
		if !place(e.w) {
			return nil, false
		}
	}
	if noteW > 0 && !place(noteW) {
		return nil, false
	}
	return pos, true
}

func itoa(n int) string { return valueLabel(UnitPlain, float64(n)) }

// xySpec describes the axes of a line or area chart.
type xySpec struct {
	xlo, xhi, ylo, yhi float64
	xu, yu             Unit
	xlabel, ylabel     string
	markerRoom         bool
	empty              bool // no data: draw the frame without ticks
}

// xyAxes lays out the plot box and both axes, and draws the grid, ticks and
// axis labels. Data is drawn afterwards, on top of the grid.
func (fr *frame) xyAxes(sp xySpec) (plotBox, axis, axis) {
	f, s := fr.f, fr.s
	xlabel, ylabel := sanitizeText(sp.xlabel), sanitizeText(sp.ylabel)
	p := plotBox{y0: fr.top + tickSize*0.5 + 2}
	if sp.markerRoom {
		p.y0 = fr.top + markerSize + 6
	}
	p.y1 = s.h - pad - tickSize - 8
	if xlabel != "" {
		p.y1 -= labelSize + 8
	}
	ya := newAxis(sp.ylo, sp.yhi, sp.yu, max(2, int((p.y1-p.y0)/50)), true)
	yw := 0.0
	for _, l := range ya.labels {
		yw = math.Max(yw, room(f.measure(l, tickSize, false)))
	}
	p.x0 = pad + yw + 8
	if ylabel != "" {
		p.x0 += labelSize + 8
	}
	p.x1 = s.w - pad - 8
	xa := fitAxis(f, sp.xlo, sp.xhi, sp.xu, p, false)

	if sp.empty {
		ya.ticks, ya.labels, xa.ticks, xa.labels = nil, nil, nil, nil
		p.x0 = pad
		if ylabel != "" {
			p.x0 += labelSize + 8
		}
	}
	for i, v := range ya.ticks {
		y := crisp(ya.pos(v, p.y1, p.y0))
		c := colGrid
		if v == 0 && ya.min < 0 {
			c = colAxis
		}
		s.line(p.x0, y, p.x1, y, c, 1)
		s.text(p.x0-6, y+tickSize*capCenter, ya.labels[i], tickSize, false, anchorEnd, colMuted)
	}
	bottom := crisp(p.y1)
	s.line(p.x0, bottom, p.x1, bottom, colAxis, 1)
	for i, v := range xa.ticks {
		x := crisp(xa.pos(v, p.x0, p.x1))
		s.line(x, bottom, x, bottom+4, colAxis, 1)
		fr.tickLabelBelow(x, bottom+6+tickSize*ascent, xa.labels[i])
	}
	if xlabel != "" {
		t := f.truncate(xlabel, labelSize, false, p.x1-p.x0)
		s.text((p.x0+p.x1)/2, s.h-pad-labelSize*0.2, t, labelSize, false, anchorMiddle, colText)
	}
	if ylabel != "" {
		t := f.truncate(ylabel, labelSize, false, p.y1-p.y0)
		s.rotatedText(pad+labelSize*ascent, (p.y0+p.y1)/2, t, labelSize, anchorMiddle, -90, colText)
	}
	return p, xa, ya
}

// tickLabelBelow centres a tick label under x, shifting it to stay inside
// the canvas.
func (fr *frame) tickLabelBelow(x, base float64, label string) {
	w := room(fr.f.measure(label, tickSize, false))
	a, lx := anchorMiddle, x
	switch {
	case x+w/2 > fr.s.w-4:
		a, lx = anchorEnd, fr.s.w-4
	case x-w/2 < 4:
		a, lx = anchorStart, 4
	}
	fr.s.text(lx, base, label, tickSize, false, a, colMuted)
}

// fitAxis picks the densest horizontal-axis ticks whose labels do not
// collide; extend is as for newAxis.
func fitAxis(f faces, lo, hi float64, u Unit, p plotBox, extend bool) axis {
	var ax axis
	for target := max(2, int((p.x1-p.x0)/80)); target >= 1; target-- {
		ax = newAxis(lo, hi, u, target, extend)
		if xLabelsFit(f, ax, p) {
			return ax
		}
	}
	return ax
}

func xLabelsFit(f faces, ax axis, p plotBox) bool {
	if len(ax.ticks) < 2 {
		return true
	}
	prevRight := math.Inf(-1)
	for i, v := range ax.ticks {
		x := ax.pos(v, p.x0, p.x1)
		w := room(f.measure(ax.labels[i], tickSize, false))
		if x-w/2 < prevRight+12 {
			return false
		}
		prevRight = x + w/2
	}
	return true
}

// markers draws dashed vertical lines with labels above the plot. A label
// that would overlap the previous one is left out; the line stays.
func (fr *frame) markers(ms []Marker, p plotBox, xa axis) {
	lastRight := math.Inf(-1)
	for _, m := range ms {
		if !finite(m.X) || m.X < xa.min || m.X > xa.max {
			continue
		}
		x := crisp(xa.pos(m.X, p.x0, p.x1))
		fr.s.line(x, p.y0, x, p.y1, colMarker, 1, 4, 3)
		t := fr.f.truncate(sanitizeText(m.Label), markerSize, false, 160)
		if t == "" {
			continue
		}
		w := room(fr.f.measure(t, markerSize, false))
		lx := math.Min(math.Max(x-w/2, 4), fr.s.w-4-w)
		if lx < lastRight+6 {
			continue
		}
		fr.s.text(lx, p.y0-5, t, markerSize, false, anchorStart, colMarker)
		lastRight = lx + w
	}
}

// noData writes "no data" in the middle of the plot box.
func (fr *frame) noData(p plotBox) {
	fr.s.text((p.x0+p.x1)/2, (p.y0+p.y1)/2, "no data", labelSize, false, anchorMiddle, colNoData)
}

// valueRange widens [lo, hi] of non-negative (or non-positive) data to start
// at zero when the data already covers more than half the distance to zero,
// so that axes neither exaggerate small changes nor waste the plot.
func valueRange(lo, hi float64) (float64, float64) {
	switch {
	case lo > 0 && lo <= hi*0.5:
		lo = 0
	case hi < 0 && hi >= lo*0.5:
		hi = 0
	}
	return lo, hi
}
