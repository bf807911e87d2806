package chart

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"codeberg.org/go-fonts/liberation/liberationsansbold"
	"codeberg.org/go-fonts/liberation/liberationsansregular"
	"golang.org/x/image/font"
	"golang.org/x/image/font/sfnt"
	"golang.org/x/image/math/fixed"

	"github.com/ptscope/ptscope/internal/report/chart/internal/glyphgen"
)

// sfntFaces pairs each decoded face with the TrueType font it was made
// from, parsed by sfnt.
func sfntFaces(t *testing.T) []struct {
	name string
	f    *face
	ttf  *sfnt.Font
} {
	t.Helper()
	fs, err := loadFaces()
	if err != nil {
		t.Fatal(err)
	}
	reg, err := sfnt.Parse(liberationsansregular.TTF)
	if err != nil {
		t.Fatal(err)
	}
	bold, err := sfnt.Parse(liberationsansbold.TTF)
	if err != nil {
		t.Fatal(err)
	}
	return []struct {
		name string
		f    *face
		ttf  *sfnt.Font
	}{{"regular", fs.regular, reg}, {"bold", fs.bold, bold}}
}

// The embedded faces hold exactly what sfnt reads from the TrueType files:
// the glyph of every rune, every glyph's advance and outline, and the
// kerning of every glyph pair (about 7M per face).
func TestFacesMatchSfnt(t *testing.T) {
	for _, c := range sfntFaces(t) {
		f, fnt := c.f, c.ttf
		var buf sfnt.Buffer
		upem := int(fnt.UnitsPerEm())
		if f.unitsPerEm != upem {
			t.Fatalf("%s: units per em %d, sfnt %d", c.name, f.unitsPerEm, upem)
		}
		n := fnt.NumGlyphs()
		if len(f.advance) != n || len(f.outlines) != n {
			t.Fatalf("%s: %d advances and %d outlines, sfnt has %d glyphs", c.name, len(f.advance), len(f.outlines), n)
		}
		ppem := fixed.Int26_6(upem)

		mapped := 0
		for r := rune(0); r <= utf8.MaxRune; r++ {
			want, err := fnt.GlyphIndex(&buf, r)
			if err != nil {
				t.Fatalf("%s: sfnt: rune %U: %v", c.name, r, err)
			}
			if got := f.glyph(r); got != glyphID(want) {
				t.Fatalf("%s: rune %U: glyph %d, sfnt %d", c.name, r, got, want)
			}
			if want != 0 {
				mapped++
			}
		}
		// Liberation Sans 2 maps Latin, Greek, Cyrillic, Hebrew and symbols.
		if mapped < 2000 {
			t.Errorf("%s: %d runes mapped, want the whole font's", c.name, mapped)
		}

		for g := range n {
			adv, err := fnt.GlyphAdvance(&buf, sfnt.GlyphIndex(g), ppem, font.HintingNone)
			if err != nil {
				t.Fatal(err)
			}
			if f.advance[g] != int(adv) {
				t.Fatalf("%s: glyph %d: advance %d, sfnt %d", c.name, g, f.advance[g], adv)
			}
			segs, err := fnt.LoadGlyph(&buf, sfnt.GlyphIndex(g), ppem, nil)
			if err != nil {
				t.Fatal(err)
			}
			i := 0
			f.outline(glyphID(g), func(op segOp, a [3]fpoint) {
				if i >= len(segs) {
					t.Fatalf("%s: glyph %d: more than sfnt's %d segments", c.name, g, len(segs))
				}
				s := segs[i]
				if sfnt.SegmentOp(op) != s.Op {
					t.Fatalf("%s: glyph %d: segment %d: op %d, sfnt %d", c.name, g, i, op, s.Op)
				}
				for j := range 3 {
					want := fpoint{}
					if j < int(op) || j == 0 {
						want = fpoint{int32(s.Args[j].X), int32(s.Args[j].Y)}
					}
					if a[j] != want {
						t.Fatalf("%s: glyph %d: segment %d: point %d %v, sfnt %v", c.name, g, i, j, a[j], want)
					}
				}
				i++
			})
			if i != len(segs) {
				t.Fatalf("%s: glyph %d: %d segments, sfnt %d", c.name, g, i, len(segs))
			}
		}

		pairs := 0
		for a := range n {
			for b := range n {
				want, err := fnt.Kern(&buf, sfnt.GlyphIndex(a), sfnt.GlyphIndex(b), ppem, font.HintingNone)
				if errors.Is(err, sfnt.ErrNotFound) {
					want, err = 0, nil
				}
				if err != nil {
					t.Fatal(err)
				}
				if got := f.kern(glyphID(a), glyphID(b)); got != int(want) {
					t.Fatalf("%s: kerning %d, %d: %d, sfnt %d", c.name, a, b, got, want)
				}
				if want != 0 {
					pairs++
				}
			}
		}
		if pairs < 500 {
			t.Errorf("%s: %d kerning pairs, want the font's (several hundred)", c.name, pairs)
		}
	}
}

