package snapshot

import (
	"encoding/binary"
	"errors"
	"unsafe"
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

	memo  []wv // slots base, base+1, ...
	pre   []wv // parEnv.pre, parEnv.preOK
	preOK []bool
	lstr  []string
	base  int
	stack []wv
	marks []int
	dicts []wdict
	lists []wlist
	freeD []int
	freeL []int

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
	w.pre, w.preOK = env.pre, env.preOK
	return w
}

func (w *worker) prealloc(memo, rows int) {
	w.memo = make([]wv, 0, memo)
	w.t.growTo(rows)
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
				if w.env.mapped && pos-w.dropped >= 4<<20 {
					dropPages(w.data, w.dropped, pos)
					w.dropped = pos
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

// replace puts the converted value of the container at stack[at] on the
// stack and in its memo slot.
func (w *worker) replace(at, slot int, v wv) {
	w.stack[at] = v
	if slot >= 0 {
		w.memo[slot-w.base] = v
	}
}

// finishDict converts a dict as builder.onDict does: entries (only at the
// top level), frames; other dicts stay dicts.
func (w *worker) finishDict(at int) bool {
	i := int(w.stack[at].n)
	d := &w.dicts[i]
	if d.shared {
		return false
	}
	m := 0
	for j := 0; j < len(d.kv); j += 2 {
		k := &d.kv[j]
		if !w.isStr(*k) {
			return false
		}
		if k.f == 0 {
			k.f = fieldOf(w.sval(*k)) + 1
		}
		m |= fieldBits[k.f-1]
	}
	if at == 0 && m&kAction == 0 {
		return false // the trace list holds only entries
	}
	switch {
	case m&kAction != 0:
		if at != 0 || len(w.marks) != 0 {
			return false
		}
		row, ok := w.entry(d.kv)
		if !ok {
			return false
		}
		slot := d.slot
		w.freeDict(i)
		w.replace(at, slot, wv{k: wEntry, n: uint64(row)})
	case m&(kFilename|kLine|kName) == kFilename|kLine|kName && m&(kAction|kState|kSize|kBlocks) == 0:
		id, ok := w.frame(d.kv)
		if !ok {
			return false
		}
		slot := d.slot
		w.freeDict(i)
		w.replace(at, slot, wv{k: wFrame, n: uint64(id)})
	case m&(kState|kSize) == kState|kSize && m&kBlocks == 0:
		return false // a block
	}
	return true
}

// finishList converts a list of frames into a stack as builder.onList does.
func (w *worker) finishList(at int) bool {
	i := int(w.stack[at].n)
	l := &w.lists[i]
	if l.shared || len(l.items) >= 1000 || len(l.items) == 0 {
		return false
	}
	w.key = w.key[:0]
	for _, it := range l.items {
		var r uint32
		switch it.k {
		case wFrame:
			r = refLocal | uint32(it.n)
		case wGFrame:
			if it.n >= refMax {
				return false
			}
			r = refGlobal | uint32(it.n)
		case wExt:
			if it.n >= refMax {
				return false
			}
			r = refExt | uint32(it.n)
		default:
			return false
		}
		w.key = binary.LittleEndian.AppendUint32(w.key, r)
	}
	id, ok := w.stackIDs[string(w.key)]
	if !ok {
		id = uint32(len(w.stackTab))
		refs := make([]uint32, len(l.items))
		for j := range refs {
			refs[j] = binary.LittleEndian.Uint32(w.key[4*j:])
		}
		w.stackTab = append(w.stackTab, refs)
		w.stackIDs[string(w.key)] = id
	}
	slot := l.slot
	w.freeList(i)
	w.replace(at, slot, wv{k: wStack, n: uint64(id)})
	return true
}

func (w *worker) isStr(v wv) bool { return v.k == wStr || v.k == wPStr || v.k == wLStr }

// sval is the content of a string value; for wStr it aliases the input.
func (w *worker) sval(v wv) string {
	switch v.k {
	case wStr:
		n := int(v.n & (1<<24 - 1))
		if n == 0 {
			return ""
		}
		return unsafe.String(&w.data[v.n>>24], n)
	case wPStr:
		return w.env.preStr[v.n]
	case wLStr:
		return w.lstr[v.n]
	}
	return ""
}

func (w *worker) strOf(v wv) (string, bool) {
	switch v.k {
	case wStr, wPStr, wLStr:
		return w.sval(v), true
	case wInt, wNone, wEmptyList:
		return "", true
	}
	return "", false
}

func intOf(v wv) (uint64, bool) {
	switch v.k {
	case wInt:
		return v.n, true
	case wNone, wStr, wPStr, wLStr, wEmptyList:
		return 0, true
	}
	return 0, false
}

func (w *worker) frame(kv []wv) (uint32, bool) {
	var f Frame
	for j := 0; j < len(kv); j += 2 {
		v := kv[j+1]
		var ok bool
		switch kv[j].f - 1 {
		case fFilename:
			f.Filename, ok = w.strOf(v)
		case fName:
			f.Name, ok = w.strOf(v)
		case fLine:
			var n uint64
			n, ok = intOf(v)
			f.Line = int(n)
		default:
			ok = v.k != wDict && v.k != wList
		}
		if !ok {
			return 0, false
		}
	}
	if id, ok := w.frameIDs[f]; ok {
		return id, true
	}
	id := uint32(len(w.frameTab))
	w.frameTab = append(w.frameTab, f)
	w.frameIDs[f] = id
	return id, true
}

func (w *worker) str(s string) uint32 {
	if id, ok := w.strIDs[s]; ok {
		return id
	}
	id := uint32(len(w.strTab))
	w.strTab = append(w.strTab, s)
	w.strIDs[s] = id
	return id
}

// Local string and stack ids are stored plus one, 0 meaning none, until the
// merge maps them.
func (w *worker) entry(kv []wv) (int, bool) {
	var (
		action         Action
		addr           uint64
		size, timeUS   int64
		stream, cc, um uint32
		stack          uint32
		actSlot        = -1
		stackSlot      = -1
	)
	t := &w.t
	for j := 0; j < len(kv); j += 2 {
		v := kv[j+1]
		switch kv[j].f - 1 {
		case fAction:
			actSlot = -1
			switch v.k {
			case wStr, wPStr, wLStr:
				action = ParseAction(w.sval(v))
			case wExt:
				actSlot = int(v.n)
			case wInt, wNone, wEmptyList:
				action = ActionUnknown
			default:
				return 0, false
			}
		case fAddr:
			n, ok := intOf(v)
			if !ok {
				return 0, false
			}
			addr = n
		case fSize:
			n, ok := intOf(v)
			if !ok {
				return 0, false
			}
			size = int64(n)
		case fStream:
			n, ok := intOf(v)
			if !ok {
				return 0, false
			}
			id, ok := w.streamIDs[int64(n)]
			if !ok {
				id = uint32(len(w.streamTab))
				w.streamTab = append(w.streamTab, int64(n))
				w.streamIDs[int64(n)] = id
			}
			stream = id
		case fTime:
			n, ok := intOf(v)
			if !ok {
				return 0, false
			}
			timeUS = int64(n)
			t.HasTime = true
		case fFrames:
			stackSlot = -1
			switch v.k {
			case wStack:
				stack = uint32(v.n) + 1
			case wGStack:
				stack = uint32(v.n) | 1<<31
			case wExt:
				stackSlot = int(v.n)
			case wEmptyList, wInt, wNone, wStr, wPStr, wLStr:
				stack = 0
			default:
				return 0, false
			}
		case fCC:
			s, ok := w.strOf(v)
			if !ok {
				return 0, false
			}
			cc = 0
			if s != "N/A" {
				cc = w.str(s) + 1
			}
		case fUM:
			s, ok := w.strOf(v)
			if !ok {
				return 0, false
			}
			um = w.str(s) + 1
		default:
			if v.k == wDict || v.k == wList {
				return 0, false
			}
		}
	}
	row := len(t.Action)
	if row == cap(t.Action) {
		t.grow()
	}
	if actSlot >= 0 {
		w.actPatch = append(w.actPatch, patch{row, actSlot})
	}
	if stackSlot >= 0 {
		w.stackPatch = append(w.stackPatch, patch{row, stackSlot})
	}
	t.Action = append(t.Action, action)
	t.Addr = append(t.Addr, addr)
	t.Size = append(t.Size, size)
	t.Stream = append(t.Stream, stream)
	t.TimeUS = append(t.TimeUS, timeUS)
	t.Stack = append(t.Stack, stack)
	t.CompileContext = append(t.CompileContext, cc)
	t.UserMetadata = append(t.UserMetadata, um)
	return row, true
}

// Field codes of the keys the reader looks at.
const (
	fOther = iota
	fAction
	fAddr
	fSize
	fStream
	fTime
	fFrames
	fCC
	fUM
	fFilename
	fName
	fLine
	fState
	fBlocks
)

var fieldBits = [...]int{fOther: kOther, fAction: kAction, fAddr: kOther, fSize: kSize, fStream: kOther, fTime: kOther,
	fFrames: kOther, fCC: kOther, fUM: kOther, fFilename: kFilename, fName: kName, fLine: kLine, fState: kState, fBlocks: kBlocks}

func fieldOf(s string) uint8 {
	switch s {
	case "action":
		return fAction
	case "addr", "device_free":
		return fAddr
	case "size":
		return fSize
	case "stream":
		return fStream
	case "time_us":
		return fTime
	case "frames":
		return fFrames
	case "compile_context":
		return fCC
	case "user_metadata":
		return fUM
	case "filename":
		return fFilename
	case "name":
		return fName
	case "line":
		return fLine
	case "state":
		return fState
	case "blocks":
		return fBlocks
	}
	return fOther
}
