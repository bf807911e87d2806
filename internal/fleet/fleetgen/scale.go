// Package fleetgen writes folders of many ranks for benchmarks and measuring
// scripts: every rank's snapshot is a real snapshot whose sizes, addresses
// and times are scaled by the rank's own factors (so that peaks, step times,
// distributions and outliers differ as they do in a real job), and every
// rank's trace is a synthetic FSDP rank (internal/kineto/gen) whose data
// loading varies, with a few stragglers.
package fleetgen

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
)

// Scale is a factor Num/ScaleDen. Sizes and addresses of CUDA blocks are
// multiples of 512 bytes, so with ScaleDen 512 they scale exactly and the
// blocks still tile their segments.
type Scale struct{ Num int64 }

// ScaleDen is the denominator of every Scale.
const ScaleDen = 512

// One is the factor 1.
var One = Scale{ScaleDen}

// ScaleOf returns the Scale nearest to f.
func ScaleOf(f float64) Scale { return Scale{int64(math.Round(f * ScaleDen))} }

// Float is the factor as a number.
func (s Scale) Float() float64 { return float64(s.Num) / ScaleDen }

func (s Scale) apply(v int64) int64 {
	// v * Num / ScaleDen rounded, without overflow for addresses near 2^47;
	// a positive value stays positive (traces record requested sizes, some
	// of 1 byte)
	if v < 0 && v != math.MinInt64 {
		return -s.apply(-v) // symmetric: time deltas before the first time
	}
	q, r := v/ScaleDen, v%ScaleDen
	out := q*s.Num + (r*s.Num+ScaleDen/2)/ScaleDen
	if v > 0 && out <= 0 {
		out = 1
	}
	return out
}

// sizeKeys are the snapshot fields that hold sizes or addresses (segments,
// blocks and trace entries); timeKey holds entry times.
var sizeKeys = map[string]bool{"size": true, "total_size": true, "allocated_size": true, "active_size": true,
	"requested_size": true, "addr": true, "address": true}

const timeKey = "time_us"

// ScaleSnapshot rewrites the snapshot pickle src to w with every size and
// address multiplied by size and every entry time moved to t0 + (t - t0) *
// time, t0 being the first time in the file. Everything else (memo, shared
// lists, frames, strings) is copied opcode for opcode; protocol 4+ frames
// are rebuilt around the resized integers. It reads binary pickles
// (protocols 2-5), what torch.cuda.memory._dump_snapshot writes.
func ScaleSnapshot(w io.Writer, src []byte, size, time Scale) error {
	p := &rewriter{src: src, size: size, time: time, memo: map[int64]string{}, t0: -1}
	return p.run(w)
}

type rewriter struct {
	strs       map[string]string
	src        []byte
	pos        int
	size, time Scale
	memo       map[int64]string
	nextMemo   int64
	t0         int64
	// the value on top of the stack when it is a string (the key whose
	// value comes next, in a dict's MARK k v k v SETITEMS)
	top    string
	topStr bool
}

func (p *rewriter) errf(format string, a ...any) error {
	return fmt.Errorf("fleetgen: offset %d: %s", p.pos, fmt.Sprintf(format, a...))
}

func (p *rewriter) take(n int) ([]byte, error) {
	if n < 0 || p.pos+n > len(p.src) {
		return nil, p.errf("truncated pickle")
	}
	b := p.src[p.pos : p.pos+n]
	p.pos += n
	return b, nil
}

func (p *rewriter) uint(n int) (uint64, error) {
	b, err := p.take(n)
	if err != nil {
		return 0, err
	}
	var v uint64
	for i := n - 1; i >= 0; i-- {
		v = v<<8 | uint64(b[i])
	}
	return v, nil
}

// framer writes opcodes into protocol-4 frames of about 64 KiB.
type framer struct {
	w      io.Writer
	cur    bytes.Buffer
	frames bool
	err    error
}

func (f *framer) boundary() {
	if f.frames && f.cur.Len() >= 64<<10 {
		f.flush()
	}
}

func (f *framer) flush() {
	if f.cur.Len() == 0 || f.err != nil {
		return
	}
	if f.frames {
		var h [9]byte
		h[0] = 0x95
		binary.LittleEndian.PutUint64(h[1:], uint64(f.cur.Len()))
		if _, f.err = f.w.Write(h[:]); f.err != nil {
			return
		}
	}
	_, f.err = f.w.Write(f.cur.Bytes())
	f.cur.Reset()
}