// sfntWalk is how the chart placed glyphs when it read the fonts with sfnt
// at run time; glyphs must place every glyph of every string the same way.
func sfntWalk(fnt *sfnt.Font, str string) (gs []glyphID, xs []int, width int) {
	var buf sfnt.Buffer
	ppem := fixed.Int26_6(fnt.UnitsPerEm())
	var prev sfnt.GlyphIndex
	for i, r := range str {
		g, err := fnt.GlyphIndex(&buf, r)
		if err != nil {
			g = 0
		}
		if i > 0 {
			if k, err := fnt.Kern(&buf, prev, g, ppem, font.HintingNone); err == nil {
				width += int(k)
			}
		}
		gs, xs = append(gs, glyphID(g)), append(xs, width)
		if adv, err := fnt.GlyphAdvance(&buf, g, ppem, font.HintingNone); err == nil {
			width += int(adv)
		}
		prev = g
	}
	return gs, xs, width
}

func TestGlyphWalkMatchesSfnt(t *testing.T) {
	// Every rune of the Basic Multilingual Plane in strings of 64, kerned
	// pairs, runes the fonts lack, and invalid UTF-8.
	strs := []string{"", "AVAWAYATAvTaTeToLTLVLYP.F,Y.V,r.y,", "Tо Уо Ѓа", "x\xff\xfey \U0001F600\U00010000 z"}
	var cur []rune
	for r := rune(0); r < 0x10000; r++ {
		if cur = append(cur, r); len(cur) == 64 {
			strs, cur = append(strs, string(cur)), cur[:0]
		}
	}
	for _, c := range sfntFaces(t) {
		for _, s := range strs {
			var gs []glyphID
			var xs []int
			w := c.f.glyphs(s, func(g glyphID, x int) { gs, xs = append(gs, g), append(xs, x) })
			wantG, wantX, wantW := sfntWalk(c.ttf, s)
			if w != wantW || !slices.Equal(gs, wantG) || !slices.Equal(xs, wantX) {
				t.Fatalf("%s: %q: width %d, glyphs %v at %v; sfnt: %d, %v at %v", c.name, s, w, gs, xs, wantW, wantG, wantX)
			}
		}
	}
}

// The embedded face files are what the generator writes today: go
// generate was run after any change to the generator or the fonts.
func TestFaceFilesAreUpToDate(t *testing.T) {
	embedded := map[string][]byte{"fontdata/sans-regular.bin": sansRegular, "fontdata/sans-bold.bin": sansBold}
	if len(glyphgen.Faces) != len(embedded) {
		t.Fatalf("the generator writes %d faces, the chart embeds %d", len(glyphgen.Faces), len(embedded))
	}
	for _, f := range glyphgen.Faces {
		want, err := glyphgen.Extract(f.TTF)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := embedded[f.File]
		if !ok {
			t.Fatalf("the generator writes %s, which the chart does not embed", f.File)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale (%d bytes, the generator writes %d): run go generate ./internal/report/chart", f.File, len(got), len(want))
		}
	}
	if glyphgen.Magic != faceMagic {
		t.Errorf("the generator writes format %q, the chart reads %q", glyphgen.Magic, faceMagic)
	}
}

// Damaged face data is a one-line error naming the byte, never a panic.
func TestDecodeFaceDamaged(t *testing.T) {
	if _, err := decodeFace("x.bin", []byte("not a face")); err == nil || !strings.Contains(err.Error(), "byte 0") {
		t.Errorf("bad magic: %v", err)
	}
	for cut := len(faceMagic); cut < len(sansRegular); cut += 1999 {
		_, err := decodeFace("sans-regular.bin", sansRegular[:cut])
		if err == nil || !strings.Contains(err.Error(), "chart: font data sans-regular.bin: byte ") {
			t.Fatalf("cut at %d: %v", cut, err)
		}
	}
	// A byte set to 0xff makes a varint longer or a value out of range;
	// either is an error or, where the value stays in range, a face.
	for at := len(faceMagic); at < len(sansRegular); at += 1009 {
		b := bytes.Clone(sansRegular)
		b[at] = 0xff
		if _, err := decodeFace("sans-regular.bin", b); err != nil && !strings.Contains(err.Error(), "byte ") {
			t.Fatalf("byte %d: %v", at, err)
		}
	}
	if _, err := decodeFace("sans-regular.bin", append(bytes.Clone(sansRegular), 0)); err == nil || !strings.Contains(err.Error(), "the end of the file") {
		t.Errorf("a trailing byte: %v", err)
	}
}
