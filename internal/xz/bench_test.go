package xz

import (
	"bytes"
	"io"
	"os"
	"testing"

	uxz "github.com/ulikunitz/xz"
)

// benchInput is a real allocator snapshot (xz -6), decoded in full.
func benchInput(b *testing.B) ([]byte, int64) {
	in, err := os.ReadFile("../../testdata/snapshots/gpt2s_train_fp32_b4_ctx512.pickle.xz")
	if err != nil {
		b.Fatal(err)
	}
	out, err := reference(in)
	if err != nil {
		b.Fatal(err)
	}
	return in, int64(len(out))
}

// BenchmarkDecode reports MB/s of decompressed output.
func BenchmarkDecode(b *testing.B) {
	in, size := benchInput(b)
	b.SetBytes(size)
	for b.Loop() {
		r, err := NewReader(bytes.NewReader(in))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.Copy(io.Discard, r); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeReference is github.com/ulikunitz/xz on the same input.
func BenchmarkDecodeReference(b *testing.B) {
	in, size := benchInput(b)
	b.SetBytes(size)
	for b.Loop() {
		r, err := uxz.NewReader(bytes.NewReader(in))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.Copy(io.Discard, r); err != nil {
			b.Fatal(err)
		}
	}
}
