package kineto

import (
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
)

// A parIndex finds the events of a mapped traceEvents array on several
// goroutines ahead of the splitter, which then cuts its batches from the
// index instead of scanning the bytes: the same batches the sequential
// scan cuts, since the index only covers stretches whose scan proves the
// sequential one would see there exactly what the index holds.
//
// The array is cut into stretches of nominal length size. Stretch 0 starts
// where start left the splitter (between events, exactly); stretch j > 0
// starts at its seam, a guess of where an event starts inside its nominal
// range (see seam). Stretch j is scanned
// from its start assuming it is between events, and must arrive between
// events exactly at the seam of stretch j+1, which proves that
// assumption for j+1 by induction from stretch 0. A stretch fails on
// anything the sequential scan would treat specially: a byte it would
// count as garbage, a raw newline in a string, nesting deeper than
// maxDepth, an event of maxEvent bytes or more, the array's closing
// bracket (so the last stretch always fails: the end of the array and the
// tail stay sequential), a missing seam or one that is not between
// events. The index is valid up to the start of the first failed stretch;
// the sequential scan does the rest.
type parIndex struct {
	data     []byte
	base     int64 // where stretch 0 starts
	size     int64 // nominal stretch length
	maxEvent int
	st       []stretch

	next   atomic.Int64 // next stretch to take
	failed atomic.Int64 // lowest stretch known to fail (len(st) when none)
	window chan struct{}
	quit   chan struct{}
	wg     sync.WaitGroup

	// the consumer (the splitter's goroutine)
	cur   int   // stretch being consumed
	k     int   // its next event
	limit int64 // the index is exact up to here: the end of stretch cur-1
	over  bool  // the index ended at limit; the sequential scan goes on
}

// stretch is one stretch's scan: its events, relative to lo.
type stretch struct {
	lo, hi       int64
	starts, ends []int32
	ok           bool
	done         chan struct{} // closed when the fields above are set
}

// Defaults of the parallel index: below parMinArray bytes of array, or
// with one core, the sequential scan alone is as fast.
const (
	parMinArray = 32 << 20
	parStretch  = 4 << 20
)

// startIndex starts indexing the rest of a mapped array when it is large
// enough and there is more than one core; s.parMin, s.parStretch and
// s.parWorkers override the defaults (tests force the index on small
// inputs). It must be called right after start; stopIndex ends it.
func (s *splitter) startIndex() {
	if s.data == nil || s.done || !s.inArray || s.depth != 0 || s.resync {
		return
	}
	workers := s.parWorkers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	minArray := int64(s.parMin)
	if minArray <= 0 {
		minArray = parMinArray
	}
	base := s.pendOff
	array := int64(len(s.data)) - base
	if workers < 2 || array < minArray {
		return
	}
	size := int64(s.parStretch)
	if size <= 0 {
		size = max(parStretch, array>>16)
	}
	n := int((array + size - 1) / size)
	x := &parIndex{data: s.data, base: base, size: size, maxEvent: s.maxEvent,
		st: make([]stretch, n), window: make(chan struct{}, 4*workers), quit: make(chan struct{}), limit: base}
	for j := range x.st {
		x.st[j].done = make(chan struct{})
	}
	x.failed.Store(int64(n))
	for range cap(x.window) {
		x.window <- struct{}{}
	}
	x.wg.Add(workers)
	for range workers {
		go x.work()
	}
	s.ix = x
}

// stopIndex stops the index's goroutines and waits for them: none of them
// reads the data after it returns.
func (s *splitter) stopIndex() {
	if x := s.ix; x != nil {
		x.stop()
		s.ix = nil
	}
}

func (x *parIndex) stop() {
	select {
	case <-x.quit:
	default:
		close(x.quit)
	}
	x.wg.Wait()
}

// work scans stretches in order, at most cap(window) ahead of the consumer.
func (x *parIndex) work() {
	defer x.wg.Done()
	for {
		select {
		case <-x.window:
		case <-x.quit:
			return
		}
		j := int(x.next.Add(1) - 1)
		if j >= len(x.st) {
			return
		}
		st := &x.st[j]
		if int64(j) < x.failed.Load() {
			x.scan(j)
		}
		if !st.ok {
			for {
				f := x.failed.Load()
				if int64(j) >= f || x.failed.CompareAndSwap(f, int64(j)) {
					break
				}
			}
		}
		close(st.done)
	}
}

