package snapgen

import (
	"bytes"
	"encoding/binary"
	"io"
)

// pickler writes protocol-4 pickles the way CPython's pickler does for the
// objects of a snapshot: every container and string memoized, strings shared
// by identity fetched back with BINGET, FRAME opcodes every 64 KiB.
type pickler struct {
	w     io.Writer
	frame bytes.Buffer
	memo  int
	err   error
}

func newPickler(w io.Writer) *pickler {
	p := &pickler{w: w}
	_, p.err = w.Write([]byte{0x80, 4}) // PROTO comes before the first FRAME
	return p
}

func (p *pickler) op(b ...byte) { p.frame.Write(b) }

// boundary flushes the current frame when it is large enough, as CPython's
// framer does between top-level opcodes.
func (p *pickler) boundary() {
	if p.frame.Len() >= 64<<10 {
		p.flush()
	}
}

func (p *pickler) flush() {
	if p.err != nil || p.frame.Len() == 0 {
		return
	}
	data := p.frame.Bytes()
	var hdr [9]byte
	hdr[0] = 0x95
	binary.LittleEndian.PutUint64(hdr[1:], uint64(len(data)))
	if len(data) >= 4 {
		_, p.err = p.w.Write(hdr[:])
	}
	if p.err == nil {
		_, p.err = p.w.Write(data)
	}
	p.frame.Reset()
}

func (p *pickler) memoize() int {
	p.op(0x94)
	p.memo++
	return p.memo - 1
}

func (p *pickler) get(i int) {
	if i < 256 {
		p.op('h', byte(i))
		return
	}
	var b [5]byte
	b[0] = 'j'
	binary.LittleEndian.PutUint32(b[1:], uint32(i))
	p.op(b[:]...)
}

// str writes a new string object and memoizes it.
func (p *pickler) str(s string) int {
	if len(s) < 256 {
		p.op(0x8c, byte(len(s)))
	} else {
		var b [5]byte
		b[0] = 'X'
		binary.LittleEndian.PutUint32(b[1:], uint32(len(s)))
		p.op(b[:]...)
	}
	p.frame.WriteString(s)
	return p.memoize()
}

func (p *pickler) int(v int64) {
	switch {
	case v >= 0 && v < 256:
		p.op('K', byte(v))
	case v >= 0 && v < 65536:
		p.op('M', byte(v), byte(v>>8))
	case v >= -1<<31 && v < 1<<31:
		var b [5]byte
		b[0] = 'J'
		binary.LittleEndian.PutUint32(b[1:], uint32(int32(v)))
		p.op(b[:]...)
	default:
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], uint64(v))
		n := 8
		for n > 1 && ((b[n-1] == 0 && b[n-2]&0x80 == 0) || (b[n-1] == 0xff && b[n-2]&0x80 != 0)) {
			n--
		}
		p.op(0x8a, byte(n))
		p.op(b[:n]...)
	}
}

func (p *pickler) boolean(b bool) {
	if b {
		p.op(0x88)
	} else {
		p.op(0x89)
	}
}

func (p *pickler) mark()      { p.op('(') }
func (p *pickler) emptyDict() { p.op('}') }
func (p *pickler) emptyList() { p.op(']') }
func (p *pickler) setitems()  { p.op('u') }
func (p *pickler) appends()   { p.op('e') }
func (p *pickler) appendOne() { p.op('a') }
func (p *pickler) tuple2()    { p.op(0x86) }
func (p *pickler) float(v float64) {
	var b [9]byte
	b[0] = 'G'
	binary.BigEndian.PutUint64(b[1:], mathFloat64bits(v))
	p.op(b[:]...)
}

func (p *pickler) stop() error {
	p.op('.')
	p.flush()
	return p.err
}
