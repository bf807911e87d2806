package input

import (
	"bytes"
	"compress/gzip"
	"io"
	"strings"
	"testing"
)

// A gzip stream 1000 times smaller than its content is refused once it has
// given BombMinBytes; the same bytes at an ordinary ratio are read whole.
func TestDecompressionBomb(t *testing.T) {
	var zeros bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&zeros, gzip.BestCompression)
	chunk := make([]byte, 1<<20)
	for i := 0; i < BombMinBytes>>20+8; i++ {
		zw.Write(chunk)
	}
	zw.Close()
	r, err := NewSource(0, nil, nil).NewReader(bytes.NewReader(zeros.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, r)
	if err == nil || !strings.Contains(err.Error(), "refused as a decompression bomb") {
		t.Fatalf("read %d bytes, err %v; want a decompression bomb", n, err)
	}
	if n > BombMinBytes+1<<20 {
		t.Errorf("read %d bytes before refusing, want about %d", n, BombMinBytes)
	}

	// pseudo-random bytes compress about 2x (one MiB written again and
	// again: deflate looks back 32 KiB only): never refused
	var plain bytes.Buffer
	zw, _ = gzip.NewWriterLevel(&plain, gzip.BestSpeed)
	x := uint64(1)
	for k := range chunk {
		x = x*6364136223846793005 + 1442695040888963407
		chunk[k] = byte(x>>56) & 0x0f
	}
	for i := 0; i < BombMinBytes>>20+8; i++ {
		zw.Write(chunk)
	}
	zw.Close()
	r, err = NewSource(0, nil, nil).NewReader(bytes.NewReader(plain.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if n, err := io.Copy(io.Discard, r); err != nil || n != int64(BombMinBytes>>20+8)<<20 {
		t.Errorf("read %d bytes, err %v", n, err)
	}
}
