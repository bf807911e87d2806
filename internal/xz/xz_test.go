package xz

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"

	uxz "github.com/ulikunitz/xz"
)

func decodeAll(in []byte) ([]byte, error) {
	r, err := NewReader(bytes.NewReader(in))
	if err != nil {
		return nil, err
	}
	return io.ReadAll(r)
}

func reference(in []byte) ([]byte, error) {
	r, err := uxz.NewReader(bytes.NewReader(in))
	if err != nil {
		return nil, err
	}
	return io.ReadAll(r)
}

// TestCommittedFiles decodes every .xz file in the repository's testdata
// (written by xz itself) and compares with github.com/ulikunitz/xz.
func TestCommittedFiles(t *testing.T) {
	files, _ := filepath.Glob("../../testdata/*/*.xz")
	more, _ := filepath.Glob("../../testdata/*.xz")
	files = append(files, more...)
	if len(files) < 5 {
		t.Fatalf("only %d .xz files found", len(files))
	}
	for _, f := range files {
		in, want := decodesAsReference(t, f)
		t.Logf("%s: %d -> %d bytes", filepath.Base(f), len(in), len(want))
	}
}

// decodesAsReference decodes the file f whole and holds the result to
// github.com/ulikunitz/xz's; it returns the input and the output.
func decodesAsReference(t *testing.T, f string) (in, out []byte) {
	t.Helper()
	in, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	want, err := reference(in)
	if err != nil {
		t.Fatalf("%s: reference: %v", f, err)
	}
	got, err := decodeAll(in)
	if err != nil {
		t.Fatalf("%s: %v", f, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s: %d bytes decoded, reference %d; they differ", f, len(got), len(want))
	}
	return in, want
}

// TestXzUtilsFiles decodes files xz 5.4 wrote with the options that take
// the decoder's other paths: every check type, presets 0 to 9e, a 4 KiB
// dictionary that wraps, lc/lp/pb other than the defaults, incompressible
// data (uncompressed chunks, with and without a dictionary reset), several
// blocks, two streams with stream padding, and an empty file. Each is
// compared with github.com/ulikunitz/xz, and read again in small pieces
// (matches cut by the caller's buffer).
func TestXzUtilsFiles(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.xz")
	if len(files) < 9 {
		t.Fatalf("only %d files", len(files))
	}
	for _, f := range files {
		in, want := decodesAsReference(t, f)
		for _, size := range []int{1, 7, 300} {
			r, err := NewReader(bytes.NewReader(in))
			if err != nil {
				t.Fatal(err)
			}
			var out []byte
			buf := make([]byte, size)
			for {
				n, err := r.Read(buf)
				out = append(out, buf[:n]...)
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatalf("%s, reads of %d: %v", f, size, err)
				}
			}
			if !bytes.Equal(out, want) {
				t.Fatalf("%s, reads of %d: output differs", f, size)
			}
		}
	}
}
