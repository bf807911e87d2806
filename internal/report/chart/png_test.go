package chart

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"math"
	"testing"
)

// paintPNG rasterises s and decodes the result.
func paintPNG(t *testing.T, s *scene) image.Image {
	t.Helper()
	var buf bytes.Buffer
	if err := writePNG(&buf, s); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&buf)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func rgbOf(img image.Image, x, y int) rgba {
	c := color.NRGBAModel.Convert(img.At(x, y)).(color.NRGBA)
	return rgba{c.R, c.G, c.B, c.A}
}

// inkBounds returns the bounds of the pixels of r that are not white.
func inkBounds(img image.Image, r image.Rectangle) image.Rectangle {
	var ink image.Rectangle
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			if rgbOf(img, x, y) != colWhite {
				ink = ink.Union(image.Rect(x, y, x+1, y+1))
			}
		}
	}
	return ink
}

// The PNG paints each item of the scene where the SVG puts it, at twice
// the size: edges on pixel boundaries stay sharp, a crisp 1-pixel line
// covers two pixel columns exactly, dashes follow the pattern, slanted
// lines are anti-aliased, and text is drawn with the widths layout
// measured, along its rotation.
func TestPNGPaintsTheScene(t *testing.T) {
	f, err := loadFaces()
	if err != nil {
		t.Fatal(err)
	}
	red, blue, black := hex("#ff0000"), hex("#0000ff"), hex("#000000")
	s := &scene{w: 200, h: 120}
	s.rect(10, 10, 20, 10, red)                                    // PNG x 20..60, y 20..40
	s.line(50.5, 5, 50.5, 55, blue, 1)                             // PNG columns 100 and 101
	s.line(70.5, 5, 70.5, 55, black, 1, 4, 3)                      // dashes from y 10: 8 on, 6 off
	s.line(80, 10, 120, 37, black, 1.5)                            // slanted
	s.text(10, 100, "Hx", 20, false, anchorStart, colText)         // baseline at PNG y 200
	s.text(190, 100, "Hx", 20, true, anchorEnd, colText)           // ends at PNG x 380
	s.rotatedText(150, 60, "HHHH", 10, anchorMiddle, -90, colText) // vertical, centred on y 60
	img := paintPNG(t, s)
	if b := img.Bounds(); b.Dx() != 400 || b.Dy() != 240 {
		t.Fatalf("size %v", b)
	}

	for _, c := range []struct {
		x, y int
		want rgba
	}{
		{20, 20, red}, {59, 39, red}, {40, 30, red}, {19, 30, colWhite}, {60, 30, colWhite}, {40, 40, colWhite},
		{100, 50, blue}, {101, 50, blue}, {99, 50, colWhite}, {102, 50, colWhite},
		{140, 12, black}, {141, 17, black}, {140, 20, colWhite}, {141, 23, colWhite}, {140, 26, black},
	} {
		if got := rgbOf(img, c.x, c.y); got != c.want {
			t.Errorf("pixel (%d, %d) = %v, want %v", c.x, c.y, got, c.want)
		}
	}

	// The slanted line has anti-aliased edges: grey levels between black
	// and white.
	greys := map[uint8]bool{}
	for y := 20; y < 74; y++ {
		for x := 160; x < 240; x++ {
			greys[rgbOf(img, x, y).r] = true
		}
	}
	if len(greys) < 10 {
		t.Errorf("slanted line: %d grey levels, want anti-aliasing", len(greys))
	}

	// Text: "Hx" starts at the anchor (H has a small left side bearing),
	// sits on the baseline, rises by Liberation Sans's cap height (0.729
	// em) and spans the measured width.
	ink := inkBounds(img, image.Rect(0, 150, 200, 240))
	w := f.measure("Hx", 20, false) * pngScale
	if ink.Min.X < 20 || ink.Min.X > 25 || ink.Max.Y != 200 || math.Abs(float64(200-ink.Min.Y)-0.729*40) > 1.5 ||
		math.Abs(float64(ink.Max.X)-(20+w)) > 2 {
		t.Errorf("text ink %v, want x from 20 to %.1f, y from %.1f to 200", ink, 20+w, 200-0.729*40)
	}
	ink = inkBounds(img, image.Rect(200, 150, 400, 240))
	if math.Abs(float64(ink.Max.X)-380) > 2 || math.Abs(float64(ink.Min.X)-(380-f.measure("Hx", 20, true)*pngScale)) > 3 {
		t.Errorf("end-anchored bold text ink %v, want it to end at x 380", ink)
	}
	ink = inkBounds(img, image.Rect(260, 0, 320, 160))
	h := f.measure("HHHH", 10, false) * pngScale
	if ink.Dy() < 3*ink.Dx() || math.Abs(float64(ink.Min.Y+ink.Max.Y)/2-120) > 2 || math.Abs(float64(ink.Dy())-h) > 4 || ink.Max.X != 300 {
		t.Errorf("rotated text ink %v, want a vertical run %.1f high centred on y 120, baseline at x 300", ink, h)
	}
}

// A dash pattern restarts on every subpath and an odd pattern repeats.
func TestDashes(t *testing.T) {
	var got [][]pt
	collect := func(d []pt) { got = append(got, append([]pt(nil), d...)) }
	dashes([]pt{{0, 0}, {10, 0}, {10, 10}}, []float64{4, 2}, collect)
	want := [][]pt{{{0, 0}, {4, 0}}, {{6, 0}, {10, 0}}, {{10, 2}, {10, 6}}, {{10, 8}, {10, 10}}}
	if len(got) != len(want) {
		t.Fatalf("dashes %v, want %v", got, want)
	}
	for i := range want {
		if len(got[i]) != len(want[i]) || got[i][0] != want[i][0] || got[i][len(got[i])-1] != want[i][len(want[i])-1] {
			t.Errorf("dash %d: %v, want %v", i, got[i], want[i])
		}
	}
	got = nil
	dashes([]pt{{0, 0}, {9, 0}}, []float64{3}, collect) // 3 on, 3 off, 3 on
	if len(got) != 2 || got[1][0] != (pt{6, 0}) {
		t.Errorf("odd pattern: %v", got)
	}
	got = nil
	dashes([]pt{{0, 0}, {9, 0}}, []float64{3, -1}, collect)
	if len(got) != 1 || len(got[0]) != 2 {
		t.Errorf("a negative length draws the line whole: %v", got)
	}
}

// Points far outside the image neither hang nor break the painting.
func TestPNGFarPoints(t *testing.T) {
	s := &scene{w: 100, h: 60}
	s.polygon([]pt{{-1e300, -1e300}, {1e300, -1e300}, {1e300, 1e300}, {-1e300, 1e300}}, hex("#00ff00"))
	s.line(-1e12, 30, 1e12, 30.5, hex("#000000"), 1)
	img := paintPNG(t, s)
	if c := rgbOf(img, 10, 10); c != hex("#00ff00") {
		t.Errorf("huge polygon: pixel %v", c)
	}
	if c := rgbOf(img, 100, 60); c.g > 128 {
		t.Errorf("huge line: pixel %v", c)
	}
}
