package memory

import "github.com/ptscope/ptscope/internal/spillmem"

// ThinTimeline is the replayed timeline thinned to at most MaxBuckets
// buckets of consecutive entries, in columns: enough to redraw every chart
// of the device (memory over time, by category, efficiency) and an HTML
// report without the snapshot. Bucket i covers entries
// [FirstIndex[i], LastIndex[i]]. Min and max columns keep every spike: the
// allocated maximum of the bucket holding the peak is the peak.
type ThinTimeline struct {
	FirstIndex []int `json:"first_index"`
	LastIndex  []int `json:"last_index"`
	// Times of the bucket's first and last entries (Unix ns; zeros when
	// the trace has no times).
	StartNS []int64 `json:"start_ns"`
	EndNS   []int64 `json:"end_ns"`

	AllocatedMinBytes []int64 `json:"allocated_min_bytes"`
	AllocatedMaxBytes []int64 `json:"allocated_max_bytes"`
	ReservedMinBytes  []int64 `json:"reserved_min_bytes"`
	ReservedMaxBytes  []int64 `json:"reserved_max_bytes"`
	ActiveMinBytes    []int64 `json:"active_min_bytes"`
	ActiveMaxBytes    []int64 `json:"active_max_bytes"`
	// MaxIndex is the entry where allocated reaches its bucket maximum;
	// ReservedAtMaxBytes and Categories are taken there, so that the
	// categories stack up to AllocatedMaxBytes and allocated/reserved
	// there is the efficiency the text reports at the peak.
	MaxIndex           []int   `json:"max_index"`
	ReservedAtMaxBytes []int64 `json:"reserved_at_max_bytes"`
	// Categories holds, for each category with bytes anywhere, its
	// allocated bytes at each bucket's MaxIndex (display order).
	Categories []CategorySeries `json:"categories"`
	// Phases are the runs of entries in one phase, in order.
	Phases []PhaseSpan `json:"phases"`
}

// CategorySeries is one category's bytes per bucket.
type CategorySeries struct {
	Category Category `json:"category"`
	Bytes    []int64  `json:"bytes"`
}

// PhaseSpan is a run of entries [StartIndex, EndIndex) in one phase.
type PhaseSpan struct {
	Phase      Phase `json:"phase"`
	StartIndex int   `json:"start_index"`
	EndIndex   int   `json:"end_index"`
}

// MaxBuckets bounds the buckets of a thinned timeline.
const MaxBuckets = 2000

// Len is the number of buckets.
func (t *ThinTimeline) Len() int { return len(t.FirstIndex) }

