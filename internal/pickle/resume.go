package pickle

import "errors"

var errPaused = errors.New("paused")

// Decoder decodes a pickle held in memory and can stop between two opcodes
// and go on later, possibly after skipping a stretch of the input that the
// caller decoded by itself (in parallel, say).
type Decoder struct {
	d      *decoder
	result Value
	done   bool
}

// NewDecoder returns a decoder over b.
func NewDecoder(b []byte, opts Options) *Decoder {
	d := newDecoder(nil, opts)
	d.buf = b
	d.eof = true
	return &Decoder{d: d}
}

// Run decodes until STOP, or until a hook calls Pause: then paused is true
// and Run may be called again to go on.
func (x *Decoder) Run() (v Value, paused bool, err error) {
	if x.done {
		return x.result, false, nil
	}
	x.d.paused = false
	v, err = x.d.run()
	if err == errPaused {
		x.d.paused = false
		return Value{}, true, nil
	}
	if err == nil {
		x.done, x.result = true, v
	}
	return v, false, err
}

// Pause makes Run return after the opcode being executed (call it from a hook).
func (x *Decoder) Pause() { x.d.paused = true }

// Offset is the input offset of the next opcode.
func (x *Decoder) Offset() int64 { return x.d.base + int64(x.d.pos) }

// MemoLen is the number of memo slots in use (the next MEMOIZE's slot).
func (x *Decoder) MemoLen() int { return x.d.memo.n }

// Memo returns the value of a memo slot. It only reads, so several
// goroutines may call it while Run is not running.
func (x *Decoder) Memo(i int) (Value, bool) {
	v, ok := x.d.memo.get(i)
	if !ok && x.d.resolve != nil && i >= x.d.extLo && i < x.d.extHi {
		v, ok = x.d.resolve(i)
	}
	return v, ok
}

// Skip moves the decoder to offset to (an opcode boundary after the current
// one) as if the opcodes in between had run: they memoized the slots from
// MemoLen() up to memoLen, whose values resolve gives on demand, and they
// leave push on the stack, above a new MARK when mark is set. Only one
// stretch of skipped slots is kept: a second Skip replaces the resolver,
// which must then also answer for the earlier stretch.
func (x *Decoder) Skip(to int64, memoLen int, resolve func(int) (Value, bool), mark bool, push []Value) error {
	d := x.d
	if to < x.Offset() || to > int64(len(d.buf)) || memoLen < d.memo.n {
		return errors.New("pickle: Skip outside the input")
	}
	d.pos = int(to - d.base)
	if memoLen > d.memo.n {
		if d.resolve == nil {
			d.extLo = d.memo.n
		}
		d.extHi = memoLen
		d.resolve = resolve
		for (memoLen-1)/memoChunk >= len(d.memo.chunks) {
			d.memo.chunks = append(d.memo.chunks, make([]uint64, memoChunk))
		}
		d.memo.n = memoLen
	}
	if mark {
		d.marks = append(d.marks, len(d.stack))
	}
	d.stack = append(d.stack, push...)
	return nil
}
