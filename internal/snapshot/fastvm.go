package snapshot

import (
	"encoding/binary"
	"errors"

	"github.com/ptscope/ptscope/internal/spillmem"
)

// The parallel reader's worker: a small pickle VM that only knows the shapes
// a device trace is made of (entry dicts, frame dicts, frames lists, strings,
// ints) and fails on anything else, so that the caller falls back to the
// general decoder. It decodes one stretch of the trace, from the start of an
// entry to the start of the entry where the next stretch begins, and keeps
// what it finds in local tables the merge maps to global ids.

var errShape = errors.New("trace stretch: shape not handled by the parallel reader")

// Kinds of worker values.
const (
	wNone      = iota
	wInt       // ints and bools
	wStr       // a string in the input
	wPStr      // a string of the prefix table
	wLStr      // a string of the worker table
	wExt       // memo slot n, defined before this stretch and after the prefix
	wFrame     // local frame n
	wGFrame    // global frame n
	wStack     // local stack n
	wGStack    // global stack n
	wEntry     // local row n
	wEmptyList // a list that never got items
	wDict      // dict under construction: dicts[n]
	wList      // list under construction: lists[n]
	wOther     // anything else: fails wherever it matters
)

// wv is a worker value, free of pointers so that the memo costs the
// garbage collector nothing. Strings are wStr (n = offset<<24 | length in
// the input), wPStr (n indexes parEnv.preStr) or wLStr (n indexes
// worker.lstr); f caches their field code plus one.
type wv struct {
	k uint8
	f uint8
	n uint64
}

type wdict struct {
	kv     []wv // key, value, key, value...
	slot   int  // memo slot, -1 if none
	shared bool
}

type wlist struct {
	items  []wv
	slot   int
	shared bool
}

// stackRef items: the top 2 bits say what the low 30 bits are.
const (
	refLocal  = 0 << 30 // local frame
	refGlobal = 1 << 30 // global frame
	refExt    = 2 << 30 // memo slot of a frame from an earlier stretch
	refMask   = 3 << 30
	refMax    = 1 << 30
)

type patch struct {
	row  int
	slot int
}

// worker decodes one stretch.
type worker struct {
	data   []byte
	frames []frameSpan // the frame chain, to skip FRAME headers
	fi     int         // index of the frame holding pos
	hi     int         // its end
	env    *parEnv

	memo   []wv // slots base, base+1, ...
	pre    []wv // parEnv.pre, parEnv.preOK
	preOK  []bool
	preStr []string // parEnv.preStr when the stretch began
	lstr   []string
	base   int
	stack  []wv
	marks  []int
	dicts  []wdict
	lists  []wlist
	freeD  []int
	freeL  []int

	// Output.
	t          Trace
	frameTab   []Frame
	frameIDs   map[Frame]uint32
	stackTab   [][]uint32
	stackIDs   map[string]uint32
	strTab     []string
	strIDs     map[string]uint32
	streamTab  []int64
	streamIDs  map[int64]uint32
	actPatch   []patch
	stackPatch []patch
	key        []byte

	slow    int // entries the fast path left to the VM
	umVal   wv  // fastEntry's cache of the last prefix user_metadata
	umID    uint32
	dropped int  // pages before this offset were dropped
	stop    int  // offset where decoding stopped
	end     bool // stopped at the end of the trace list (not at the limit)
	lastSep int  // local row after the last APPENDS MARK separator, -1 if none
	err     error
}

type frameSpan struct{ lo, hi int } // payload [lo, hi)

func newWorker(env *parEnv, base int) *worker {
	w := &worker{data: env.data, frames: env.frames, env: env, base: base,
		frameIDs: map[Frame]uint32{}, stackIDs: map[string]uint32{}, strIDs: map[string]uint32{},
		streamIDs: map[int64]uint32{}, lastSep: -1}
	w.stack = make([]wv, 0, 64)
	w.pre, w.preOK, w.preStr = env.pre, env.preOK, env.preStr
	return w
}

// prealloc sizes the memo and points the worker's columns at rows
// [off, off+rows) of the builder's spare capacity (see Trace.window).
func (w *worker) prealloc(memo int, dst *Trace, off, rows int) {
	w.memo = spillmem.MakeCap[wv](w.env.arena, 0, memo)
	w.t.window(dst, off, rows)
}

// at moves pos past any FRAME header that starts there.
func (w *worker) at(pos int) int {
	if pos < w.hi {
		return pos
	}
	for w.fi < len(w.frames) && pos >= w.frames[w.fi].hi {
		if pos != w.frames[w.fi].hi {
			return -1
		}
		w.fi++
		if w.fi < len(w.frames) {
			pos = w.frames[w.fi].lo
		}
		if w.env.cancelled() {
			return -1 // the general decoder takes over, and stops at its Check
		}
	}
	w.hi = 0
	if w.fi < len(w.frames) {
		w.hi = w.frames[w.fi].hi
	}
	return pos
}

// setFrame says which frame holds the next opcode.
func (w *worker) setFrame(fi int) {
	w.fi = fi
	w.hi = w.frames[fi].hi
}

