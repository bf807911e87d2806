package perf

import (
	"cmp"
	"math/bits"
	"slices"
	"sort"
)

// span is a half-open time interval [S, E) in ns.
type span struct{ S, E int64 }

// spans is a list of intervals; after union() it is sorted and disjoint.
type spans []span

// union sorts and merges overlapping or touching intervals, in place.
func union(v spans) spans {
	if len(v) == 0 {
		return v
	}
	sortStarts(v)
	out := v[:1]
	for _, x := range v[1:] {
		if x.E <= x.S {
			continue
		}
		last := &out[len(out)-1]
		if x.S <= last.E {
			if x.E > last.E {
				last.E = x.E
			}
			continue
		}
		out = append(out, x)
	}
	if out[0].E <= out[0].S {
		out = out[1:]
	}
	return out
}

// total is the summed length of disjoint intervals.
func (v spans) total() int64 {
	var t int64
	for _, x := range v {
		t += x.E - x.S
	}
	return t
}

// intersect returns a ∩ b for two disjoint sorted lists.
func intersect(a, b spans) spans {
	if len(a) == 0 || len(b) == 0 {
		return nil
	}
	out := make(spans, 0, len(a)+len(b)) // the most it can hold
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		s := max(a[i].S, b[j].S)
		e := min(a[i].E, b[j].E)
		if s < e {
			out = append(out, span{s, e})
		}
		if a[i].E < b[j].E {
			i++
		} else {
			j++
		}
	}
	return out
}

// subtract returns a − b for two disjoint sorted lists.
func subtract(a, b spans) spans {
	if len(a) == 0 {
		return nil
	}
	out := make(spans, 0, len(a)+len(b)) // the most it can hold
	j := 0
	for _, x := range a {
		s := x.S
		for j < len(b) && b[j].E <= s {
			j++
		}
		k := j
		for k < len(b) && b[k].S < x.E {
			if b[k].S > s {
				out = append(out, span{s, b[k].S})
			}
			if b[k].E > s {
				s = b[k].E
			}
			k++
		}
		if s < x.E {
			out = append(out, span{s, x.E})
		}
	}
	return out
}

// overlap is |v ∩ [s, e)| for disjoint sorted v.
func (v spans) overlap(s, e int64) int64 {
	i := sort.Search(len(v), func(i int) bool { return v[i].E > s })
	var t int64
	for ; i < len(v) && v[i].S < e; i++ {
		t += min(v[i].E, e) - max(v[i].S, s)
	}
	return t
}

// clip calls fn with each part of [s, e) inside the disjoint sorted v.
func (v spans) clip(s, e int64, fn func(s, e int64)) {
	i := sort.Search(len(v), func(i int) bool { return v[i].E > s })
	for ; i < len(v) && v[i].S < e; i++ {
		if a, b := max(v[i].S, s), min(v[i].E, e); a < b {
			fn(a, b)
		}
	}
}

// radixMin is the length from which sortStarts sorts by radix;
// mergeRunsMax is the most ascending runs it merges instead.
const (
	radixMin     = 1 << 12
	mergeRunsMax = 8
)

// sortStarts sorts v by start. union's result does not depend on the
// order of equal starts, which leaves the sort free: lists already in
// order (GPU work, taken in start order) are only checked, lists in a few
// ascending runs (ops taken thread by thread) merged, and long ones sorted
// by an LSD radix sort on the start, which beats a comparison sort on the
// million-span lists of a large trace.
func sortStarts(v spans) {
	if len(v) < radixMin {
		slices.SortFunc(v, func(a, b span) int { return cmp.Compare(a.S, b.S) })
		return
	}
	lo, hi := v[0].S, v[0].S
	runs := 1
	for i := 1; i < len(v); i++ {
		s := v[i].S
		if s < v[i-1].S {
			runs++
		}
		lo, hi = min(lo, s), max(hi, s)
	}
	switch {
	case runs == 1:
		return
	case runs <= mergeRunsMax:
		sortRuns(v, func(a, b span) int { return cmp.Compare(a.S, b.S) }, slices.SortFunc)
		return
	}
	// digits of at most 12 bits over the starts' range (uint64: the range
	// of any two int64 fits)
	r := uint64(hi) - uint64(lo)
	nbits := bits.Len64(r)
	passes := (nbits + 11) / 12
	width := (nbits + passes - 1) / passes
	mask := uint64(1)<<width - 1
	src, dst := v, make(spans, len(v))
	var count [1 << 12]int
	for shift := 0; shift < nbits; shift += width {
		c := count[:mask+1]
		clear(c)
		for _, x := range src {
			c[(uint64(x.S)-uint64(lo))>>shift&mask]++
		}
		if c[(uint64(src[0].S)-uint64(lo))>>shift&mask] == len(src) {
			continue // one digit for all: the order stands
		}
		pos := 0
		for d, n := range c {
			c[d] = pos
			pos += n
		}
		for _, x := range src {
			d := (uint64(x.S) - uint64(lo)) >> shift & mask
			dst[c[d]] = x
			c[d]++
		}
		src, dst = dst, src
	}
	if &src[0] != &v[0] {
		copy(v, src)
	}
}