// seam returns where stretch j > 0 starts, or -1 when it has no seam: where
// resyncAt first finds an event start ("\n  {", one event a line as
// Kineto writes, or "},{") within its nominal range. The rule only guesses;
// the scan of stretch j-1 proves the guess (or fails).
func (x *parIndex) seam(j int) int64 {
	lo := x.base + int64(j)*x.size
	hi := min(lo+x.size, int64(len(x.data)))
	const window = 64 << 10 // look near lo first
	for w := lo; w < hi; w += window {
		if k := resyncAt(x.data[w:min(w+window+3, hi)]); k >= 0 {
			return w + int64(k)
		}
	}
	return -1
}

// scan indexes stretch j. A fault on the mapping (the file shrank) fails
// the stretch; the sequential scan then meets it and reports it.
func (x *parIndex) scan(j int) {
	st := &x.st[j]
	old := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(old)
		if e := recover(); e != nil {
			if !inData(e, x.data) {
				panic(e)
			}
			st.ok, st.starts, st.ends = false, nil, nil
		}
	}()
	lo := x.base
	if j > 0 {
		lo = x.seam(j)
	}
	hi := x.seam(j + 1)
	if lo < 0 || hi < 0 {
		return
	}
	st.lo, st.hi = lo, hi
	st.starts, st.ends, st.ok = scanEvents(x.data, int(lo), int(hi), x.maxEvent)
}

// scanEvents finds the events of data[lo:hi], which must start and end
// between events, with nothing the sequential scan treats specially.
// Offsets are relative to lo.
func scanEvents(data []byte, lo, hi, maxEvent int) (starts, ends []int32, ok bool) {
	starts = make([]int32, 0, (hi-lo)/256+1)
	ends = make([]int32, 0, cap(starts))
	depth, inStr, evStart, lim := 0, false, 0, 0
	for i := lo; ; {
		if depth == 0 {
			if i >= hi {
				return starts, ends, i == hi
			}
			switch data[i] {
			case ' ', '\n', '\r', '\t', ',':
			case '{':
				depth, evStart = 1, i
				lim = min(len(data), i+maxEvent)
			default: // garbage, or the array's end
				return nil, nil, false
			}
			i++
			continue
		}
		if inStr {
			i = skipTo(&strSpecial, data[:lim], i)
			if i >= lim {
				return nil, nil, false
			}
			switch data[i] {
			case '\\':
				i += 2
				continue
			case '"':
				inStr = false
			case '\n':
				return nil, nil, false // the sequential scan counts damage
			}
			i++
			continue
		}
		i = skipTo(&structural, data[:lim], i)
		if i >= lim {
			return nil, nil, false
		}
		switch data[i] {
		case '"':
			inStr = true
		case '{', '[':
			if depth++; depth > maxDepth {
				return nil, nil, false
			}
		case '}', ']':
			if depth--; depth == 0 {
				if i+1-evStart >= maxEvent {
					return nil, nil, false
				}
				starts = append(starts, int32(evStart-lo))
				ends = append(ends, int32(i+1-lo))
			}
		}
		i++
	}
}

// take appends to b (whose buf starts at pendOff) the indexed events that
// end by off, and returns where the bytes kept for the next cut start
// (relative to pendOff) and true; or false when the index ends before off
// (it is done then): x.limit is where the sequential scan goes on, between
// events.
func (x *parIndex) take(b *batch, pendOff, off int64) (keep int, ok bool) {
	for x.cur < len(x.st) {
		st := &x.st[x.cur]
		<-st.done
		if !st.ok {
			break
		}
		for ; x.k < len(st.starts); x.k++ {
			e := st.lo + int64(st.ends[x.k])
			if e > off {
				a := st.lo + int64(st.starts[x.k])
				if a < off {
					return int(a - pendOff), true
				}
				return int(off - pendOff), true
			}
			b.starts = append(b.starts, int32(st.lo+int64(st.starts[x.k])-pendOff))
			b.ends = append(b.ends, int32(e-pendOff))
		}
		if st.hi > off {
			return int(off - pendOff), true
		}
		// stretch consumed: give its slot to the workers
		x.limit = st.hi
		st.starts, st.ends = nil, nil
		x.cur++
		x.k = 0
		x.window <- struct{}{}
	}
	return 0, false
}

// leave ends the index, which ended before the bytes a cut holds (take
// returned false), and returns where the sequential scan goes on,
// between events, relative to pendOff.
func (x *parIndex) leave(pendOff int64) int {
	x.over = true
	close(x.quit)
	return int(x.limit - pendOff)
}
