package pickle

import (
	"encoding/binary"
	"fmt"
	"io"
	"runtime/debug"

	"github.com/ptscope/ptscope/internal/hugepage"
)

// Options control decoding.
type Options struct {
	// OnDict is called after SETITEM/SETITEMS filled d (also for dicts built
	// with DICT). If it returns ok, every reference to d (the stack and the
	// memo) is replaced by v, and d's storage may be reused: the hook must
	// not keep d or its slices. Dicts that were fetched from the memo before
	// they were filled are never passed (they are shared), nor are dicts
	// of 16 keys or more that the hook declined once (so that a dict
	// filled by many SETITEMs costs linear time).
	OnDict func(d *Dict) (v Value, ok bool)
	// OnList is the same for lists after APPEND/APPENDS. Python's pickler
	// appends in batches of 1000, so a list may be passed more than once
	// unless the hook converts or declines it.
	OnList func(l *List) (v Value, ok bool)
	// OnExtend is called when APPEND/APPENDS target a handle that OnList
	// made (a long list converted after its first batch); the handle stays
	// the same. If it is nil or declines, decoding fails. items is only
	// valid during the call.
	OnExtend func(h uint64, items []Value) bool
	// MaxMemo bounds memo slot numbers (default 1<<28).
	MaxMemo int

	// Limits that keep a hostile pickle's cost bounded; zero means the
	// default. Breaking one is an *Error at the opcode, naming the limit.
	MaxString int // longest str or bytes argument (default 1 GiB)
	MaxValues int // most values on the stack, MARKs open, or items in one container (default 1<<28)
	MaxDigits int // longest text INT/LONG in digits (default 4300, Python's sys.int_max_str_digits)
	// MaxHeldPerByte bounds the decoded values the decoder holds at once
	// (containers and their items, strings, memo slots, the stack; not
	// what the hooks converted) to this many bytes per byte of input read,
	// beyond 64 MiB; 0: no bound. A value costs 16 bytes, a container 64:
	// a pickle of empty containers (1 byte each) or of memo references
	// (BINGET, 2 bytes) costs 8 to 80 times its size, which no allocator
	// snapshot does, since its hooks convert its records as they complete.
	MaxHeldPerByte int
	// LimitNote ends the message of a broken MaxString or MaxValues limit
	// (say, which flag sets it).
	LimitNote string
	// Check is called about every MiB of input with the input offset
	// reached; an error it returns stops decoding at that offset (a memory
	// budget, a deadline).
	Check func(offset int64) error
}

// Defaults of the limits.
const (
	DefaultMaxString = 1 << 30
	DefaultMaxValues = 1 << 28
	DefaultMaxDigits = 4300
)

// Costs charged to decoder.held (about what Go allocates for each).
const (
	valueCost     = 16 // a Value in a container
	containerCost = 64 // a List, Dict or Object and its allocation
	memoCost      = 24 // a memo slot and its reference
	heldSlack     = 64 << 20
)

// checkEvery is the input distance between two calls of Options.Check and
// two checks of the stack against MaxValues.
const checkEvery = 1 << 20

// Error is a decoding error at a byte offset of the (decompressed) input.
type Error struct {
	Offset int64  // offset of the opcode that failed
	Op     byte   // the opcode
	Msg    string // what was expected
}

func (e *Error) Error() string {
	name := opNames[e.Op]
	if name == "" {
		name = fmt.Sprintf("opcode 0x%02x", e.Op)
	}
	return fmt.Sprintf("offset %d: %s: %s", e.Offset, name, e.Msg)
}

// Decode reads one pickle from r and returns its value.
// Protocols 0 and 1 are offered to the hooks once decoded (offer.go).
func Decode(r io.Reader, opts Options) (Value, error) {
	d := newDecoder(r, opts)
	if d.fill(1) == nil && hooksAfter(d.buf[d.pos:], opts) {
		return d.runHooksAfter()
	}
	return d.run()
}

