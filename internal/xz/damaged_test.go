package xz

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"testing"
)

// agree holds the decoder to the references on any input. What it
// decodes, github.com/ulikunitz/xz decodes to the same bytes. What it
// refuses, the reference refuses too, or, where the reference is more
// lenient (it reads a stream cut inside a block header or index as ended),
// xz itself refuses it (when xz is installed). Ours never panics, and its errors give the offset.
func agree(t *testing.T, name string, in []byte) {
	t.Helper()
	want, werr := reference(in)
	got, err := decodeAll(in)
	switch {
	case err == nil && werr == nil:
		if !bytes.Equal(got, want) {
			t.Fatalf("%s: decoded %d bytes, reference %d; they differ", name, len(got), len(want))
		}
	case err == nil:
		t.Fatalf("%s: decoded %d bytes; the reference refused it: %v", name, len(got), werr)
	default:
		var xe *Error
		if !errors.As(err, &xe) {
			t.Fatalf("%s: error without an offset: %v", name, err)
		}
		if werr == nil && xzUtilsAccepts(t, in) {
			t.Fatalf("%s: refused (%v); the reference and xz -t accept it", name, err)
		}
	}
}

// xzUtilsAccepts runs xz -t on in; without xz installed it reports false.
func xzUtilsAccepts(t *testing.T, in []byte) bool {
	path, err := exec.LookPath("xz")
	if err != nil {
		return false
	}
	cmd := exec.Command(path, "-t")
	cmd.Stdin = bytes.NewReader(in)
	return cmd.Run() == nil
}

// TestTruncated: every strict prefix of a one-stream file is refused
// with an error that gives the offset, as xz refuses it.
func TestTruncated(t *testing.T) {
	for _, f := range []string{"testdata/mixed_blocks.xz", "testdata/text_0_none.xz", "testdata/empty.xz"} {
		in, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		step := max(1, len(in)/500)
		for n := 0; n < len(in); n += step {
			_, err := decodeAll(in[:n])
			var xe *Error
			if !errors.As(err, &xe) {
				t.Fatalf("%s cut at %d: err = %v", f, n, err)
			}
		}
	}
}

// TestDamaged flips bytes of real files at random places: the checks and
// the format's own rules find each, as the reference's do.
func TestDamaged(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, f := range []string{"testdata/text_dict4k_lc0lp2pb0_crc32.xz", "testdata/text_0_none.xz", "testdata/mixed_blocks.xz", "testdata/empty.xz"} {
		in, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 100; i++ {
			b := bytes.Clone(in)
			for k := 0; k < 1+rng.IntN(3); k++ {
				b[rng.IntN(len(b))] ^= byte(1 + rng.IntN(255))
			}
			agree(t, f+" damaged", b)
		}
	}
}

func FuzzReader(f *testing.F) {
	for _, name := range []string{"testdata/empty.xz", "testdata/mixed_dict4k.xz", "testdata/text_0_none.xz"} {
		in, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(in)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		// The reference allocates a block's whole declared dictionary (up
		// to 4 GiB) before reading it, so it runs only on what ours
		// decodes: that must be the reference's bytes.
		got, err := decodeAll(in)
		if err != nil {
			var xe *Error
			if !errors.As(err, &xe) {
				t.Fatalf("error without an offset: %v", err)
			}
			return
		}
		want, werr := reference(in)
		if werr != nil || !bytes.Equal(got, want) {
			t.Fatalf("decoded %d bytes; the reference: %d bytes, %v", len(got), len(want), werr)
		}
	})
}
