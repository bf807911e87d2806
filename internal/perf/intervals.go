package perf

import (
	"cmp"
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
	slices.SortFunc(v, func(a, b span) int { return cmp.Compare(a.S, b.S) })
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
	var out spans
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
	var out spans
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