func (w *worker) fail() { w.err = errShape }

// run decodes entries from pos until the entry that starts at limit (or the
// end of the trace list when limit < 0 or the list ends first).
func (w *worker) run(pos, limit int) {
	data := w.data
	w.dropped = pos
	for w.err == nil {
		pos = w.at(pos)
		if pos < 0 || pos >= len(data) {
			w.fail()
			return
		}
		top := len(w.stack) == 0 && len(w.marks) == 0
		if w.fi >= len(w.frames) {
			// Past the frame chain: stop if between entries.
			if top {
				w.stop, w.end = pos, true
			} else {
				w.fail()
			}
			return
		}
		if top {
			// Top level: between entries.
			switch data[pos] {
			case '}':
				if limit >= 0 && pos >= limit {
					w.stop = pos
					return
				}
				if (w.env.mapped || w.env.arena != nil) && pos-w.dropped >= 4<<20 {
					if w.env.mapped {
						dropPages(w.data, w.dropped, pos)
					}
					w.dropped = pos
					w.env.arena.Poll()
				}
				if q := w.fastEntry(pos); q >= 0 {
					pos = q
					continue
				}
				w.slow++
			case 'e':
				q := w.at(pos + 1)
				if q > 0 && q < len(data) && data[q] == '(' {
					w.lastSep = len(w.t.Action)
					pos = q + 1
					continue
				}
				w.stop, w.end = pos, true
				return
			default:
				w.stop, w.end = pos, true
				return
			}
		}
		pos = w.op(pos)
		if pos < 0 {
			w.fail()
			return
		}
		if len(w.stack) == 1 && len(w.marks) == 0 {
			if w.stack[0].k != wEntry {
				if w.stack[0].k != wDict {
					w.fail()
					return
				}
				continue // entry dict before its SETITEMS
			}
			w.stack = w.stack[:0]
		}
	}
}

func (w *worker) push(v wv) { w.stack = append(w.stack, v) }

// op executes the opcode at pos and returns the next position, -1 on failure.
func (w *worker) op(pos int) int {
	data := w.data
	end := w.hi
	op := data[pos]
	pos++
	switch op {
	case '}':
		w.push(wv{k: wDict, n: uint64(w.newDict())})
	case ']':
		w.push(wv{k: wList, n: uint64(w.newList())})
	case 0x94: // MEMOIZE
		if len(w.stack) == 0 || (len(w.marks) > 0 && w.marks[len(w.marks)-1] == len(w.stack)) {
			return -1
		}
		v := w.stack[len(w.stack)-1]
		slot := w.base + len(w.memo)
		switch v.k {
		case wDict:
			d := &w.dicts[v.n]
			if d.slot >= 0 {
				return -1
			}
			d.slot = slot
		case wList:
			l := &w.lists[v.n]
			if l.slot >= 0 {
				return -1
			}
			l.slot = slot
		}
		w.memo = append(w.memo, v)
	case '(':
		w.marks = append(w.marks, len(w.stack))
	case 'h', 'j':
		var i int
		if op == 'h' {
			if pos+1 > end {
				return -1
			}
			i = int(data[pos])
			pos++
		} else {
			if pos+4 > end {
				return -1
			}
			i = int(binary.LittleEndian.Uint32(data[pos:]))
			pos += 4
		}
		v, ok := w.get(i)
		if !ok {
			return -1
		}
		w.push(v)
	case 0x8c, 'X': // SHORT_BINUNICODE, BINUNICODE
		var n int
		if op == 0x8c {
			if pos+1 > end {
				return -1
			}
			n = int(data[pos])
			pos++
		} else {
			if pos+4 > end {
				return -1
			}
			n = int(binary.LittleEndian.Uint32(data[pos:]))
			pos += 4
		}
		if n > end-pos {
			return -1
		}
		if n >= 1<<24 {
			return -1
		}
		w.push(wv{k: wStr, n: uint64(pos)<<24 | uint64(n)})
		pos += n
	case 'K':
		if pos+1 > end {
			return -1
		}
		w.push(wv{k: wInt, n: uint64(data[pos])})
		pos++
	case 'M':
		if pos+2 > end {
			return -1
		}
		w.push(wv{k: wInt, n: uint64(binary.LittleEndian.Uint16(data[pos:]))})
		pos += 2
	case 'J':
		if pos+4 > end {
			return -1
		}
		w.push(wv{k: wInt, n: uint64(int64(int32(binary.LittleEndian.Uint32(data[pos:]))))})
		pos += 4
	case 0x8a: // LONG1
		if pos+1 > end {
			return -1
		}
		n := int(data[pos])
		pos++
		if n > 8 || n > end-pos {
			return -1
		}
		var u uint64
		for i := n - 1; i >= 0; i-- {
			u = u<<8 | uint64(data[pos+i])
		}
		if n > 0 && n < 8 && data[pos+n-1]&0x80 != 0 {
			u |= ^uint64(0) << (8 * n)
		}
		pos += n
		w.push(wv{k: wInt, n: u})
	case 'N':
		w.push(wv{k: wNone})
	case 0x88:
		w.push(wv{k: wInt, n: 1})
	case 0x89:
		w.push(wv{k: wInt, n: 0})
	case 'G':
		if pos+8 > end {
			return -1
		}
		pos += 8
		w.push(wv{k: wOther})
	case 'u': // SETITEMS
		if len(w.marks) == 0 {
			return -1
		}
		m := w.marks[len(w.marks)-1]
		w.marks = w.marks[:len(w.marks)-1]
		if m == 0 || (len(w.marks) > 0 && w.marks[len(w.marks)-1] == m) || (len(w.stack)-m)%2 != 0 {
			return -1
		}
		t := w.stack[m-1]
		if t.k != wDict {
			return -1
		}
		d := &w.dicts[t.n]
		for _, v := range w.stack[m:] {
			d.kv = append(d.kv, w.seal(v))
		}
		w.stack = w.stack[:m]
		if !w.finishDict(m - 1) {
			return -1
		}
	case 's': // SETITEM
		n := len(w.stack)
		if n < 3 || (len(w.marks) > 0 && w.marks[len(w.marks)-1] > n-3) {
			return -1
		}
		t := w.stack[n-3]
		if t.k != wDict {
			return -1
		}
		d := &w.dicts[t.n]
		d.kv = append(d.kv, w.seal(w.stack[n-2]), w.seal(w.stack[n-1]))
		w.stack = w.stack[:n-2]
		if !w.finishDict(n - 3) {
			return -1
		}
	case 'e': // APPENDS
		if len(w.marks) == 0 {
			return -1
		}
		m := w.marks[len(w.marks)-1]
		w.marks = w.marks[:len(w.marks)-1]
		if m == 0 || (len(w.marks) > 0 && w.marks[len(w.marks)-1] == m) {
			return -1
		}
		t := w.stack[m-1]
		if t.k != wList {
			return -1
		}
		l := &w.lists[t.n]
		for _, v := range w.stack[m:] {
			l.items = append(l.items, w.seal(v))
		}
		w.stack = w.stack[:m]
		if !w.finishList(m - 1) {
			return -1
		}
	case 'a': // APPEND
		n := len(w.stack)
		if n < 2 || (len(w.marks) > 0 && w.marks[len(w.marks)-1] > n-2) {
			return -1
		}
		t := w.stack[n-2]
		if t.k != wList {
			return -1
		}
		l := &w.lists[t.n]
		l.items = append(l.items, w.seal(w.stack[n-1]))
		w.stack = w.stack[:n-1]
		if !w.finishList(n - 2) {
			return -1
		}
	default:
		return -1
	}
	if pos > end {
		return -1
	}
	return pos
}

