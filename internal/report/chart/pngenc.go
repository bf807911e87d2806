package chart

import (
	"bufio"
	"compress/flate"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"image"
	"io"
)

// encodePNG writes img as the standard library's png.Encode writes an
// *image.RGBA, byte for byte: 8-bit RGB when every pixel is opaque (a
// chart always is: it is painted over white), else 8-bit RGBA with the
// colours un-premultiplied; each row filtered by image/png's heuristic
// (the filter with the least sum of absolute differences, tried in its
// order); one zlib stream at the default level, cut into IDAT chunks by a
// 32 KiB buffer. It is written here rather than imported because
// image/png with compress/zlib and hash/adler32 is a measurable part of an
// empty-cache build (docs/build.md), for the one kind of image ptscope
// writes. pngenc_test.go holds it to png.Encode's bytes.
func encodePNG(w io.Writer, img *image.RGBA) error {
	b := img.Bounds()
	if b.Dx() <= 0 || b.Dy() <= 0 || int64(b.Dx()) >= 1<<32 || int64(b.Dy()) >= 1<<32 {
		return errors.New("png: invalid image size")
	}
	opaque := img.Opaque()
	e := &pngChunks{w: w}
	if _, err := io.WriteString(w, "\x89PNG\r\n\x1a\n"); err != nil {
		return err
	}
	var ihdr [13]byte
	binary.BigEndian.PutUint32(ihdr[0:4], uint32(b.Dx()))
	binary.BigEndian.PutUint32(ihdr[4:8], uint32(b.Dy()))
	ihdr[8] = 8 // bits per sample
	ihdr[9] = 6 // truecolour with alpha
	bpp := 4
	if opaque {
		ihdr[9], bpp = 2, 3 // truecolour
	}
	e.chunk(ihdr[:], "IHDR")
	if e.err != nil {
		return e.err
	}
	bw := bufio.NewWriterSize(e, 1<<15)
	if err := writeRows(bw, img, bpp); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	e.chunk(nil, "IEND")
	return e.err
}

// pngChunks writes each Write as one chunk of the given type: the IDAT
// chunks are the flushes of the 32 KiB buffer above it.
type pngChunks struct {
	w   io.Writer
	err error
}

func (e *pngChunks) Write(b []byte) (int, error) {
	e.chunk(b, "IDAT")
	if e.err != nil {
		return 0, e.err
	}
	return len(b), nil
}

func (e *pngChunks) chunk(b []byte, name string) {
	if e.err != nil {
		return
	}
	var head [8]byte
	binary.BigEndian.PutUint32(head[:4], uint32(len(b)))
	copy(head[4:], name)
	crc := crc32.NewIEEE()
	crc.Write(head[4:8])
	crc.Write(b)
	var foot [4]byte
	binary.BigEndian.PutUint32(foot[:], crc.Sum32())
	for _, p := range [][]byte{head[:], b, foot[:]} {
		if _, e.err = e.w.Write(p); e.err != nil {
			return
		}
	}
}

// writeRows writes the zlib stream of the filtered rows: the header of
// the default level (0x78 0x9c), deflate at that level, and the Adler-32
// of the unfiltered-by-zlib input, as compress/zlib writes it.
func writeRows(w io.Writer, img *image.RGBA, bpp int) error {
	if _, err := w.Write([]byte{0x78, 0x9c}); err != nil {
		return err
	}
	fw, err := flate.NewWriter(w, flate.DefaultCompression)
	if err != nil {
		return err
	}
	sum := adler{a: 1}
	b := img.Bounds()
	sz := 1 + bpp*b.Dx()
	var cr [5][]byte
	for i := range cr {
		cr[i] = make([]byte, sz)
		cr[i][0] = byte(i)
	}
	pr := make([]byte, sz)
	for y := b.Min.Y; y < b.Max.Y; y++ {
		row := img.Pix[img.PixOffset(b.Min.X, y):img.PixOffset(b.Max.X, y)]
		dst := cr[0][1:]
		if bpp == 3 {
			for j := 0; j < len(row); j += 4 {
				dst[0], dst[1], dst[2] = row[j], row[j+1], row[j+2]
				dst = dst[3:]
			}
		} else {
			unpremultiply(dst, row)
		}
		f := pngFilter(&cr, pr, bpp)
		sum.write(cr[f])
		if _, err := fw.Write(cr[f]); err != nil {
			return err
		}
		pr, cr[0] = cr[0], pr
	}
	if err := fw.Close(); err != nil {
		return err
	}
	var foot [4]byte
	binary.BigEndian.PutUint32(foot[:], sum.sum())
	_, err = w.Write(foot[:])
	return err
}

