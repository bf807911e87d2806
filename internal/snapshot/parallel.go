package snapshot

import (
	"encoding/binary"
	"errors"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/ptscope/ptscope/internal/pickle"
)

// The parallel reader. Python's pickler (protocol 4 and 5) cuts its output
// into FRAMEs of about 64 KiB at opcode boundaries, so the frame chain splits
// the file into stretches that can be scanned on their own. The general
// decoder runs until the first batch of a device's trace list is complete
// (the memo then knows the keys and the frames seen so far); the rest of the
// list is cut into chunks at frame boundaries, a first parallel pass counts
// each chunk's MEMOIZEs (so every chunk knows its first memo slot) and finds
// its first entry, and a second parallel pass decodes the entries of each
// stretch with a small VM (fastvm.go). The merge maps local frames, stacks,
// strings and streams to global ids in file order, resolves references to
// memo slots of earlier stretches, and hands the decoder the state it would
// have reached (memo slots on demand, the open APPENDS batch). Anything the
// fast path does not handle, or any inconsistency between the stretches,
// leaves the decoder where it was: it then decodes the list itself. The
// results are the sequential reader's, bit for bit.

// minRegion is the smallest rest of a trace list worth splitting.
const minRegion = 1 << 20

type parEnv struct {
	data      []byte
	frames    []frameSpan
	dec       *pickle.Decoder
	prefixLen int
	pre       []wv
	preOK     []bool
	action    []bool // prefix slot holds the string "action"
	preStr    []string
	vmResolve func(int) (pickle.Value, bool)
	minRegion int  // smallest rest of a list worth splitting (bytes)
	mapped    bool // data is a file mapping: drop decoded pages
	regions   int  // lists decoded in parallel (for tests)
	stretches int  // stretches merged (for tests)
	slow      int  // entries not on the fast path (for tests)
	patches   int  // references resolved at the merge (for tests)
}

func (e *parEnv) prefix(w *worker, i int) (wv, bool) {
	if i < len(e.pre) {
		return e.pre[i], e.preOK[i]
	}
	v, ok := e.dec.Memo(i)
	if !ok {
		return wv{}, false
	}
	return fromValue(v, func(s string) wv {
		w.lstr = append(w.lstr, s)
		return wv{k: wLStr, f: fieldOf(s) + 1, n: uint64(len(w.lstr) - 1)}
	}), true
}

func fromValue(v pickle.Value, str func(string) wv) wv {
	switch v.Kind() {
	case pickle.KindNone:
		return wv{k: wNone}
	case pickle.KindBool, pickle.KindInt:
		n, _ := v.Int()
		return wv{k: wInt, n: uint64(n)}
	case pickle.KindString:
		s, _ := v.Str()
		return str(s)
	case pickle.KindHandle:
		h, _ := v.Handle()
		switch h & hMask {
		case hFrame:
			return wv{k: wGFrame, n: h &^ hMask}
		case hStack:
			return wv{k: wGStack, n: h &^ hMask}
		}
	case pickle.KindList:
		if len(v.List().Items) == 0 {
			return wv{k: wEmptyList} // appending to it fails in the worker
		}
	}
	return wv{k: wOther}
}

// frameChain returns the payloads of the FRAMEs that follow PROTO back to back.
func frameChain(data []byte) []frameSpan {
	var out []frameSpan
	pos := 2
	for pos+9 <= len(data) && data[pos] == 0x95 {
		n := binary.LittleEndian.Uint64(data[pos+1:])
		lo := pos + 9
		if n > uint64(len(data)-lo) {
			break
		}
		out = append(out, frameSpan{lo, lo + int(n)})
		pos = lo + int(n)
	}
	return out
}

