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
type Scanner struct {
	opts Options
	pos  int  // offset of the next opcode to check
	done bool // saw STOP: the pickle ends there
}

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
	pos := s.pos
	defer func() { s.pos = pos }()
	for pos < len(data) && !s.done {
		op := data[pos]
		need, ok := scanLen(op)
		switch {
		case !ok:
			return s.errf(pos, op, "unknown opcode 0x%02x (not a pickle, or corrupt)", op)
		case need > 0: // fixed length
			if pos+need > len(data) {
				return nil
			}
			if op == opStop {
				s.done = true
			}
			pos += need
		case need < 0: // a length field of -need bytes, then the argument
			w := -need
			if pos+1+w > len(data) {
				return nil
			}
			var n uint64
			switch w {
			case 1:
				n = uint64(data[pos+1])
			case 4:
				n = uint64(binary.LittleEndian.Uint32(data[pos+1:]))
				if op == opBinstring && int32(n) < 0 {
					return s.errf(pos, op, "negative length")
				}
			case 8:
				n = binary.LittleEndian.Uint64(data[pos+1:])
			}
			if op == opFrame {
				pos += 1 + w // a FRAME's length covers opcodes, checked on their own
				continue
			}
			if n > uint64(s.opts.MaxString) {
				return s.limitf(pos, op, "argument of %d bytes exceeds the limit of %d bytes", n, s.opts.MaxString)
			}
			if uint64(len(data)-pos-1-w) < n {
				return nil
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
						return s.errf(pos, op, "line longer than 1 MiB")
					}
					return nil
				}
				if op == opInt || op == opLong {
					if err := s.digits(pos, op, data[p:p+i]); err != nil {
						return err
					}
				}
				p += i + 1
			}
			pos = p
		}
	}
	return nil
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
