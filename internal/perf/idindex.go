package perf

// idIndex maps ids (External and correlation ids) to event indexes. Kineto
// numbers both with counters, so they are usually dense: then a table
// over their range replaces a map, whose lookups of a million random keys
// miss the cache far more. Sparse ids fall back to a map.
type idIndex struct {
	lo    int64
	table []int32 // index+1 by id-lo; 0: none
	m     map[int64]int32
}

// idRange gathers the range and number of the ids an idIndex will hold.
type idRange struct {
	lo, hi int64
	n      int
}

func (r *idRange) add(id int64) {
	if r.n == 0 {
		r.lo, r.hi = id, id
	} else {
		r.lo, r.hi = min(r.lo, id), max(r.hi, id)
	}
	r.n++
}

// newIDIndex makes an empty index for the ids of r: a table when their
// range is at most four times their number (and fits an int32 table).
func newIDIndex(r idRange) *idIndex {
	if r.n > 0 && r.hi-r.lo >= 0 && r.hi-r.lo < 4*int64(r.n)+64 && r.hi-r.lo < 1<<31-1 {
		return &idIndex{lo: r.lo, table: make([]int32, r.hi-r.lo+1)}
	}
	return &idIndex{m: make(map[int64]int32, r.n)}
}

// get returns the event of id.
func (x *idIndex) get(id int64) (int32, bool) {
	if x.m != nil {
		i, ok := x.m[id]
		return i, ok
	}
	k := id - x.lo
	if k < 0 || k >= int64(len(x.table)) || x.table[k] == 0 {
		return -1, false
	}
	return x.table[k] - 1, true
}

// set maps id to event i; with first, only when id has no event yet.
func (x *idIndex) set(id int64, i int32, first bool) {
	if x.m != nil {
		if _, dup := x.m[id]; !(first && dup) {
			x.m[id] = i
		}
		return
	}
	// ids outside the range gathered are a bug of the caller
	k := id - x.lo
	if !(first && x.table[k] != 0) {
		x.table[k] = i + 1
	}
}