func (p *rewriter) run(w io.Writer) error {
	if len(p.src) < 2 || p.src[0] != 0x80 || p.src[1] < 2 || p.src[1] > 5 {
		return p.errf("not a binary pickle (protocol 2-5)")
	}
	if _, err := w.Write(p.src[:2]); err != nil {
		return err
	}
	p.pos = 2
	f := &framer{w: w, frames: p.src[1] >= 4}
	for {
		f.boundary()
		if f.err != nil {
			return f.err
		}
		start := p.pos
		op, err := p.take(1)
		if err != nil {
			return err
		}
		wasStr, key := p.topStr, p.top
		p.topStr = false
		switch o := op[0]; o {
		case 0x95: // FRAME: dropped, frames are rebuilt
			if _, err := p.take(8); err != nil {
				return err
			}
			p.topStr, p.top = wasStr, key
			continue
		case '.': // STOP
			f.cur.WriteByte('.')
			f.flush()
			return f.err
		case 'K', 'M', 'J', 0x8a, 0x8b: // BININT1, BININT2, BININT, LONG1, LONG4
			v, err := p.readInt(o)
			if err != nil {
				return err
			}
			if wasStr {
				v = p.scale(key, v)
			}
			writeInt(&f.cur, v)
			continue
		case 0x8c, 'X', 0x8d: // SHORT_BINUNICODE, BINUNICODE, BINUNICODE8
			n := 1
			switch o {
			case 'X':
				n = 4
			case 0x8d:
				n = 8
			}
			l, err := p.uint(n)
			if err != nil {
				return err
			}
			s, err := p.take(int(l))
			if err != nil {
				return err
			}
			p.top, p.topStr = p.intern(s), true
		case 0x94: // MEMOIZE
			if wasStr {
				p.memo[p.nextMemo] = key
			}
			p.nextMemo++
			p.topStr, p.top = wasStr, key
		case 'q', 'r': // BINPUT, LONG_BINPUT
			i, err := p.uint(argLen(o))
			if err != nil {
				return err
			}
			if wasStr {
				p.memo[int64(i)] = key
			} else {
				delete(p.memo, int64(i))
			}
			p.topStr, p.top = wasStr, key
		case 'h', 'j': // BINGET, LONG_BINGET
			i, err := p.uint(argLen(o))
			if err != nil {
				return err
			}
			p.top, p.topStr = p.memo[int64(i)]
		case 'G': // BINFLOAT
			_, err = p.take(8)
		case 'U', 'C': // SHORT_BINSTRING, SHORT_BINBYTES
			var l uint64
			if l, err = p.uint(1); err == nil {
				_, err = p.take(int(l))
			}
		case 'T', 'B': // BINSTRING, BINBYTES
			var l uint64
			if l, err = p.uint(4); err == nil {
				_, err = p.take(int(l))
			}
		case 0x8e, 0x96: // BINBYTES8, BYTEARRAY8
			var l uint64
			if l, err = p.uint(8); err == nil {
				_, err = p.take(int(l))
			}
		case 0x82: // EXT1
			_, err = p.take(1)
		case 0x83: // EXT2
			_, err = p.take(2)
		case 0x84: // EXT4
			_, err = p.take(4)
		case '(', '0', '1', '2', 'N', 0x88, 0x89, '}', ']', ')', 't', 0x85, 0x86, 0x87, 'a', 'e', 's', 'u', 'd', 'l',
			'R', 'b', 0x81, 0x92, 0x93, 0x8f, 0x90, 0x91, 0x97, 0x98, 'Q', 'o':
		default:
			return p.errf("opcode 0x%02x is not supported (text protocols are not)", o)
		}
		if err != nil {
			return err
		}
		f.cur.Write(p.src[start:p.pos])
	}
}

// intern returns s as a string, one copy per distinct value.
func (p *rewriter) intern(b []byte) string {
	if v, ok := p.strs[string(b)]; ok {
		return v
	}
	if p.strs == nil {
		p.strs = map[string]string{}
	}
	v := string(b)
	p.strs[v] = v
	return v
}

// argLen is the index width of the memo opcodes: one byte for BINPUT and
// BINGET, four for their LONG_ forms.
func argLen(o byte) int {
	if o == 'r' || o == 'j' {
		return 4
	}
	return 1
}

func (p *rewriter) scale(key string, v int64) int64 {
	switch {
	case sizeKeys[key]:
		return p.size.apply(v)
	case key == timeKey:
		if p.t0 < 0 {
			p.t0 = v
		}
		return p.t0 + p.time.apply(v-p.t0)
	}
	return v
}

func (p *rewriter) readInt(o byte) (int64, error) {
	switch o {
	case 'K':
		v, err := p.uint(1)
		return int64(v), err
	case 'M':
		v, err := p.uint(2)
		return int64(v), err
	case 'J':
		v, err := p.uint(4)
		return int64(int32(uint32(v))), err
	}
	n := 1
	if o == 0x8b {
		n = 4
	}
	l, err := p.uint(n)
	if err != nil {
		return 0, err
	}
	b, err := p.take(int(l))
	if err != nil {
		return 0, err
	}
	if len(b) > 8 {
		return 0, p.errf("integer of %d bytes", len(b))
	}
	var v int64
	for i := len(b) - 1; i >= 0; i-- {
		v = v<<8 | int64(b[i])
	}
	if len(b) > 0 && len(b) < 8 && b[len(b)-1]&0x80 != 0 {
		v -= 1 << (8 * len(b)) // sign-extend
	}
	return v, nil
}

// writeInt writes v with the smallest opcode CPython's pickler would use.
func writeInt(b *bytes.Buffer, v int64) {
	switch {
	case v >= 0 && v < 1<<8:
		b.Write([]byte{'K', byte(v)})
	case v >= 0 && v < 1<<16:
		b.Write([]byte{'M', byte(v), byte(v >> 8)})
	case v >= math.MinInt32 && v <= math.MaxInt32:
		var x [5]byte
		x[0] = 'J'
		binary.LittleEndian.PutUint32(x[1:], uint32(int32(v)))
		b.Write(x[:])
	default:
		var x [8]byte
		binary.LittleEndian.PutUint64(x[:], uint64(v))
		n := 8
		// the shortest two's complement form
		for n > 1 && ((x[n-1] == 0 && x[n-2]&0x80 == 0) || (x[n-1] == 0xff && x[n-2]&0x80 != 0)) {
			n--
		}
		b.Write([]byte{0x8a, byte(n)})
		b.Write(x[:n])
	}
}