// get fetches a memo slot: from this stretch, from an earlier one (an
// unresolved reference) or from what the sequential decoder holds.
func (w *worker) get(i int) (wv, bool) {
	if i >= w.base {
		if i-w.base >= len(w.memo) {
			return wv{}, false
		}
		v := w.memo[i-w.base]
		switch v.k {
		case wDict:
			w.dicts[v.n].shared = true
		case wList:
			w.lists[v.n].shared = true
		}
		return v, true
	}
	if i >= w.env.prefixLen {
		return wv{k: wExt, n: uint64(i)}, true
	}
	if i < len(w.pre) {
		return w.pre[i], w.preOK[i]
	}
	return w.env.prefix(w, i)
}

// seal turns a container leaving the stack into a plain value.
func (w *worker) seal(v wv) wv {
	switch v.k {
	case wDict:
		d := &w.dicts[v.n]
		out := wv{k: wOther}
		if d.slot >= 0 {
			w.memo[d.slot-w.base] = out
		}
		w.freeDict(int(v.n))
		return out
	case wList:
		l := &w.lists[v.n]
		out := wv{k: wOther}
		if len(l.items) == 0 && !l.shared {
			out = wv{k: wEmptyList}
		}
		if l.slot >= 0 {
			w.memo[l.slot-w.base] = out
		}
		w.freeList(int(v.n))
		return out
	}
	return v
}

func (w *worker) newDict() int {
	if n := len(w.freeD); n > 0 {
		i := w.freeD[n-1]
		w.freeD = w.freeD[:n-1]
		return i
	}
	w.dicts = append(w.dicts, wdict{slot: -1})
	return len(w.dicts) - 1
}

func (w *worker) freeDict(i int) {
	d := &w.dicts[i]
	d.kv, d.slot, d.shared = d.kv[:0], -1, false
	w.freeD = append(w.freeD, i)
}

func (w *worker) newList() int {
	if n := len(w.freeL); n > 0 {
		i := w.freeL[n-1]
		w.freeL = w.freeL[:n-1]
		return i
	}
	w.lists = append(w.lists, wlist{slot: -1})
	return len(w.lists) - 1
}

func (w *worker) freeList(i int) {
	l := &w.lists[i]
	l.items, l.slot, l.shared = l.items[:0], -1, false
	w.freeL = append(w.freeL, i)
}