// DecodeBytes decodes a pickle held in memory.
func DecodeBytes(b []byte, opts Options) (Value, error) {
	d := newDecoder(nil, opts)
	d.buf = b
	d.eof = true
	if hooksAfter(b, opts) {
		return d.runHooksAfter()
	}
	return d.run()
}

// runHooksAfter decodes with no hooks, then offers the containers.
func (d *decoder) runHooksAfter() (Value, error) {
	opts := d.opts
	d.opts.OnDict, d.opts.OnList, d.opts.OnExtend = nil, nil, nil
	v, err := d.run()
	if err != nil {
		return v, err
	}
	return offerTree(v, opts), nil
}

type decoder struct {
	r    io.Reader
	buf  []byte
	pos  int
	base int64 // input offset of buf[0]
	eof  bool
	rerr error

	opts  Options
	stack []Value
	marks []int
	memo  memo
	strs  map[string]Value // interning of short strings, boxed once

	freeDicts []*Dict
	freeLists []*List

	opOff     int64
	op        byte
	nextCheck int64 // input offset of the next limit check

	// held is about the bytes of decoded values the decoder holds (the
	// containers it made and their items, strings, memo slots; less what
	// the hooks converted), for Options.MaxHeldPerByte. A memo reference
	// costs a value's 16 bytes wherever it is stored, for the 2 to 5 bytes
	// of its BINGET: this is where shared references are charged.
	held    int64
	maxHeld int64 // the most held seen at a check (tests, measurements)

	paused  bool                    // a hook asked Run to return (Decoder.Pause)
	resolve func(int) (Value, bool) // slots skipped by Decoder.Skip
	extLo   int                     // skipped slots are [extLo, extHi)
	extHi   int
}

const bufSize = 1 << 20

func newDecoder(r io.Reader, opts Options) *decoder {
	if opts.MaxMemo <= 0 {
		opts.MaxMemo = 1 << 28
	}
	if opts.MaxString <= 0 {
		opts.MaxString = DefaultMaxString
	}
	if opts.MaxValues <= 0 {
		opts.MaxValues = DefaultMaxValues
	}
	if opts.MaxDigits <= 0 {
		opts.MaxDigits = DefaultMaxDigits
	}
	d := &decoder{r: r, opts: opts, strs: make(map[string]Value, 256), nextCheck: checkEvery}
	if r != nil {
		d.buf = make([]byte, 0, bufSize)
	}
	d.stack = make([]Value, 0, 64)
	return d
}

// fill makes at least n bytes available from pos, or reports a truncation.
func (d *decoder) fill(n int) error {
	if len(d.buf)-d.pos >= n {
		return nil
	}
	if d.r == nil || d.eof {
		return d.truncated(n)
	}
	// Move the unread tail to the front and read more.
	rest := copy(d.buf[:cap(d.buf)], d.buf[d.pos:])
	d.base += int64(d.pos)
	d.pos = 0
	if n > cap(d.buf) {
		nb := make([]byte, rest, n+bufSize)
		copy(nb, d.buf[:rest])
		d.buf = nb
	}
	d.buf = d.buf[:rest]
	for len(d.buf) < n {
		k, err := d.r.Read(d.buf[len(d.buf):cap(d.buf)])
		d.buf = d.buf[:len(d.buf)+k]
		if err != nil {
			d.eof = true
			if err != io.EOF {
				d.rerr = err
			}
			break
		}
	}
	if len(d.buf) < n {
		return d.truncated(n)
	}
	return nil
}

func (d *decoder) truncated(n int) error {
	if d.rerr != nil {
		return d.errf("read error after %d bytes: %v", d.base+int64(len(d.buf)), d.rerr)
	}
	return d.errf("input ends at offset %d, %d more bytes expected", d.base+int64(len(d.buf)), n-(len(d.buf)-d.pos))
}

func (d *decoder) errf(format string, a ...any) error {
	return &Error{Offset: d.opOff, Op: d.op, Msg: fmt.Sprintf(format, a...)}
}

// limitf reports a broken limit, with the note saying where it comes from.
func (d *decoder) limitf(format string, a ...any) error {
	msg := fmt.Sprintf(format, a...)
	if d.opts.LimitNote != "" {
		msg += " (" + d.opts.LimitNote + ")"
	}
	return &Error{Offset: d.opOff, Op: d.op, Msg: msg}
}

