package memory

import "github.com/ptscope/ptscope/internal/spillmem"

// CategoryTimeline returns allocated bytes per category at up to n evenly
// spaced entries (xs are entry indices; layers[c][i] is category c's bytes
// just after entry xs[i]). Allocations made before recording count from the
// start.
func (r *Replay) CategoryTimeline(n int) (xs []int, layers [numCategories][]int64) {
	total := r.Timeline.Len()
	if total == 0 || n <= 0 {
		return nil, layers
	}
	if n > total {
		n = total
	}
	xs = make([]int, n)
	for i := range xs {
		xs[i] = i * (total - 1) / max(n-1, 1)
	}
	return xs, r.categoriesAt(xs)
}

// PeakBetween returns the highest allocated bytes over entries whose time is
// in [fromUS, toUS], and whether any entry fell in the range.
func (r *Replay) PeakBetween(fromUS, toUS int64) (int64, bool) {
	t := &r.Timeline
	var best int64
	found := false
	for i, us := range t.TimeUS {
		spillmem.Poll(r.arena, i)
		if us >= fromUS && us <= toUS {
			if !found || t.Allocated[i] > best {
				best = t.Allocated[i]
			}
			found = true
		}
	}
	return best, found
}
