package xz

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"io"
)

const filterLZMA2 = 0x21

// checkSize is the size of each supported check type's field.
var checkSize = map[byte]int64{0x00: 0, 0x01: 4, 0x04: 8, 0x0A: 32}

// blockHeader reads a block header whose first byte (its size) is b.
func (x *Reader) blockHeader(b byte) error {
	size := (int(b) + 1) * 4
	h := make([]byte, size)
	h[0] = b
	if err := x.full(h[1:]); err != nil {
		return err
	}
	if crc32.ChecksumIEEE(h[:size-4]) != binary.LittleEndian.Uint32(h[size-4:]) {
		return x.errf("block header checksum mismatch")
	}
	flags := h[1]
	if flags&0x3C != 0 {
		return x.errf("unsupported block flags %#02x", flags)
	}
	blk := block{headerSize: int64(size), compressed: -1, size: -1}
	p := h[2 : size-4]
	field := func() (uint64, bool) {
		v, n, ok := vli(p)
		p = p[n:]
		return v, ok
	}
	if flags&0x40 != 0 {
		v, ok := field()
		if !ok || v == 0 || v > 1<<62 {
			return x.errf("bad compressed size in block header")
		}
		blk.compressed = int64(v)
	}
	if flags&0x80 != 0 {
		v, ok := field()
		if !ok || v > 1<<62 {
			return x.errf("bad uncompressed size in block header")
		}
		blk.size = int64(v)
	}
	if flags&0x03 != 0 {
		return x.errf("%d filters: only LZMA2 alone is supported", flags&0x03+1)
	}
	id, ok1 := field()
	n, ok2 := field()
	if !ok1 || !ok2 || n > uint64(len(p)) {
		return x.errf("bad filter flags in block header")
	}
	if id != filterLZMA2 {
		return x.errf("filter %#x: only LZMA2 is supported", id)
	}
	if n != 1 || p[0] > 40 {
		return x.errf("bad LZMA2 properties")
	}
	dictSize := uint64(0xFFFFFFFF)
	if p[0] < 40 {
		dictSize = uint64(2|p[0]&1) << (p[0]/2 + 11)
	}
	if !bytes.Equal(p[1:], make([]byte, len(p)-1)) {
		return x.errf("block header padding is not zero")
	}
	var err error
	if blk.hash, err = x.newCheck(); err != nil {
		return err
	}
	blk.start = x.off
	x.blk, x.inBlock = blk, true
	x.d.size = int(min(dictSize, 1<<62))
	x.d.reset()
	x.needDictReset, x.needProps = true, true
	x.raw, x.chunk.left = nil, 0
	return nil
}

// readBlock returns decompressed bytes of the current block, reading
// LZMA2 chunks as needed; at the block's end it checks it (endBlock).
func (x *Reader) readBlock(p []byte) (int, error) {
	for {
		if len(x.raw) > 0 {
			n := copy(p, x.raw)
			x.raw = x.raw[n:]
			return x.produced(p[:n])
		}
		if x.chunk.left > 0 {
			n, err := x.chunk.read(p)
			if err != nil {
				return 0, x.errf("%v", err)
			}
			return x.produced(p[:n])
		}
		if x.blk.lzmaEnd {
			return 0, x.endBlock()
		}
		if err := x.chunkHeader(); err != nil {
			return 0, err
		}
	}
}

// produced counts and hashes decompressed bytes about to be returned.
func (x *Reader) produced(b []byte) (int, error) {
	x.blk.uncompressed += uint64(len(b))
	if x.blk.size >= 0 && x.blk.uncompressed > uint64(x.blk.size) {
		return 0, x.errf("block is larger than its header says")
	}
	if x.blk.hash != nil {
		x.blk.hash.Write(b)
	}
	return len(b), nil
}

