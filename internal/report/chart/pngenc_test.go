package chart

import (
	"bytes"
	"image"
	"image/png"
	"math/rand/v2"
	"testing"
)

// TestEncodePNGAsImagePNG holds encodePNG to the standard library's bytes:
// on every sample chart painted as WritePNG paints it, and on synthetic
// images that take the paths charts never do (translucent pixels, a
// single pixel, rows longer than the 32 KiB IDAT buffer, noise that makes
// every filter win somewhere).
func TestEncodePNGAsImagePNG(t *testing.T) {
	imgs := map[string]*image.RGBA{}
	for name, c := range samples() {
		s, err := build(c)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		img, err := paintScene(s)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		imgs["chart "+name] = img
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct {
		name        string
		w, h        int
		translucent bool
		noise       int // 0: smooth gradients; n: random bytes in 1 of n pixels
	}{
		{"1x1", 1, 1, false, 0},
		{"1x1 translucent", 1, 1, true, 0},
		{"gradient", 97, 61, false, 0},
		{"gradient translucent", 97, 61, true, 0},
		{"noise", 203, 77, false, 1},
		{"sparse noise translucent", 203, 77, true, 7},
		{"wide", 9000, 3, false, 5},
	} {
		img := image.NewRGBA(image.Rect(0, 0, tc.w, tc.h))
		for y := 0; y < tc.h; y++ {
			for x := 0; x < tc.w; x++ {
				i := img.PixOffset(x, y)
				a := byte(255)
				if tc.translucent {
					a = byte((x*7 + y*13) % 256)
				}
				r, g, b := byte(x), byte(y), byte(x+y)
				if tc.noise > 0 && rng.IntN(tc.noise) == 0 {
					r, g, b = byte(rng.Uint32()), byte(rng.Uint32()), byte(rng.Uint32())
				}
				// premultiplied: colour channels never exceed alpha
				img.Pix[i+0], img.Pix[i+1], img.Pix[i+2], img.Pix[i+3] = min(r, a), min(g, a), min(b, a), a
			}
		}
		imgs[tc.name] = img
	}
	for name, img := range imgs {
		var want, got bytes.Buffer
		if err := png.Encode(&want, img); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := encodePNG(&got, img); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !bytes.Equal(got.Bytes(), want.Bytes()) {
			t.Errorf("%s: encodePNG wrote %d bytes, png.Encode %d; they differ", name, got.Len(), want.Len())
		}
	}
	if len(imgs) < 10 {
		t.Fatalf("only %d images compared", len(imgs))
	}
}

func TestEncodePNGRejectsEmpty(t *testing.T) {
	if err := encodePNG(&bytes.Buffer{}, image.NewRGBA(image.Rect(0, 0, 0, 5))); err == nil {
		t.Fatal("a 0-pixel-wide image was encoded")
	}
}