// readPickleParallel decodes an in-memory pickle with up to workers
// goroutines for the trace lists.
// readPickleParallelEnv decodes an in-memory pickle with up to workers
// goroutines for the trace lists; mapped says data is a file mapping whose
// pages may be dropped once decoded.
func readPickleParallelEnv(data []byte, workers, minRegion int, mapped bool) (s *Snapshot, env *parEnv, err error) {
	defer func() {
		if recover() != nil {
			s, err = nil, errMerge // the caller decodes sequentially
		}
	}()
	b := newBuilder()
	b.s.Format = "pickle protocol " + strconv.Itoa(int(data[1]))
	env = &parEnv{data: data, frames: frameChain(data), minRegion: minRegion, mapped: mapped}
	run := -1
	var dec *pickle.Decoder
	onList := func(l *pickle.List) (pickle.Value, bool) {
		v, ok := b.onList(l)
		if h, isH := v.Handle(); ok && isH && h&hMask == hRun {
			run = int(h &^ hMask)
			dec.Pause()
		}
		return v, ok
	}
	dec = pickle.NewDecoder(data, pickle.Options{OnDict: b.onDict, OnList: onList, OnExtend: b.onExtend})
	env.dec = dec
	for {
		root, paused, err := dec.Run()
		if err != nil {
			return nil, env, err
		}
		if !paused {
			if err := b.finish(root); err != nil {
				return nil, env, err
			}
			b.s.InputBytes = int64(len(data))
			return b.s, env, nil
		}
		if err := env.region(b, run, workers); err != nil {
			return nil, env, err
		}
	}
}

// errMerge reports that the stretches disagreed after the builder was
// changed: the caller decodes the whole file again sequentially.
var errMerge = errors.New("parallel trace merge failed")

type unit struct {
	start, fi int
	slot      int
	rows      int // expected, for capacities
	w         *worker
	rowOff    int
	frameMap  []uint32
	stackMap  []uint32
}

// region decodes the rest of the trace list whose first batch just
// completed, if it can. It returns nil when it left the decoder untouched.
func (e *parEnv) region(b *builder, run, workers int) error {
	data, frames := e.data, e.frames
	r := int(e.dec.Offset())
	fi := sort.Search(len(frames), func(i int) bool { return frames[i].hi > r })
	if fi == len(frames) || r < frames[fi].lo {
		if fi < len(frames) && fi > 0 && r == frames[fi-1].hi {
			r = frames[fi].lo
		} else {
			return nil
		}
	}
	if data[r] != '(' || frames[len(frames)-1].hi-r < e.minRegion || run < 0 {
		return nil
	}
	p0 := r + 1
	if p0 == frames[fi].hi {
		fi++
		if fi == len(frames) {
			return nil
		}
		p0 = frames[fi].lo
	}
	e.prefixLen = e.dec.MemoLen()
	if e.pre == nil || len(e.pre) < min(e.prefixLen, 1<<16) {
		n := min(e.prefixLen, 1<<16)
		e.pre, e.preOK, e.action, e.preStr = make([]wv, n), make([]bool, n), make([]bool, n), nil
		for i := range n {
			v, ok := e.dec.Memo(i)
			if ok {
				e.pre[i] = fromValue(v, func(s string) wv {
					e.preStr = append(e.preStr, s)
					return wv{k: wPStr, f: fieldOf(s) + 1, n: uint64(len(e.preStr) - 1)}
				})
				e.preOK[i] = true
				e.action[i] = e.pre[i].k == wPStr && e.preStr[e.pre[i].n] == "action"
			}
		}
	}

	// Chunks of whole frames; chunk 0 starts at p0.
	nf := len(frames) - fi
	nc := min(workers*4, nf)
	type chunk struct {
		fa, fb, start int
		scan          chunkScan
	}
	chunks := make([]chunk, nc)
	for c := range nc {
		chunks[c].fa = fi + c*nf/nc
		chunks[c].fb = fi + (c+1)*nf/nc
		chunks[c].start = frames[chunks[c].fa].lo
	}
	chunks[0].start = p0
	parallel(nc, workers, func(c int) {
		ch := &chunks[c]
		defer func() {
			if recover() != nil {
				ch.scan = chunkScan{}
			}
		}()
		ch.scan = e.scan(ch.fa, ch.fb, ch.start)
	})
	// Units: from each chunk's first entry to the next one's.
	base := e.prefixLen
	units := []unit{{start: p0, fi: fi, slot: base}}
	for c := range nc {
		s := chunks[c].scan
		if !s.ok {
			break // units past here cannot be numbered
		}
		if c > 0 && s.cand >= 0 {
			units = append(units, unit{start: s.cand, fi: s.candFI, slot: base + s.pre})
		}
		units[len(units)-1].rows += s.rows
		base += s.memo
	}
	parallel(len(units), workers, func(u int) {
		w := newWorker(e, units[u].slot)
		units[u].w = w
		defer func() {
			// A bug here must not take the process down: the general
			// decoder takes over.
			if recover() != nil {
				w.err = errShape
			}
		}()
		w.setFrame(units[u].fi)
		limit := -1
		memo := 3 * units[u].rows
		if u+1 < len(units) {
			limit = units[u+1].start
			memo = units[u+1].slot - units[u].slot
		}
		w.prealloc(memo+16, units[u].rows+16)
		w.run(units[u].start, limit)
	})
	// Check that the stretches join up, and find where the list ends.
	last := -1
	for u := range units {
		w := units[u].w
		if w.err != nil {
			return nil
		}
		if w.end {
			if u+1 < len(units) && w.stop >= units[u+1].start {
				return nil
			}
			last = u
			break
		}
		if u+1 == len(units) || w.stop != units[u+1].start {
			return nil
		}
	}
	if last < 0 {
		return nil
	}
	units = units[:last+1]
	if err := e.merge(b, run, units); err != nil {
		return err
	}
	e.regions++
	e.stretches += len(units)
	for _, u := range units {
		e.slow += u.w.slow
		e.patches += len(u.w.actPatch) + len(u.w.stackPatch)
	}
	return nil
}

