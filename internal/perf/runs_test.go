package perf

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSortRuns checks the run merge against pdqsort with a total order
// (value, then index), and against a stable sort by value alone, on lists
// in few runs, many runs and none.
func TestSortRuns(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	const n = 5000
	keys := make([]int64, n)
	byKey := func(a, b int32) int {
		if c := cmp.Compare(keys[a], keys[b]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	}
	layouts := map[string]func(i int) int64{
		"sorted":   func(i int) int64 { return int64(i) },
		"runs3":    func(i int) int64 { return int64(i%(n/3+1)) * 2 },
		"runs100":  func(i int) int64 { return int64(i % 50 * 7) },
		"random":   func(int) int64 { return rng.Int64N(100) }, // over maxRuns runs
		"reversed": func(i int) int64 { return int64(n - i) },
		"equal":    func(int) int64 { return 1 },
	}
	for name, f := range layouts {
		for i := range keys {
			keys[i] = f(i)
		}
		for _, size := range []int{0, 1, 2, 17, n} {
			list := make([]int32, size)
			for i := range list {
				list[i] = int32(i)
			}
			rng.Shuffle(min(size, 3), func(i, j int) { list[i], list[j] = list[j], list[i] })
			want := slices.Clone(list)
			slices.SortFunc(want, byKey)
			sortRuns(list, byKey, slices.SortFunc)
			if !slices.Equal(list, want) {
				t.Errorf("%s, %d: not sorted as pdqsort sorts", name, size)
			}
			// by key alone, equal keys in several runs: as a stable sort
			keyOnly := func(a, b int32) int { return cmp.Compare(keys[a], keys[b]) }
			list2 := make([]int32, size)
			for i := range list2 {
				list2[i] = int32(i)
			}
			want2 := slices.Clone(list2)
			slices.SortStableFunc(want2, keyOnly)
			sortRuns(list2, keyOnly, slices.SortStableFunc)
			if !slices.Equal(list2, want2) {
				t.Errorf("%s, %d: not sorted as a stable sort sorts", name, size)
			}
		}
	}
}
