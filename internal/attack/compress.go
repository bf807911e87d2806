package attack

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"

	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"
)

// Compression names a container format the generators can write.
type Compression string

// Containers.
const (
	Plain Compression = ""
	Gzip  Compression = "gzip"
	Xz    Compression = "xz"
	Zstd  Compression = "zstd"
)

// Ext is the file name suffix of c.
func (c Compression) Ext() string {
	switch c {
	case Gzip:
		return ".gz"
	case Xz:
		return ".xz"
	case Zstd:
		return ".zst"
	}
	return ""
}

// compress returns b in one stream (member, frame) of c.
func compress(c Compression, b []byte) []byte {
	var out bytes.Buffer
	var w io.WriteCloser
	var err error
	switch c {
	case Plain:
		return append([]byte(nil), b...)
	case Gzip:
		w, err = gzip.NewWriterLevel(&out, gzip.BestCompression)
	case Xz:
		w, err = xz.NewWriter(&out)
	case Zstd:
		w, err = zstd.NewWriter(&out, zstd.WithEncoderLevel(zstd.SpeedBestCompression))
	default:
		err = fmt.Errorf("attack: unknown compression %q", c)
	}
	if err != nil {
		panic(err) // the generators only pass the constants above
	}
	if _, err := w.Write(b); err != nil {
		panic(err)
	}
	if err := w.Close(); err != nil {
		panic(err)
	}
	return out.Bytes()
}

// Bomb returns a compressed stream that inflates to head, then total bytes
// of fill, then tail. gzip members, xz streams and zstd frames may follow
// one another in one file and decompress to the concatenation of their
// contents, so the fill is one block compressed once and repeated: a
// multi-gigabyte bomb costs a few kilobytes and milliseconds to make.
func Bomb(c Compression, head []byte, fill byte, total int64, tail []byte) []byte {
	const block = 64 << 20
	var out bytes.Buffer
	if len(head) > 0 {
		out.Write(compress(c, head))
	}
	if total > 0 {
		n := min(total, block)
		one := compress(c, bytes.Repeat([]byte{fill}, int(n)))
		for left := total; left > 0; left -= n {
			if left < n {
				one = compress(c, bytes.Repeat([]byte{fill}, int(left)))
			}
			out.Write(one)
		}
	}
	if len(tail) > 0 {
		out.Write(compress(c, tail))
	}
	return out.Bytes()
}

// Repeat returns a compressed stream that inflates to head, then count
// copies of block, then tail, made as Bomb makes its fill: about 4 MiB of
// copies compressed once and repeated.
func Repeat(c Compression, head, block []byte, count int, tail []byte) []byte {
	per := max(1, (4<<20)/max(len(block), 1))
	var out bytes.Buffer
	if len(head) > 0 {
		out.Write(compress(c, head))
	}
	one := compress(c, bytes.Repeat(block, min(per, count)))
	for left := count; left > 0; left -= per {
		if left < per {
			one = compress(c, bytes.Repeat(block, left))
		}
		out.Write(one)
	}
	if len(tail) > 0 {
		out.Write(compress(c, tail))
	}
	return out.Bytes()
}