// parallel runs f(0..n-1) on up to workers goroutines.
func parallel(n, workers int, f func(int)) {
	var wg sync.WaitGroup
	next := make(chan int, n)
	for i := range n {
		next <- i
	}
	close(next)
	for range min(workers, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				f(i)
			}
		}()
	}
	wg.Wait()
}

type chunkScan struct {
	ok     bool
	memo   int // MEMOIZEs in the chunk
	cand   int // first entry start, -1 if none
	candFI int
	pre    int // MEMOIZEs before cand
	rows   int // entry starts seen
}

// scan walks the opcodes of frames [fa, fb) from start without decoding.
func (e *parEnv) scan(fa, fb, start int) chunkScan {
	data := e.data
	s := chunkScan{cand: -1}
	for fi := fa; fi < fb; fi++ {
		pos, end := e.frames[fi].lo, e.frames[fi].hi
		if fi == fa {
			pos = start
		}
		for pos < end {
			op := data[pos]
			if l := fixedLen[op]; l != 0 {
				s.memo += int(isMemoize[op])
				pos += int(l)
				continue
			}
			if (op == 0x8c || op == 0x8a) && pos+1 < end {
				pos += 2 + int(data[pos+1]) // SHORT_BINUNICODE, LONG1
				continue
			}
			n := opArgLen[op]
			switch {
			case n == 0:
				return s // not handled
			case n == lenEmptyDict:
				if pos+4 < end && data[pos+1] == 0x94 && data[pos+2] == '(' {
					k := -1
					switch data[pos+3] {
					case 'h':
						k = int(data[pos+4])
					case 'j':
						if pos+8 < end {
							k = int(binary.LittleEndian.Uint32(data[pos+4:]))
						}
					}
					if k >= 0 && k < len(e.action) && e.action[k] {
						if s.cand < 0 {
							s.cand, s.candFI, s.pre = pos, fi, s.memo
						}
						s.rows++
					}
				}
				pos++
			default:
				// Length-prefixed argument: -(width of the length field).
				w := int(-n)
				if pos+1+w > end {
					return s
				}
				var l uint64
				switch w {
				case 1:
					l = uint64(data[pos+1])
				case 4:
					l = uint64(binary.LittleEndian.Uint32(data[pos+1:]))
				case 8:
					l = binary.LittleEndian.Uint64(data[pos+1:])
				}
				if l > uint64(end-pos) {
					return s
				}
				pos += 1 + w + int(l)
			}
		}
		if pos != end {
			return s
		}
	}
	s.ok = true
	return s
}

// Opcode lengths for scan: >0 fixed total length, 0 not handled, negative
// the width of a length prefix, and two markers.
const (
	lenMemoize   = 100
	lenEmptyDict = 101
)

// fixedLen is the total length of opcodes without a length prefix (0 for
// the others and for EMPTY_DICT, which scan looks at); isMemoize marks
// MEMOIZE.
var fixedLen, isMemoize = func() (t, m [256]uint8) {
	for op, n := range opArgLen {
		if n > 0 && n < lenMemoize {
			t[op] = uint8(n)
		}
	}
	t[0x94], m[0x94] = 1, 1
	return t, m
}()