// thin builds the thinned timeline of a replay.
func thin(r *Replay, ph *Phases) ThinTimeline {
	tl := &r.Timeline
	n := tl.Len()
	out := ThinTimeline{FirstIndex: []int{}, LastIndex: []int{}, StartNS: []int64{}, EndNS: []int64{},
		AllocatedMinBytes: []int64{}, AllocatedMaxBytes: []int64{}, ReservedMinBytes: []int64{}, ReservedMaxBytes: []int64{},
		ActiveMinBytes: []int64{}, ActiveMaxBytes: []int64{}, MaxIndex: []int{}, ReservedAtMaxBytes: []int64{},
		Categories: []CategorySeries{}, Phases: []PhaseSpan{}}
	if n == 0 {
		return out
	}
	b := min(n, MaxBuckets)
	mk := func() []int64 { return make([]int64, b) }
	out.FirstIndex, out.LastIndex, out.MaxIndex = make([]int, b), make([]int, b), make([]int, b)
	out.StartNS, out.EndNS = mk(), mk()
	out.AllocatedMinBytes, out.AllocatedMaxBytes = mk(), mk()
	out.ReservedMinBytes, out.ReservedMaxBytes = mk(), mk()
	out.ActiveMinBytes, out.ActiveMaxBytes = mk(), mk()
	out.ReservedAtMaxBytes = mk()
	hasTime := len(tl.TimeUS) == n
	for k := 0; k < b; k++ {
		lo, hi := k*n/b, (k+1)*n/b-1
		out.FirstIndex[k], out.LastIndex[k] = lo, hi
		if hasTime {
			out.StartNS[k], out.EndNS[k] = tl.TimeUS[lo]*1000, tl.TimeUS[hi]*1000
		}
		amin, amax, at := tl.Allocated[lo], tl.Allocated[lo], lo
		r.arena.Poll() // once per bucket
		for i := lo + 1; i <= hi; i++ {
			if v := tl.Allocated[i]; v > amax {
				amax, at = v, i
			} else if v < amin {
				amin = v
			}
		}
		out.AllocatedMinBytes[k], out.AllocatedMaxBytes[k], out.MaxIndex[k] = amin, amax, at
		out.ReservedMinBytes[k], out.ReservedMaxBytes[k] = minMax(tl.Reserved[lo : hi+1])
		out.ActiveMinBytes[k], out.ActiveMaxBytes[k] = minMax(tl.Active[lo : hi+1])
		out.ReservedAtMaxBytes[k] = tl.Reserved[at]
	}
	layers := r.categoriesAt(out.MaxIndex)
	for _, c := range Categories() {
		for _, v := range layers[c] {
			if v != 0 {
				out.Categories = append(out.Categories, CategorySeries{Category: c, Bytes: layers[c]})
				break
			}
		}
	}
	if ph != nil && len(ph.Of) == n {
		start := 0
		for i := 1; i <= n; i++ {
			if i == n || ph.Of[i] != ph.Of[start] {
				out.Phases = append(out.Phases, PhaseSpan{Phase: ph.Of[start], StartIndex: start, EndIndex: i})
				start = i
			}
		}
	}
	return out
}

func minMax(v []int64) (lo, hi int64) {
	lo, hi = v[0], v[0]
	for _, x := range v[1:] {
		lo, hi = min(lo, x), max(hi, x)
	}
	return lo, hi
}

// categoriesAt returns allocated bytes per category just after each entry
// of xs (ascending; -1 means before the first entry). Allocations made
// before recording count from the start.
func (r *Replay) categoriesAt(xs []int) (layers [numCategories][]int64) {
	n := len(xs)
	// bucket(i) = first sample index whose entry is >= i, found from a
	// coarse table (about 4 slots per sample) and a short scan: a binary
	// search per allocation cost more than the rest of the thinning.
	shift := 0
	if n > 0 {
		for xs[n-1]>>shift > 4*n {
			shift++
		}
	}
	var coarse []int32
	if n > 0 {
		coarse = make([]int32, xs[n-1]>>shift+2)
		m := 0
		for c := range coarse {
			for m < n && xs[m] < c<<shift {
				m++
			}
			coarse[c] = int32(m)
		}
	}
	bucket := func(i int32) int {
		if i < 0 {
			return 0
		}
		c := int(i) >> shift
		if c >= len(coarse) {
			return n
		}
		m := int(coarse[c])
		for m < n && xs[m] < int(i) {
			m++
		}
		return m
	}
	var delta [numCategories][]int64
	for c := range delta {
		delta[c] = make([]int64, n+1)
	}
	for k := range r.Allocs {
		spillmem.Poll(r.arena, k)
		a := &r.Allocs[k]
		start := 0
		if a.AllocIdx >= 0 {
			start = bucket(a.AllocIdx)
		}
		delta[a.Category][start] += a.Size
		if a.FreeReqIdx >= 0 {
			delta[a.Category][bucket(a.FreeReqIdx)] -= a.Size
		}
	}
	for c := range layers {
		layers[c] = make([]int64, n)
		var cur int64
		for i := 0; i < n; i++ {
			cur += delta[c][i]
			layers[c][i] = cur
		}
	}
	return layers
}