// check runs the periodic checks: the stack and MARKs against MaxValues
// (each opcode adds at most one, so checking every MiB of input bounds
// them within a MiB of values) and the caller's Check.
func (d *decoder) check() error {
	d.nextCheck = d.opOff + checkEvery
	if n := len(d.stack); n > d.opts.MaxValues {
		return d.limitf("%d values on the stack exceed the limit of %d", n, d.opts.MaxValues)
	}
	if n := len(d.marks); n > d.opts.MaxValues {
		return d.limitf("%d open MARKs exceed the limit of %d", n, d.opts.MaxValues)
	}
	held := d.held + valueCost*int64(len(d.stack)) + 8*int64(len(d.marks))
	d.maxHeld = max(d.maxHeld, held)
	if k := d.opts.MaxHeldPerByte; k > 0 && held > heldSlack+int64(k)*d.opOff {
		return d.errf("decoded values take %d MiB for %d MiB of input, more than %d bytes a byte (a pickle of empty containers or repeated references, not a record per object)",
			held>>20, d.opOff>>20, k)
	}
	if d.opts.Check != nil {
		if err := d.opts.Check(d.opOff); err != nil {
			return &Error{Offset: d.opOff, Op: d.op, Msg: err.Error()}
		}
	}
	return nil
}

// take returns the next n bytes; the slice is valid until the next read.
func (d *decoder) take(n int) ([]byte, error) {
	if n < 0 {
		return nil, d.errf("negative length %d", n)
	}
	if n > d.opts.MaxString {
		return nil, d.limitf("argument of %d bytes exceeds the limit of %d bytes", n, d.opts.MaxString)
	}
	if d.r == nil && n > len(d.buf)-d.pos {
		return nil, d.truncated(n) // in memory: the length lies, say so before reading
	}
	if n > bufSize {
		return d.takeLarge(n)
	}
	if err := d.fill(n); err != nil {
		return nil, err
	}
	b := d.buf[d.pos : d.pos+n]
	d.pos += n
	return b, nil
}

// takeLarge reads a long string in chunks, so a length field that lies costs
// no more memory than the input that is really there.
func (d *decoder) takeLarge(n int) ([]byte, error) {
	out := make([]byte, 0, bufSize)
	for len(out) < n {
		want := min(n-len(out), bufSize)
		if err := d.fill(want); err != nil {
			return nil, err
		}
		out = append(out, d.buf[d.pos:d.pos+want]...)
		d.pos += want
	}
	return out, nil
}

func (d *decoder) line() ([]byte, error) {
	for i := 0; ; i++ {
		if i > 1<<20 { // wherever the input's end lies, as the Scanner does
			return nil, d.errf("line longer than 1 MiB")
		}
		if d.pos+i >= len(d.buf) {
			if err := d.fill(i + 1); err != nil {
				return nil, d.errf("expected a newline-terminated argument")
			}
		}
		if d.buf[d.pos+i] == '\n' {
			b := d.buf[d.pos : d.pos+i]
			d.pos += i + 1
			return b, nil
		}
	}
}

func (d *decoder) push(v Value) {
	if len(d.stack) == cap(d.stack) {
		d.stack = grow(d.stack)
		collectIfBig(cap(d.stack))
	}
	d.stack = append(d.stack, v)
}

func (d *decoder) mark() {
	if len(d.marks) == cap(d.marks) {
		d.marks = grow(d.marks)
		collectIfBig(cap(d.marks))
	}
	d.marks = append(d.marks, len(d.stack))
}

// grow returns a copy of s with twice the capacity.
func grow[T any](s []T) []T {
	ns := hugepage.MakeCap[T](len(s), max(2*cap(s), 64))
	copy(ns, s)
	return ns
}