var opArgLen = func() (t [256]int8) {
	for _, op := range "(.012NRabde]lost)u" {
		t[op] = 1
	}
	for _, op := range []byte{0x81, 0x85, 0x86, 0x87, 0x88, 0x89, 0x8f, 0x90, 0x91, 0x92, 0x93, 0x97, 0x98} {
		t[op] = 1
	}
	t['}'] = lenEmptyDict
	t[0x94] = lenMemoize
	t['h'], t['j'], t['K'], t['M'], t['J'], t['G'] = 2, 5, 2, 3, 5, 9
	t[0x82], t[0x83], t[0x84] = 2, 3, 5
	t[0x8a], t[0x8c], t['C'], t['U'] = -1, -1, -1, -1
	t['X'], t['B'], t['T'], t[0x8b] = -4, -4, -4, -4
	t[0x8d], t[0x8e], t[0x96] = -8, -8, -8
	return t
}()

// merge folds the stretches into the builder in file order and moves the
// decoder past them.
func (e *parEnv) merge(b *builder, run int, units []unit) error {
	n0 := len(b.entries.Action)
	total := 0
	for u := range units {
		units[u].rowOff = total
		total += units[u].w.t.Len()
	}
	// resolve returns the value of a memo slot of the stretches, global ids.
	// Strings come back as wStr with their content in the string.
	var resolve func(slot int) (wv, string, bool)
	resolve = func(slot int) (wv, string, bool) {
		j := sort.Search(len(units), func(i int) bool { return units[i].slot > slot }) - 1
		if j < 0 || slot-units[j].slot >= len(units[j].w.memo) {
			return wv{}, "", false
		}
		v := units[j].w.memo[slot-units[j].slot]
		switch v.k {
		case wExt:
			return resolve(int(v.n))
		case wStr, wPStr, wLStr:
			return wv{k: wStr}, units[j].w.sval(v), true
		case wFrame:
			if units[j].frameMap == nil {
				return wv{}, "", false
			}
			return wv{k: wGFrame, n: uint64(units[j].frameMap[v.n])}, "", true
		case wStack:
			if units[j].stackMap == nil {
				return wv{}, "", false
			}
			return wv{k: wGStack, n: uint64(units[j].stackMap[v.n])}, "", true
		case wEntry:
			return wv{k: wEntry, n: uint64(n0 + units[j].rowOff + int(v.n))}, "", true
		case wDict, wList:
			return wv{k: wOther}, "", true
		}
		return v, "", true
	}
	hasTime := false
	strMaps := make([][]uint32, len(units))
	streamMaps := make([][]uint32, len(units))
	for u := range units {
		w := units[u].w
		hasTime = hasTime || w.t.HasTime
		streamMaps[u] = make([]uint32, len(w.streamTab))
		for i, n := range w.streamTab {
			streamMaps[u][i] = b.streamID(n)
		}
		strMaps[u] = make([]uint32, len(w.strTab))
		for i, s := range w.strTab {
			strMaps[u][i] = b.str(strings.Clone(s))
		}
		fm := make([]uint32, len(w.frameTab))
		for i, f := range w.frameTab {
			f.Filename, f.Name = strings.Clone(f.Filename), strings.Clone(f.Name)
			fm[i] = b.frameID(f)
		}
		units[u].frameMap = fm
		sm := make([]uint32, len(w.stackTab))
		for i, refs := range w.stackTab {
			b.ids = b.ids[:0]
			for _, r := range refs {
				switch r & refMask {
				case refLocal:
					b.ids = append(b.ids, fm[r&^refMask])
				case refGlobal:
					b.ids = append(b.ids, r&^refMask)
				case refExt:
					v, _, ok := resolve(int(r &^ refMask))
					if !ok || v.k != wGFrame {
						return errMerge
					}
					b.ids = append(b.ids, uint32(v.n))
				default:
					return errMerge
				}
			}
			sm[i] = b.internStack()
		}
		units[u].stackMap = sm
	}
	// Columns.
	t := &b.entries
	if cap(t.Action) < n0+total {
		t.growTo(n0 + total)
	}
	t.HasTime = t.HasTime || hasTime
	t.Action = t.Action[:n0+total]
	t.Addr = t.Addr[:n0+total]
	t.Size = t.Size[:n0+total]
	t.Stream = t.Stream[:n0+total]
	t.TimeUS = t.TimeUS[:n0+total]
	t.Stack = t.Stack[:n0+total]
	t.CompileContext = t.CompileContext[:n0+total]
	t.UserMetadata = t.UserMetadata[:n0+total]
	var bad atomic.Bool
	parallel(len(units), len(units), func(u int) {
		defer func() {
			if recover() != nil {
				bad.Store(true)
			}
		}()
		w := units[u].w
		o := n0 + units[u].rowOff
		lt := &w.t
		n := lt.Len()
		copy(t.Action[o:o+n], lt.Action)
		copy(t.Addr[o:o+n], lt.Addr)
		copy(t.Size[o:o+n], lt.Size)
		copy(t.TimeUS[o:o+n], lt.TimeUS)
		sm, strm, stm := units[u].stackMap, strMaps[u], streamMaps[u]
		for i := range n {
			t.Stream[o+i] = stm[lt.Stream[i]]
			switch s := lt.Stack[i]; {
			case s == 0:
				t.Stack[o+i] = 0
			case s&(1<<31) != 0:
				t.Stack[o+i] = s &^ (1 << 31)
			default:
				t.Stack[o+i] = sm[s-1]
			}
			if c := lt.CompileContext[i]; c != 0 {
				t.CompileContext[o+i] = strm[c-1]
			} else {
				t.CompileContext[o+i] = 0
			}
			if c := lt.UserMetadata[i]; c != 0 {
				t.UserMetadata[o+i] = strm[c-1]
			} else {
				t.UserMetadata[o+i] = 0
			}
		}
	})
	for u := range units {
		w := units[u].w
		o := n0 + units[u].rowOff
		for _, p := range w.actPatch {
			v, str, ok := resolve(p.slot)
			switch {
			case !ok:
				bad.Store(true)
			case v.k == wStr:
				t.Action[o+p.row] = ParseAction(str)
			case v.k == wInt || v.k == wNone || v.k == wEmptyList:
				t.Action[o+p.row] = ActionUnknown
			default:
				bad.Store(true)
			}
		}
		for _, p := range w.stackPatch {
			v, _, ok := resolve(p.slot)
			switch {
			case !ok:
				bad.Store(true)
			case v.k == wGStack:
				t.Stack[o+p.row] = uint32(v.n)
			case v.k == wInt || v.k == wNone || v.k == wEmptyList || v.k == wStr:
				t.Stack[o+p.row] = 0
			default:
				bad.Store(true)
			}
		}
	}
	if bad.Load() {
		return errMerge
	}
	// The run: rows before the last APPENDS MARK were appended; the rest
	// are the open batch, left on the decoder's stack.
	closed := 0
	for u := range units {
		if ls := units[u].w.lastSep; ls >= 0 {
			closed = units[u].rowOff + ls
		}
	}
	rn := &b.runs[run]
	if rn.rows == nil && rn.hi == n0 && rn.hi > rn.lo {
		rn.hi = n0 + closed
	} else {
		for i := range closed {
			rn.add(n0 + i)
		}
	}
	push := make([]pickle.Value, 0, total-closed)
	for i := closed; i < total; i++ {
		push = append(push, pickle.Handle(hEntry|uint64(n0+i)))
	}
	lu := units[len(units)-1]
	memoLen := lu.slot + len(lu.w.memo)
	vmResolve := func(slot int) (pickle.Value, bool) {
		v, str, ok := resolve(slot)
		if !ok {
			return pickle.Value{}, false
		}
		switch v.k {
		case wNone:
			return pickle.None(), true
		case wInt:
			return pickle.Int(int64(v.n)), true
		case wStr:
			return pickle.Str(strings.Clone(str)), true
		case wGFrame:
			return pickle.Handle(hFrame | v.n), true
		case wGStack:
			return pickle.Handle(hStack | v.n), true
		case wEntry:
			return pickle.Handle(hEntry | v.n), true
		case wEmptyList:
			return pickle.NewList(), true
		}
		return pickle.Value{}, false
	}
	if err := e.dec.Skip(int64(lu.w.stop), memoLen, e.chainResolve(vmResolve), true, push); err != nil {
		return errMerge
	}
	return nil
}

// chainResolve keeps earlier regions' slots answerable after a later Skip.
func (e *parEnv) chainResolve(f func(int) (pickle.Value, bool)) func(int) (pickle.Value, bool) {
	prev := e.vmResolve
	lo := e.prefixLen
	e.vmResolve = func(i int) (pickle.Value, bool) {
		if i >= lo {
			return f(i)
		}
		if prev != nil {
			return prev(i)
		}
		return pickle.Value{}, false
	}
	return e.vmResolve
}

func runtimeProcs() int { return runtime.GOMAXPROCS(0) }
