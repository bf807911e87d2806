package perf

// maxRuns is the most ascending runs sortRuns merges; a list in more
// pieces goes to the fallback sort.
const maxRuns = 1 << 10

// sortRuns sorts list by cmp, stably: lists in a trace often come in few
// ascending runs (a thread's host events: Kineto writes ops, then runtime
// calls, each in time order, copy after copy of the profiled steps; memory
// events), which a bottom-up merge of the runs sorts in a few linear
// passes where a comparison sort takes n log n comparisons. A list in more
// than maxRuns runs is sorted by fallback, which must give the same order
// (a stable sort, or any sort when cmp is a total order).
func sortRuns[T any](list []T, cmp func(a, b T) int, fallback func([]T, func(a, b T) int)) {
	if len(list) < 2 {
		return
	}
	bounds := []int{0} // the starts of the runs, then len(list)
	for j := 1; j < len(list); j++ {
		if cmp(list[j-1], list[j]) > 0 {
			if len(bounds) == maxRuns {
				fallback(list, cmp)
				return
			}
			bounds = append(bounds, j)
		}
	}
	if len(bounds) == 1 {
		return
	}
	bounds = append(bounds, len(list))
	src, dst := list, make([]T, len(list))
	for len(bounds) > 2 {
		next := bounds[:0:0]
		for k := 0; k+1 < len(bounds); k += 2 {
			lo, mid := bounds[k], bounds[k+1]
			next = append(next, lo)
			if k+2 == len(bounds) { // an odd run out: carried over
				copy(dst[lo:mid], src[lo:mid])
				continue
			}
			hi := bounds[k+2]
			mergeRuns(dst[lo:hi], src[lo:mid], src[mid:hi], cmp)
		}
		bounds = append(next, len(list))
		src, dst = dst, src
	}
	if &src[0] != &list[0] {
		copy(list, src)
	}
}

// mergeRuns merges the sorted a and b into out (len(a)+len(b)); a's
// elements go first among equal ones.
func mergeRuns[T any](out, a, b []T, cmp func(a, b T) int) {
	i, j, k := 0, 0, 0
	for i < len(a) && j < len(b) {
		if cmp(b[j], a[i]) < 0 {
			out[k] = b[j]
			j++
		} else {
			out[k] = a[i]
			i++
		}
		k++
	}
	k += copy(out[k:], a[i:])
	copy(out[k:], b[j:])
}
