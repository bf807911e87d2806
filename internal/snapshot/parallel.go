package snapshot

import (
	"encoding/binary"
	"runtime"
	"runtime/debug"
	"strconv"
	"sync"

	"github.com/ptscope/ptscope/internal/input"
	"github.com/ptscope/ptscope/internal/pickle"
	"github.com/ptscope/ptscope/internal/spillmem"
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
	arena     *spillmem.Arena // nil: the heap
	data      []byte
	frames    []frameSpan
	dec       *pickle.Decoder
	prefixLen int
	pre       []wv
	preOK     []bool
	action    []bool // prefix slot holds the string "action"
	preStr    []string
	vmResolve func(int) (pickle.Value, bool)
	minRegion int             // smallest rest of a list worth splitting (bytes)
	mapped    bool            // data is a file mapping: drop decoded pages
	regions   int             // lists decoded in parallel (for tests)
	stretches int             // stretches merged (for tests)
	slow      int             // entries not on the fast path (for tests)
	patches   int             // references resolved at the merge (for tests)
	inPlace   int             // regions whose rows the workers decoded in place (for tests)
	done      <-chan struct{} // closed at Ctrl-C: the passes stop at their next FRAME
}

// cancelled reports whether the reading was interrupted (polled once a
// FRAME, 64 KiB).
func (e *parEnv) cancelled() bool {
	select {
	case <-e.done:
		return true
	default:
		return false
	}
}

// rowSkew is added to the first unit's expected row count: tests set it to
// send the merge down its copying path.
var rowSkew = 0

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
func frameChain(data []byte) []frameSpan { return frameChainDrop(data, nil) }