// unpremultiply converts premultiplied RGBA to straight RGBA as image/png
// does for an *image.RGBA.
func unpremultiply(dst, src []byte) {
	for ; len(src) >= 4; dst, src = dst[4:], src[4:] {
		switch a := src[3]; a {
		case 0:
			dst[0], dst[1], dst[2], dst[3] = 0, 0, 0, 0
		case 0xff:
			copy(dst[:4], src[:4])
		default:
			const m = 0x101 * 0xffff
			a := uint32(a) * 0x101
			dst[0] = uint8((uint32(src[0]) * m / a) >> 8)
			dst[1] = uint8((uint32(src[1]) * m / a) >> 8)
			dst[2] = uint8((uint32(src[2]) * m / a) >> 8)
			dst[3] = src[3]
		}
	}
}

// The PNG row filters, by their type byte.
const (
	ftNone = iota
	ftSub
	ftUp
	ftAverage
	ftPaeth
)

// pngFilter fills cr[1..4] with the filtered forms of the row in cr[0]
// (pr is the previous row) and returns the one image/png would choose:
// Up first, then Paeth, None, Sub and Average, each taken only if its sum
// of absolute byte values is strictly smaller.
func pngFilter(cr *[5][]byte, pr []byte, bpp int) int {
	cdat0, cdat1, cdat2, cdat3, cdat4 := cr[0][1:], cr[1][1:], cr[2][1:], cr[3][1:], cr[4][1:]
	pdat := pr[1:]
	n := len(cdat0)
	sum := 0
	for i := 0; i < n; i++ {
		cdat2[i] = cdat0[i] - pdat[i]
		sum += abs8(cdat2[i])
	}
	best, filter := sum, ftUp

	sum = 0
	for i := 0; i < bpp; i++ {
		cdat4[i] = cdat0[i] - pdat[i]
		sum += abs8(cdat4[i])
	}
	for i := bpp; i < n; i++ {
		cdat4[i] = cdat0[i] - paeth(cdat0[i-bpp], pdat[i], pdat[i-bpp])
		sum += abs8(cdat4[i])
		if sum >= best {
			break
		}
	}
	if sum < best {
		best, filter = sum, ftPaeth
	}

	sum = 0
	for i := 0; i < n; i++ {
		sum += abs8(cdat0[i])
		if sum >= best {
			break
		}
	}
	if sum < best {
		best, filter = sum, ftNone
	}

	sum = 0
	for i := 0; i < bpp; i++ {
		cdat1[i] = cdat0[i]
		sum += abs8(cdat1[i])
	}
	for i := bpp; i < n; i++ {
		cdat1[i] = cdat0[i] - cdat0[i-bpp]
		sum += abs8(cdat1[i])
		if sum >= best {
			break
		}
	}
	if sum < best {
		best, filter = sum, ftSub
	}

	sum = 0
	for i := 0; i < bpp; i++ {
		cdat3[i] = cdat0[i] - pdat[i]/2
		sum += abs8(cdat3[i])
	}
	for i := bpp; i < n; i++ {
		cdat3[i] = cdat0[i] - uint8((int(cdat0[i-bpp])+int(pdat[i]))/2)
		sum += abs8(cdat3[i])
		if sum >= best {
			break
		}
	}
	if sum < best {
		filter = ftAverage
	}
	return filter
}

func abs8(d uint8) int {
	if d < 128 {
		return int(d)
	}
	return 256 - int(d)
}

// paeth is the PNG spec's Paeth predictor.
func paeth(a, b, c uint8) uint8 {
	pc := int(c)
	pa := int(b) - pc
	pb := int(a) - pc
	pc = absInt(pa + pb)
	pa = absInt(pa)
	pb = absInt(pb)
	if pa <= pb && pa <= pc {
		return a
	} else if pb <= pc {
		return b
	}
	return c
}

func absInt(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// adler is zlib's Adler-32 checksum (RFC 1950); it starts as {a: 1}.
type adler struct{ a, b uint32 }

func (s *adler) write(p []byte) {
	const mod, nmax = 65521, 5552 // nmax: the most bytes before b can overflow
	a, b := s.a, s.b
	for len(p) > 0 {
		q := p
		if len(q) > nmax {
			q = q[:nmax]
		}
		p = p[len(q):]
		for _, x := range q {
			a += uint32(x)
			b += a
		}
		a %= mod
		b %= mod
	}
	s.a, s.b = a, b
}

func (s *adler) sum() uint32 { return s.b<<16 | s.a }
