package pickle

import (
	"bytes"
	"encoding/binary"
)

// Scanner checks the opcode stream of a pickle as it arrives, without
// decoding it: every opcode must be known, length fields must stay within
// Options.MaxString, text lines within a MiB and text integers within
// Options.MaxDigits. A reader that must hold a whole (decompressed) pickle
// in memory before decoding it feeds each piece it reads to a Scanner, so
// that garbage, a decompression bomb behind a valid header or a length that
// lies is refused where it starts instead of after it was inflated.
//
// Python's pickler (protocol 4 and 5) cuts its output into FRAMEs of about
// 64 KiB: the scanner walks such frames header to header, checking the
// first opcode of each, so that a framed pickle costs it almost nothing; a
// frame longer than maxFrameJump, and whatever lies between frames (large
// strings are written outside them), is checked opcode by opcode. Garbage
// is then caught within one frame of where it starts.
type Scanner struct {
	opts   Options
	pos    int  // offset of the next opcode (or frame header) to check
	done   bool // saw STOP: the pickle ends there
	walked bool // a frame was walked over: its opcodes were not all checked
	exact  bool // frames are no longer walked over: every opcode is checked
}

// maxFrameJump is the longest frame walked over without looking inside:
// Python's frames are 64 KiB (what a single object needs beyond that is
// written outside frames).
const maxFrameJump = 1 << 20

// NewScanner returns a scanner with opts' limits (hooks are ignored).
func NewScanner(opts Options) *Scanner {
	d := newDecoder(nil, opts) // for the defaults
	return &Scanner{opts: d.opts}
}

// Done reports whether the scanner saw STOP: the bytes after it are not
// part of the pickle (the decoder never reads them).
func (s *Scanner) Done() bool { return s.done }

// Feed checks the opcodes that lie wholly in data, which holds the input
// from its first byte and grows between calls. It returns an *Error at the
// first opcode that is not valid.
func (s *Scanner) Feed(data []byte) error {
	if s.exact {
		pos, err := s.scan(data, s.pos, len(data), false)
		s.pos = pos
		return err
	}
	for s.pos < len(data) && !s.done {
		if data[s.pos] == opFrame && s.pos+9 <= len(data) {
			n := binary.LittleEndian.Uint64(data[s.pos+1:])
			lo := s.pos + 9
			if n > 0 && n <= maxFrameJump {
				if lo < len(data) {
					if _, ok := scanLen(data[lo]); !ok {
						return s.refuse(data, s.errf(lo, data[lo], "unknown opcode 0x%02x (not a pickle, or corrupt)", data[lo]))
					}
				}
				if uint64(len(data)-lo) < n {
					return nil // wait for the rest of the frame
				}
				s.walked = true
				s.pos = lo + int(n)
				continue
			}
		}
		at := s.pos
		pos, err := s.scan(data, s.pos, len(data), true)
		s.pos = pos
		if err != nil {
			return s.refuse(data, err)
		}
		if pos == at {
			return nil // the opcode is not whole yet
		}
	}
	return nil
}

// refuse returns err, found where frames were walked over, if the decoder
// meets it too: the frames' opcodes are then read one by one, from the
// start, as the decoder reads them. The pickle may have ended before err
// (the decoder stops at the first STOP, which may lie inside any frame
// walked over, and what follows it, frames or garbage, is not the
// pickle's), or err may lie inside an opcode that ran over a frame's end.
func (s *Scanner) refuse(data []byte, err error) error {
	if !s.walked {
		return err // no frame was walked over: every opcode was checked
	}
	full := Scanner{opts: s.opts}
	pos, ferr := full.scan(data, 0, len(data), false)
	if ferr != nil {
		return ferr // the first bad opcode, as the decoder meets it
	}
	// A STOP, or no error at all: an opcode ran over a frame's end (the
	// decoder does not hold opcodes to frames), so the walk lost step. The
	// rest is checked opcode by opcode: walking on could lose step again,
	// and rescanning each time would cost the input's length each time.
	s.pos, s.done, s.exact = pos, full.done, true
	return nil
}

