package snapgen

import (
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
)

// gen writes the parts of a snapshot pickle that every model shares: the
// memoized keys, frames lists, segments, trace entries and the closing
// settings, in the order PyTorch's pickler writes them.
type gen struct {
	p         *pickler
	key       map[string]int
	frames    []frame
	frameMemo []int
	rng       *rand.Rand
	strSize   int   // write every that many sizes as a str (Options.StrSizeEvery)
	n         int   // entries written on the current device
	inBatch   int   // entries since the last APPENDS
	t         int64 // time_us of the next entry
}

// segBlock is an active block of a segment at dump time.
type segBlock struct {
	size     int64
	stack    []int // frame indices, innermost first; nil: no frames
	inactive bool  // free space cached in the segment
}

func newGen(w io.Writer, frames []frame, rng *rand.Rand, strSize int) *gen {
	g := &gen{p: newPickler(w), key: map[string]int{}, frames: frames, rng: rng, strSize: strSize,
		t: 1795272504665726}
	g.frameMemo = make([]int, len(frames))
	for i := range g.frameMemo {
		g.frameMemo[i] = -1
	}
	return g
}

// k writes a dict key or enum string, memoized on first use.
func (g *gen) k(s string) {
	if i, ok := g.key[s]; ok {
		g.p.get(i)
		return
	}
	g.key[s] = g.p.str(s)
}

// writeFrames writes a new frames list (frame dicts shared by identity) and
// returns its memo index.
func (g *gen) writeFrames(st []int) int {
	p := g.p
	p.emptyList()
	m := p.memoize()
	if len(st) != 1 {
		p.mark() // CPython writes a one-item list as item APPEND
	}
	for _, f := range st {
		if g.frameMemo[f] >= 0 {
			p.get(g.frameMemo[f])
			continue
		}
		p.emptyDict()
		g.frameMemo[f] = p.memoize()
		p.mark()
		g.k("name")
		p.str(g.frames[f].name)
		g.k("filename")
		p.str(g.frames[f].file)
		g.k("line")
		p.int(int64(g.frames[f].line))
		p.setitems()
	}
	if len(st) == 1 {
		p.appendOne()
	} else {
		p.appends()
	}
	return m
}

// begin opens the snapshot dict and its segments list.
func (g *gen) begin() {
	p := g.p
	p.emptyDict()
	p.memoize()
	p.mark()
	g.k("segments")
	p.emptyList()
	p.memoize()
	p.mark()
}

// segment writes one segment of total bytes at base: blocks laid end to end
// from its start, the rest inactive.
func (g *gen) segment(base, total int64, blocks []segBlock) {
	p, k := g.p, g.k
	p.emptyDict()
	p.memoize()
	p.mark()
	var alloc int64
	for _, b := range blocks {
		if !b.inactive {
			alloc += b.size
		}
	}
	k("device")
	p.int(0)
	k("address")
	p.int(base)
	k("total_size")
	p.int(total)
	k("allocated_size")
	p.int(alloc)
	k("active_size")
	p.int(alloc)
	k("requested_size")
	p.int(alloc)
	k("stream")
	p.int(0)
	k("segment_type")
	k("large")
	k("segment_pool_id")
	p.int(0)
	p.int(0)
	p.tuple2()
	p.memoize()
	k("is_expandable")
	p.boolean(false)
	k("frames")
	p.emptyList()
	p.memoize()
	k("blocks")
	p.emptyList()
	p.memoize()
	p.mark()
	a := base
	emit := func(size int64, state string, st []int) {
		p.emptyDict()
		p.memoize()
		p.mark()
		k("address")
		p.int(a)
		k("size")
		p.int(size)
		k("requested_size")
		p.int(size)
		k("state")
		k(state)
		k("frames")
		if st != nil {
			g.writeFrames(st)
		} else {
			p.emptyList()
			p.memoize()
		}
		p.setitems()
		a += size
	}
	for _, b := range blocks {
		if b.inactive {
			emit(b.size, "inactive", nil)
		} else {
			emit(b.size, "active_allocated", b.stack)
		}
	}
	if rest := base + total - a; rest > 0 {
		emit(rest, "inactive", nil)
	}
	p.appends()
	p.setitems()
}

// endSegments closes the segments list.
func (g *gen) endSegments() {
	g.p.appends()
	g.p.boundary()
}

// beginTraces opens device_traces; beginDevice and endDevice bracket each
// device's list of entries.
func (g *gen) beginTraces() {
	g.k("device_traces")
	g.p.emptyList()
	g.p.memoize()
	g.p.mark()
}

func (g *gen) beginDevice() {
	g.p.emptyList()
	g.p.memoize()
	g.p.mark()
	g.n, g.inBatch = 0, 0
}

func (g *gen) endDevice() {
	g.p.appends()
	g.p.boundary()
}

// entry writes one trace entry. Its frames are the list memoized at
// framesMemo (>= 0), a new empty list (-2), or a new list of fresh; it
// returns the memo index of the frames list.
func (g *gen) entry(action string, a, size int64, framesMemo int, fresh []int) int {
	p, k := g.p, g.k
	p.emptyDict()
	p.memoize()
	p.mark()
	k("action")
	k(action)
	k("addr")
	p.int(a)
	k("size")
	if g.strSize > 0 && g.n%g.strSize == g.strSize-1 {
		p.str(strconv.FormatInt(size, 10))
	} else {
		p.int(size)
	}
	k("stream")
	p.int(0)
	k("time_us")
	p.int(g.t)
	k("compile_context")
	p.str("N/A")
	k("user_metadata")
	k("")
	k("frames")
	m := framesMemo
	switch {
	case framesMemo >= 0:
		p.get(framesMemo)
	case framesMemo == -2:
		p.emptyList()
		m = p.memoize()
	default:
		m = g.writeFrames(fresh)
	}
	p.setitems()
	g.n++
	g.inBatch++
	if g.inBatch == 1000 {
		p.appends()
		p.boundary()
		p.mark()
		g.inBatch = 0
	}
	g.t += int64(1 + g.rng.IntN(40))
	return m
}

// finish closes device_traces and writes the allocator settings.
func (g *gen) finish() error {
	p, k := g.p, g.k
	p.appends()
	p.boundary()
	k("allocator_settings")
	p.emptyDict()
	p.memoize()
	p.mark()
	k("PYTORCH_CUDA_ALLOC_CONF")
	k("")
	k("max_split_size")
	p.int(-1)
	k("garbage_collection_threshold")
	p.float(0)
	k("expandable_segments")
	p.boolean(false)
	p.setitems()
	k("external_annotations")
	p.emptyList()
	p.memoize()
	p.setitems()
	if err := p.stop(); err != nil {
		return fmt.Errorf("snapgen: %w", err)
	}
	return nil
}