// frameChainDrop is frameChain; with drop, it calls drop(lo, hi) for every
// 16 MiB it passes, to hand pages back as it goes (each header read maps
// whole folios of the file).
func frameChainDrop(data []byte, drop func(lo, hi int)) []frameSpan {
	var out []frameSpan
	pos, dropped := 2, 0
	for pos+9 <= len(data) && data[pos] == 0x95 {
		if drop != nil && pos-dropped >= 16<<20 {
			drop(dropped, pos)
			dropped = pos
		}
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
	return readPickleParallelArena(data, workers, minRegion, mapped, nil, nil)
}

// readPickleParallelArena is readPickleParallelEnv with the trace columns
// and the stretches' memo tables in arena (nil: the heap), within src's
// limits.
func readPickleParallelArena(data []byte, workers, minRegion int, mapped bool, arena *spillmem.Arena, src *input.Source) (s *Snapshot, env *parEnv, err error) {
	defer func() {
		if recover() != nil {
			s, err = nil, errMerge // the caller decodes sequentially
		}
	}()
	b := newBuilder(arena, src)
	b.s.Format = "pickle protocol " + strconv.Itoa(int(data[1]))
	// With an arena, data is the mapped file or a slice of the arena:
	// hand back the pages mapped meanwhile (of the file: dropPages; the
	// arena's: Poll, which knows them, while data could be on the heap).
	var drop func(lo, hi int)
	switch {
	case mapped && arena != nil:
		drop = func(lo, hi int) { dropPages(data, lo, hi) }
	case arena != nil:
		drop = func(lo, hi int) { arena.Poll() }
	}
	env = &parEnv{data: data, frames: frameChainDrop(data, drop), minRegion: minRegion, mapped: mapped, arena: arena, done: b.src.Done()}
	if drop != nil {
		drop(0, len(data))
	}
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
	opts := b.pickleOptions()
	opts.OnList = onList
	dec = pickle.NewDecoder(data, opts)
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
		if err := b.src.Check(); err != nil {
			return nil, env, err
		}
		if err := env.region(b, run, workers); err != nil {
			return nil, env, err
		}
	}
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
			// A mapped file cut short under us faults: make that a panic
			// that the callers' recover turns into a fallback.
			debug.SetPanicOnFault(true)
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
func (e *parEnv) scan(fa, fb, start int) (s chunkScan) {
	s.cand = -1
	memo := 0 // s.memo, in a register
	defer func() { s.memo = memo }()
	bounded, dropped := e.arena != nil, start
	for fi := fa; fi < fb; fi++ {
		pos, end := e.frames[fi].lo, e.frames[fi].hi
		if fi == fa {
			pos = start
		}
		if e.cancelled() {
			return chunkScan{} // not ok: no unit starts here
		}
		if bounded && pos-dropped >= 4<<20 {
			if e.mapped {
				dropPages(e.data, dropped, pos)
			}
			dropped = pos
			e.arena.Poll()
		}
		data := e.data[:end] // pos < len(data) below: no bounds checks
		for pos < len(data) {
			op := data[pos]
			// The common opcodes in one lookup: fixed lengths, MEMOIZE,
			// and the 1-byte length prefixes of short strings and LONG1.
			if st := scanStep[op]; st < stepSpecial {
				if st == stepMemoize {
					memo++
					pos++
					continue
				}
				if st != stepLen1 {
					pos += int(st)
					continue
				}
				if pos+1 < len(data) {
					pos += 2 + int(data[pos+1])
					continue
				}
			}
			n := opArgLen[op]
			switch {
			case n == 0:
				return s // not handled
			case n == lenEmptyDict:
				// An entry starts EMPTY_DICT MEMOIZE MARK BINGET "action";
				// the opcodes may straddle a FRAME header.
				var k int
				if pos+8 < end {
					k = entryKey(data[pos+1 : pos+8])
				} else {
					var b [7]byte
					for j := range b {
						b[j] = e.byteAfter(fi, pos, j+1)
					}
					k = entryKey(b[:])
				}
				if k >= 0 && k < len(e.action) && e.action[k] {
					if s.cand < 0 {
						s.cand, s.candFI, s.pre = pos, fi, memo
					}
					s.rows++
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

// entryKey returns the memo slot that the opcodes after an EMPTY_DICT
// (MEMOIZE MARK BINGET/LONG_BINGET, in b) fetch as the first key, or -1.
func entryKey(b []byte) int {
	if b[0] != 0x94 || b[1] != '(' {
		return -1
	}
	switch b[2] {
	case 'h':
		return int(b[3])
	case 'j':
		return int(binary.LittleEndian.Uint32(b[3:7]))
	}
	return -1
}

// byteAfter returns the k-th byte of the opcode stream after position pos
// of frame fi, skipping FRAME headers (0 past the last frame).
func (e *parEnv) byteAfter(fi, pos, k int) byte {
	for pos+k >= e.frames[fi].hi {
		k -= e.frames[fi].hi - pos
		fi++
		if fi >= len(e.frames) {
			return 0
		}
		pos = e.frames[fi].lo
	}
	return e.data[pos+k]
}

// scanStep drives scan's fast path: a fixed total length (1-9), stepMemoize,
// stepLen1 (a 1-byte length follows: SHORT_BINUNICODE, LONG1, SHORT_BINBYTES,
// SHORT_BINSTRING), or stepSpecial for everything else (opArgLen decides).
const (
	stepMemoize = 16
	stepLen1    = 17
	stepSpecial = 18
)

var scanStep = func() (t [256]uint8) {
	for op := range t {
		t[op] = stepSpecial
		if n := opArgLen[op]; n > 0 && n < lenMemoize {
			t[op] = uint8(n)
		} else if n == -1 {
			t[op] = stepLen1
		}
	}
	t[0x94] = stepMemoize
	return t
}()

// Opcode lengths for scan: >0 fixed total length, 0 not handled, negative
// the width of a length prefix, and two markers.
const (
	lenMemoize   = 100
	lenEmptyDict = 101
)

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

func runtimeProcs() int { return runtime.GOMAXPROCS(0) }
