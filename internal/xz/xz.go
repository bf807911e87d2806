// Package xz decodes the .xz format (https://tukaani.org/xz/xz-file-format.txt)
// with the LZMA2 filter, the only one that xz writes by default and the
// only one ptscope reads: one or more streams, stream padding, every block
// and index check (none, CRC32, CRC64, SHA-256) verified, the index held
// against the blocks.
//
// It is a decoder only, written for ptscope's input path in place of a
// general library that also carries an encoder: a compile-time measure
// (docs/build.md). Memory is the dictionary, which grows with the data
// (never beyond the block's declared size), and 64 KiB for a chunk.
// Tests hold it to github.com/ulikunitz/xz and to files xz itself wrote.
package xz

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash"
	"hash/crc32"
	"hash/crc64"
	"io"
)

// Reader decompresses an xz stream.
type Reader struct {
	in  *bufio.Reader
	off int64 // bytes of the compressed input read
	err error

	check   byte // the stream's check type
	records []record

	inBlock bool
	blk     block

	d                        dict
	z                        lzma
	needDictReset, needProps bool
	chunk                    lzmaChunk
	packed                   []byte
	raw                      []byte // an uncompressed chunk's bytes not yet returned
}

// record is a block as the index lists it.
type record struct{ unpadded, uncompressed uint64 }

// block is the state of the block being decoded.
type block struct {
	headerSize       int64
	start            int64 // input offset of its compressed data
	compressed, size int64 // declared sizes, or -1
	uncompressed     uint64
	hash             hash.Hash
	lzmaEnd          bool
}

// Error is a decoding error at an offset of the compressed input.
type Error struct {
	Offset int64
	Msg    string
}

func (e *Error) Error() string { return fmt.Sprintf("xz: %s (at compressed byte %d)", e.Msg, e.Offset) }

var crc64Table = crc64.MakeTable(crc64.ECMA)

// NewReader reads the stream header of r and returns a Reader of the
// decompressed bytes.
func NewReader(r io.Reader) (*Reader, error) {
	br, ok := r.(*bufio.Reader)
	if !ok {
		br = bufio.NewReaderSize(r, 1<<16)
	}
	x := &Reader{in: br}
	if err := x.streamHeader(nil); err != nil {
		return nil, err
	}
	return x, nil
}

func (x *Reader) errf(format string, a ...any) error {
	return &Error{Offset: x.off, Msg: fmt.Sprintf(format, a...)}
}

// full reads len(b) bytes; an early end is io.ErrUnexpectedEOF.
func (x *Reader) full(b []byte) error {
	n, err := io.ReadFull(x.in, b)
	x.off += int64(n)
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	if err == io.ErrUnexpectedEOF {
		return &Error{Offset: x.off, Msg: "truncated input"}
	}
	return err
}

// byte reads one byte, as full does.
func (x *Reader) byte() (byte, error) {
	var b [1]byte
	err := x.full(b[:])
	return b[0], err
}

var magic = []byte{0xFD, '7', 'z', 'X', 'Z', 0x00}

// streamHeader reads a stream header (its first bytes in have, when the
// caller read them already looking for padding).
func (x *Reader) streamHeader(have []byte) error {
	var h [12]byte
	copy(h[:], have)
	if err := x.full(h[len(have):]); err != nil {
		return err
	}
	if !bytes.Equal(h[:6], magic) {
		return x.errf("not an xz stream (bad magic bytes)")
	}
	if crc32.ChecksumIEEE(h[6:8]) != binary.LittleEndian.Uint32(h[8:12]) {
		return x.errf("stream header checksum mismatch")
	}
	if h[6] != 0 || h[7]&0xF0 != 0 {
		return x.errf("unsupported stream flags %#02x%02x", h[6], h[7])
	}
	x.check = h[7]
	if _, err := x.newCheck(); err != nil {
		return err
	}
	x.records = x.records[:0]
	return nil
}

// newCheck returns the hash of the stream's check (nil for none).
func (x *Reader) newCheck() (hash.Hash, error) {
	switch x.check {
	case 0x00:
		return nil, nil
	case 0x01:
		return crc32.NewIEEE(), nil
	case 0x04:
		return crc64.New(crc64Table), nil
	case 0x0A:
		return sha256.New(), nil
	}
	return nil, x.errf("unsupported check type %d", x.check)
}

// Read returns decompressed bytes.
func (x *Reader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, x.err
	}
	for x.err == nil {
		if !x.inBlock {
			x.err = x.next()
			continue
		}
		n, err := x.readBlock(p)
		x.err = err
		if n > 0 {
			return n, nil
		}
	}
	return 0, x.err
}

// next reads what follows a stream header or a block: a block header, or
// the index, the stream footer, padding and a further stream or the end.
func (x *Reader) next() error {
	b, err := x.byte()
	if err != nil {
		return err
	}
	if b != 0 {
		return x.blockHeader(b)
	}
	if err := x.index(); err != nil {
		return err
	}
	return x.padding()
}

// padding reads the stream padding after a footer (zero bytes in fours)
// and the next stream's header, or reports the end.
func (x *Reader) padding() error {
	for {
		var four [4]byte
		n, err := io.ReadFull(x.in, four[:])
		x.off += int64(n)
		if err == io.EOF {
			return io.EOF
		}
		if err != nil {
			return &Error{Offset: x.off, Msg: "stream padding is not a multiple of 4 bytes"}
		}
		if four != [4]byte{} {
			return x.streamHeader(four[:])
		}
	}
}

// vli reads a variable-length integer of the format (at most 9 bytes, no
// trailing zero byte) from b, returning it and the bytes used.
func vli(b []byte) (uint64, int, bool) {
	var v uint64
	for i := 0; i < 9 && i < len(b); i++ {
		v |= uint64(b[i]&0x7F) << (7 * i)
		if b[i]&0x80 == 0 {
			if i > 0 && b[i] == 0 {
				return 0, 0, false
			}
			return v, i + 1, true
		}
	}
	return 0, 0, false
}

// readVLI reads a variable-length integer from the input, adding its
// bytes to h.
func (x *Reader) readVLI(h hash.Hash) (uint64, error) {
	var buf [9]byte
	for i := range buf {
		b, err := x.byte()
		if err != nil {
			return 0, err
		}
		buf[i] = b
		if b&0x80 == 0 {
			h.Write(buf[:i+1])
			v, _, ok := vli(buf[:i+1])
			if !ok {
				return 0, x.errf("bad variable-length integer")
			}
			return v, nil
		}
	}
	return 0, x.errf("variable-length integer longer than 9 bytes")
}