// chunkHeader reads an LZMA2 chunk's header and its packed bytes.
func (x *Reader) chunkHeader() error {
	var c [1]byte
	if err := x.full(c[:]); err != nil {
		return err
	}
	control := c[0]
	if control == 0x00 {
		x.blk.lzmaEnd = true
		return nil
	}
	if control >= 0xE0 || control == 0x01 {
		x.needProps, x.needDictReset = true, false
		x.d.reset()
	} else if x.needDictReset {
		return x.errf("LZMA2 chunk without the dictionary reset that must come first")
	}
	if control < 0x80 {
		if control > 0x02 {
			return x.errf("bad LZMA2 control byte %#02x", control)
		}
		var sz [2]byte
		if err := x.full(sz[:]); err != nil {
			return err
		}
		x.packed = grow(x.packed, int(binary.BigEndian.Uint16(sz[:]))+1)
		if err := x.full(x.packed); err != nil {
			return err
		}
		for _, b := range x.packed {
			x.d.put(b)
		}
		x.raw = x.packed
		return nil
	}
	var h [4]byte
	n := 4
	if control >= 0xC0 {
		n = 5
	}
	hb := make([]byte, n)
	if err := x.full(hb); err != nil {
		return err
	}
	copy(h[:], hb)
	unpacked := int(control&0x1F)<<16 + int(binary.BigEndian.Uint16(h[0:2])) + 1
	packed := int(binary.BigEndian.Uint16(h[2:4])) + 1
	switch {
	case control >= 0xC0:
		pr, ok := decodeProps(hb[4])
		if !ok {
			return x.errf("bad LZMA properties %#02x", hb[4])
		}
		x.z.props = pr
		x.needProps = false
		x.z.resetState()
	case x.needProps:
		return x.errf("LZMA2 chunk without the properties that must follow a dictionary reset")
	case control >= 0xA0:
		x.z.resetState()
	}
	x.packed = grow(x.packed, packed)
	if err := x.full(x.packed); err != nil {
		return err
	}
	x.chunk = lzmaChunk{z: &x.z, d: &x.d, left: unpacked}
	if !x.chunk.rc.init(x.packed) {
		return x.errf("bad LZMA range coder start")
	}
	return nil
}

func grow(b []byte, n int) []byte {
	if cap(b) < n {
		return make([]byte, n)
	}
	return b[:n]
}

// endBlock reads the block padding and check and holds the block to its
// header's sizes; the block becomes a record for the index.
func (x *Reader) endBlock() error {
	compressed := x.off - x.blk.start
	if x.blk.compressed >= 0 && compressed != x.blk.compressed {
		return x.errf("block's compressed size %d differs from its header's %d", compressed, x.blk.compressed)
	}
	if x.blk.size >= 0 && x.blk.uncompressed != uint64(x.blk.size) {
		return x.errf("block's size %d differs from its header's %d", x.blk.uncompressed, x.blk.size)
	}
	pad := make([]byte, (4-compressed%4)%4)
	if err := x.full(pad); err != nil {
		return err
	}
	if !bytes.Equal(pad, make([]byte, len(pad))) {
		return x.errf("block padding is not zero")
	}
	cs := checkSize[x.check]
	got := make([]byte, cs)
	if err := x.full(got); err != nil {
		return err
	}
	if x.blk.hash != nil {
		want := x.blk.hash.Sum(nil)
		if x.check == 0x01 || x.check == 0x04 { // stored little-endian
			for i, j := 0, len(want)-1; i < j; i, j = i+1, j-1 {
				want[i], want[j] = want[j], want[i]
			}
		}
		if !bytes.Equal(got, want) {
			return x.errf("block check mismatch (the data is damaged)")
		}
	}
	x.records = append(x.records, record{unpadded: uint64(x.blk.headerSize + compressed + cs), uncompressed: x.blk.uncompressed})
	x.inBlock = false
	return nil
}

// index reads the index (its indicator byte read already), holds it to
// the blocks read, and reads the stream footer.
func (x *Reader) index() error {
	start := x.off - 1
	h := crc32.NewIEEE()
	h.Write([]byte{0})
	n, err := x.readVLI(h)
	if err != nil {
		return err
	}
	if n != uint64(len(x.records)) {
		return x.errf("index lists %d blocks, the stream holds %d", n, len(x.records))
	}
	for _, r := range x.records {
		u, err := x.readVLI(h)
		if err != nil {
			return err
		}
		s, err := x.readVLI(h)
		if err != nil {
			return err
		}
		if u != r.unpadded || s != r.uncompressed {
			return x.errf("index record does not match its block")
		}
	}
	pad := make([]byte, (4-(x.off-start)%4)%4)
	if err := x.full(pad); err != nil {
		return err
	}
	if !bytes.Equal(pad, make([]byte, len(pad))) {
		return x.errf("index padding is not zero")
	}
	h.Write(pad)
	var sum [4]byte
	if err := x.full(sum[:]); err != nil {
		return err
	}
	if h.Sum32() != binary.LittleEndian.Uint32(sum[:]) {
		return x.errf("index checksum mismatch")
	}
	size := x.off - start
	var f [12]byte
	if err := x.full(f[:]); err != nil {
		return err
	}
	if crc32.ChecksumIEEE(f[4:10]) != binary.LittleEndian.Uint32(f[0:4]) {
		return x.errf("stream footer checksum mismatch")
	}
	if string(f[10:12]) != "YZ" {
		return x.errf("bad stream footer magic")
	}
	if (int64(binary.LittleEndian.Uint32(f[4:8]))+1)*4 != size {
		return x.errf("stream footer's index size differs from the index")
	}
	if f[8] != 0 || f[9] != x.check {
		return x.errf("stream footer's flags differ from the header's")
	}
	return nil
}

// compile-time check that Reader is an io.Reader.
var _ io.Reader = (*Reader)(nil)