// collectIfBig gives the array a growth to n elements left behind back to
// the system, when it was large. Only hostile pickles grow the stack past a
// batch (Python's pickler puts at most 1000 items on it at once); the
// arrays of every earlier doubling would otherwise stay in the process
// (at GOGC=400, or freed but not returned), and a stack of N values would
// cost several times its 16N bytes.
func collectIfBig(n int) {
	if n >= 4<<20 {
		debug.FreeOSMemory()
	}
}

func (d *decoder) pop() (Value, error) {
	n := len(d.stack)
	if n == 0 || (len(d.marks) > 0 && d.marks[len(d.marks)-1] == n) {
		return Value{}, d.errf("stack underflow")
	}
	v := d.stack[n-1]
	d.stack = d.stack[:n-1]
	return v, nil
}

func (d *decoder) top() (*Value, error) {
	n := len(d.stack)
	if n == 0 || (len(d.marks) > 0 && d.marks[len(d.marks)-1] == n) {
		return nil, d.errf("stack underflow")
	}
	return &d.stack[n-1], nil
}

// popMark returns the items above the last MARK and removes them and the mark.
// The returned slice aliases the stack until the next push.
func (d *decoder) popMark() ([]Value, error) {
	if len(d.marks) == 0 {
		return nil, d.errf("no MARK on the stack")
	}
	m := d.marks[len(d.marks)-1]
	d.marks = d.marks[:len(d.marks)-1]
	items := d.stack[m:]
	d.stack = d.stack[:m]
	return items, nil
}

// str makes a string value. Short strings are interned with their interface
// box, so repeated keys and values cost no allocation at all.
func (d *decoder) str(b []byte) Value {
	if len(b) <= 64 {
		if v, ok := d.strs[string(b)]; ok {
			return v
		}
		s := string(b)
		v := strValue(s, 0)
		if len(d.strs) < 1<<16 {
			v = strValue(s, d.memo.permanent(v)) // memoizing it later costs one word
			d.strs[s] = v
		}
		return v
	}
	d.held += int64(len(b))
	return strValue(string(b), 0)
}

func (d *decoder) newDict() *Dict {
	if n := len(d.freeDicts); n > 0 {
		x := d.freeDicts[n-1]
		d.freeDicts = d.freeDicts[:n-1]
		return x
	}
	return &Dict{memo: -1}
}

func (d *decoder) newList() *List {
	if n := len(d.freeLists); n > 0 {
		x := d.freeLists[n-1]
		d.freeLists = d.freeLists[:n-1]
		return x
	}
	return &List{memo: -1}
}

func (d *decoder) memoPut(i int, v Value) error {
	if i < 0 || i >= d.opts.MaxMemo {
		return d.errf("memo index %d out of range", i)
	}
	// Picklers number memo slots densely, one per stored object, so a slot
	// number can never exceed the bytes read so far: this bounds the memo by
	// the input size whatever the file claims.
	if i >= d.memo.n && int64(i) > d.opOff+1024 {
		return d.errf("memo index %d jumps far past the %d slots in use", i, d.memo.n)
	}
	// Track the slot of containers so hooks can replace them there too.
	switch v.Kind() {
	case KindList, KindTuple, KindSet:
		l := v.list()
		if l.memo >= 0 && int(l.memo) != i {
			l.flags |= flagMultiMemo
		}
		l.memo = int32(i)
	case KindDict:
		x := v.dict()
		if x.memo >= 0 && int(x.memo) != i {
			x.flags |= flagMultiMemo
		}
		x.memo = int32(i)
	}
	d.held += memoCost
	d.memo.set(i, v)
	return nil
}

func (d *decoder) memoGet(i int) error {
	if i < 0 || i >= d.memo.n {
		return d.errf("memo index %d was never stored", i)
	}
	v, ok := d.memo.get(i)
	if !ok && d.resolve != nil && i >= d.extLo && i < d.extHi {
		v, ok = d.resolve(i)
	}
	if !ok {
		return d.errf("memo index %d was never stored", i)
	}
	markShared(v)
	d.push(v)
	return nil
}

// declineAt is the size from which a container a hook declined is not
// offered again: a hook looks at every item, so offering a container after
// each of many SETITEM or APPEND opcodes would cost quadratic time.
// Python's pickler fills containers in batches of 1000, so a container is
// offered once per batch anyway.
const declineAt = 16