// scan checks the opcodes of data[pos:end] until one is not whole (after
// the first when one is set); it returns where it stopped.
func (s *Scanner) scan(data []byte, pos, end int, one bool) (int, error) {
	data = data[:end]
	for pos < len(data) && !s.done {
		op := data[pos]
		need, ok := scanLen(op)
		switch {
		case !ok:
			return pos, s.errf(pos, op, "unknown opcode 0x%02x (not a pickle, or corrupt)", op)
		case need > 0: // fixed length
			if pos+need > len(data) {
				return pos, nil
			}
			if op == opStop {
				s.done = true
			}
			pos += need
		case need < 0: // a length field of -need bytes, then the argument
			w := -need
			if pos+1+w > len(data) {
				return pos, nil
			}
			var n uint64
			switch w {
			case 1:
				n = uint64(data[pos+1])
			case 4:
				n = uint64(binary.LittleEndian.Uint32(data[pos+1:]))
				if op == opBinstring && int32(n) < 0 {
					return pos, s.errf(pos, op, "negative length")
				}
			case 8:
				n = binary.LittleEndian.Uint64(data[pos+1:])
			}
			if op == opFrame {
				pos += 1 + w // a long FRAME: its opcodes are checked one by one
				break
			}
			if n > uint64(s.opts.MaxString) {
				return pos, s.limitf(pos, op, "argument of %d bytes exceeds the limit of %d bytes", n, s.opts.MaxString)
			}
			if uint64(len(data)-pos-1-w) < n {
				return pos, nil
			}
			pos += 1 + w + int(n)
		default: // newline-terminated arguments: one line, two for GLOBAL and INST
			lines := 1
			if op == opGlobal || op == opInst {
				lines = 2
			}
			p := pos + 1
			for l := 0; l < lines; l++ {
				i := bytes.IndexByte(data[p:min(len(data), p+1<<20+1)], '\n')
				if i < 0 {
					if len(data)-p > 1<<20 {
						return pos, s.errf(pos, op, "line longer than 1 MiB")
					}
					return pos, nil
				}
				if op == opInt || op == opLong {
					if err := s.digits(pos, op, data[p:p+i]); err != nil {
						return pos, err
					}
				}
				p += i + 1
			}
			pos = p
		}
		if one {
			break
		}
	}
	return pos, nil
}

func (s *Scanner) errf(pos int, op byte, format string, a ...any) error {
	d := decoder{opOff: int64(pos), op: op, opts: s.opts}
	return d.errf(format, a...)
}

func (s *Scanner) limitf(pos int, op byte, format string, a ...any) error {
	d := decoder{opOff: int64(pos), op: op, opts: s.opts}
	return d.limitf(format, a...)
}

func (s *Scanner) digits(pos int, op byte, b []byte) error {
	d := decoder{opOff: int64(pos), op: op, opts: s.opts}
	return d.digits(b)
}

// scanLen gives an opcode's length for the scanner: > 0 a fixed total
// length, < 0 minus the width of a length prefix, 0 a newline-terminated
// argument; ok is false for unknown opcodes.
func scanLen(op byte) (n int, ok bool) {
	n = int(scanTable[op])
	return n, n != scanUnknown
}

const scanUnknown = 127

var scanTable = func() (t [256]int8) {
	for i := range t {
		t[i] = scanUnknown
	}
	for _, op := range []byte{opMark, opStop, opPop, opPopMark, opDup, opNone, opReduce, opAppend, opBuild,
		opDict, opEmptyDict, opAppends, opList, opEmptyList, opObj, opSetitem, opTuple, opEmptyTuple,
		opSetitems, opBinpersid, opNewobj, opTuple1, opTuple2, opTuple3, opNewtrue, opNewfalse, opEmptySet,
		opAdditems, opFrozenset, opNewobjEx, opStackGlobal, opMemoize, opNextBuffer, opReadonlyBuffer} {
		t[op] = 1
	}
	t[opBinget], t[opBinput], t[opBinint1], t[opExt1] = 2, 2, 2, 2
	t[opBinint2], t[opExt2] = 3, 3
	t[opLongBinget], t[opLongBinput], t[opBinint], t[opExt4] = 5, 5, 5, 5
	t[opBinfloat] = 9
	t[opProto] = 2
	t[opLong1], t[opShortBinunicode], t[opShortBinbytes], t[opShortBinstring] = -1, -1, -1, -1
	t[opLong4], t[opBinunicode], t[opBinbytes], t[opBinstring] = -4, -4, -4, -4
	t[opBinunicode8], t[opBinbytes8], t[opBytearray8], t[opFrame] = -8, -8, -8, -8
	for _, op := range []byte{opFloat, opInt, opLong, opString, opUnicode, opPersid, opGet, opPut, opGlobal, opInst} {
		t[op] = 0
	}
	return t
}()
