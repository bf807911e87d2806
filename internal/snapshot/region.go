package snapshot

import (
	"errors"
	"sort"
)

// errMerge reports that the stretches disagreed after the builder was
// changed: the caller decodes the whole file again sequentially.
var errMerge = errors.New("parallel trace merge failed")

type unit struct {
	start, fi int
	slot      int
	rows      int // expected (the scan's count)
	off       int // where the worker's rows go in the builder's columns
	w         *worker
	rowOff    int
	frameMap  []uint32
	stackMap  []uint32
}

// region decodes the rest of the trace list whose first batch just
// completed, if it can. It returns nil when it left the decoder untouched.
func (e *parEnv) region(b *builder, run, workers int) error {
	fi, p0, ok := e.regionStart(run)
	if !ok {
		return nil
	}
	e.prefixLen = e.dec.MemoLen()
	e.loadPrefix()
	chunks := e.scanChunks(fi, p0, workers)
	if err := b.src.Check(); err != nil { // Ctrl-C, the budget: before the decoding pass
		return err
	}
	units := e.unitsOf(chunks, fi, p0)
	e.decodeUnits(b, units, workers)
	units = joined(units)
	if units == nil {
		return nil
	}
	if err := e.merge(b, run, units); err != nil {
		return err
	}
	e.countRegion(units)
	return nil
}

// regionStart finds where the rest of the list (run) starts: the frame fi
// holding its first entry at p0. false when there is no region to decode
// in parallel (not at a list's '(' mark, too short, no run).
func (e *parEnv) regionStart(run int) (fi, p0 int, ok bool) {
	data, frames := e.data, e.frames
	r := int(e.dec.Offset())
	fi = sort.Search(len(frames), func(i int) bool { return frames[i].hi > r })
	if fi == len(frames) || r < frames[fi].lo {
		if fi < len(frames) && fi > 0 && r == frames[fi-1].hi {
			r = frames[fi].lo
		} else {
			return 0, 0, false
		}
	}
	if data[r] != '(' || frames[len(frames)-1].hi-r < e.minRegion || run < 0 {
		return 0, 0, false
	}
	p0 = r + 1
	if p0 == frames[fi].hi {
		fi++
		if fi == len(frames) {
			return 0, 0, false
		}
		p0 = frames[fi].lo
	}
	return fi, p0, true
}

// loadPrefix rebuilds the table of the low memo slots (those before the
// region), for every list: a container's value may have changed since
// the previous one.
func (e *parEnv) loadPrefix() {
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

// regionChunk is a run of whole frames [fa, fb) scanned by one worker from
// start.
type regionChunk struct {
	fa, fb, start int
	scan          chunkScan
}

// scanChunks cuts the frames from fi into chunks of whole frames, chunk 0
// starting at p0, and scans them in parallel.
func (e *parEnv) scanChunks(fi, p0, workers int) []regionChunk {
	data, frames := e.data, e.frames
	nf := len(frames) - fi
	nc := min(workers*4, nf)
	chunks := make([]regionChunk, nc)
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
		if e.mapped && e.arena != nil {
			dropPages(data, frames[ch.fa].lo, frames[ch.fb-1].hi)
		}
	})
	return chunks
}

// unitsOf is the stretches to decode: from each chunk's first entry to
// the next one's, with their first memo slots and expected rows, up to
// the first chunk whose scan failed.
func (e *parEnv) unitsOf(chunks []regionChunk, fi, p0 int) []unit {
	base := e.prefixLen
	units := []unit{{start: p0, fi: fi, slot: base}}
	for c := range chunks {
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
	return units
}

// decodeUnits decodes the units in parallel, straight into the builder's
// columns, each at the row the scan's counts give it, so that the merge
// only renumbers ids in place; a unit whose count was off moves to arrays
// of its own and the merge copies (parallel_test.go covers both).
func (e *parEnv) decodeUnits(b *builder, units []unit, workers int) {
	dst := &b.entries
	n0 := len(dst.Action)
	units[0].rows = max(units[0].rows+rowSkew, 0)
	expect := 0
	for u := range units {
		units[u].off = n0 + expect
		expect += units[u].rows
	}
	if cap(dst.Action) < n0+expect {
		dst.growTo(n0 + expect)
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
		w.prealloc(memo+16, dst, units[u].off, units[u].rows)
		w.run(units[u].start, limit)
	})
}

// joined checks that the decoded stretches join up and returns them up to
// the one where the list ends, or nil when they do not (or it does not
// end).
func joined(units []unit) []unit {
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
	return units[:last+1]
}

// countRegion adds the region's stretches to the decoder's statistics.
func (e *parEnv) countRegion(units []unit) {
	e.regions++
	e.stretches += len(units)
	for _, u := range units {
		e.slow += u.w.slow
		e.patches += len(u.w.actPatch) + len(u.w.stackPatch)
	}
}