// finishDict offers the dict on top of the stack to the hook.
func (d *decoder) finishDict(x *Dict) {
	if d.opts.OnDict == nil || x.flags != 0 {
		return
	}
	v, ok := d.opts.OnDict(x)
	if !ok {
		if len(x.Keys) >= declineAt {
			x.flags |= flagDeclined
		}
		return
	}
	d.stack[len(d.stack)-1] = v
	if x.memo >= 0 {
		d.memo.set(int(x.memo), v)
	}
	d.held -= containerCost + 2*valueCost*int64(len(x.Keys))
	clear(x.Keys)
	clear(x.Vals)
	x.Keys, x.Vals, x.memo = x.Keys[:0], x.Vals[:0], -1
	d.freeDicts = append(d.freeDicts, x)
}

func (d *decoder) finishList(l *List) {
	if d.opts.OnList == nil || l.flags != 0 {
		return
	}
	v, ok := d.opts.OnList(l)
	if !ok {
		if len(l.Items) >= declineAt {
			l.flags |= flagDeclined
		}
		return
	}
	d.stack[len(d.stack)-1] = v
	if l.memo >= 0 {
		d.memo.set(int(l.memo), v)
	}
	d.held -= containerCost + valueCost*int64(len(l.Items))
	clear(l.Items)
	l.Items, l.memo = l.Items[:0], -1
	d.freeLists = append(d.freeLists, l)
}

func (d *decoder) run() (Value, error) {
	for {
		if len(d.buf)-d.pos < 16 {
			if d.pos >= len(d.buf) {
				if err := d.fill(1); err != nil {
					if d.base+int64(d.pos) == 0 {
						return Value{}, &Error{Msg: "empty input, expected a pickle"}
					}
					d.opOff = d.base + int64(d.pos)
					d.op = 0
					return Value{}, d.errf("input ends before STOP")
				}
			}
			if !d.eof {
				_ = d.fill(16) // best effort; the ops check what they need
			}
		}
		d.opOff = d.base + int64(d.pos)
		if d.opOff >= d.nextCheck {
			if err := d.check(); err != nil {
				return Value{}, err
			}
		}
		op := d.buf[d.pos]
		d.op = op
		d.pos++
		// Fast paths for the opcodes that make up nearly all of a snapshot,
		// taken when the whole argument is in the buffer.
		if len(d.buf)-d.pos >= 9 {
			b := d.buf[d.pos:]
			switch op {
			case opBinget:
				if v, ok := d.memo.get(int(b[0])); ok {
					d.pos++
					markShared(v)
					d.push(v)
					continue
				}
			case opLongBinget:
				if v, ok := d.memo.get(int(binary.LittleEndian.Uint32(b))); ok {
					d.pos += 4
					markShared(v)
					d.push(v)
					continue
				}
			case opMark:
				d.mark()
				continue
			case opBinint1:
				d.pos++
				d.push(scalar(KindInt, uint64(b[0])))
				continue
			case opBinint:
				d.pos += 4
				d.push(scalar(KindInt, uint64(int64(int32(binary.LittleEndian.Uint32(b))))))
				continue
			case opLong1:
				if n := int(b[0]); n <= 8 {
					d.pos += 1 + n
					d.push(decodeLong(b[1 : 1+n]))
					continue
				}
			case opShortBinunicode:
				if n := int(b[0]); len(b) > n {
					d.pos += 1 + n
					d.push(d.str(b[1 : 1+n]))
					continue
				}
			case opEmptyDict:
				d.held += containerCost
				d.push(dictValue(d.newDict()))
				continue
			case opEmptyList:
				d.held += containerCost
				d.push(listValue(KindList, d.newList()))
				continue
			}
		}
		done, err := d.step(op)
		if err != nil {
			return Value{}, err
		}
		if d.paused && !done {
			return Value{}, errPaused
		}
		if done {
			v, err := d.pop()
			if err != nil {
				return Value{}, err
			}
			return v, nil
		}
	}
}
