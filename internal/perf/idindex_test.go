package perf

import (
	"math"
	"testing"
)

// TestIDIndex checks both forms of the index (a table for dense ids, a
// map for sparse ones) against a map: the first or the last event of an
// id wins, as asked, and absent ids are absent.
func TestIDIndex(t *testing.T) {
	cases := map[string][]int64{
		"dense":    {5, 6, 7, 5, 9, 8, 6, 12},
		"sparse":   {1, 1 << 40, 3, 1 << 40, 77},
		"extremes": {0, math.MaxInt64, 0, math.MaxInt64 - 1},
		"one":      {42, 42},
	}
	for name, ids := range cases {
		for _, first := range []bool{true, false} {
			var r idRange
			for _, id := range ids {
				r.add(id)
			}
			x := newIDIndex(r)
			want := map[int64]int32{}
			for i, id := range ids {
				x.set(id, int32(i), first)
				if _, dup := want[id]; !(first && dup) {
					want[id] = int32(i)
				}
			}
			if dense := x.m == nil; dense != (name == "dense" || name == "one") {
				t.Errorf("%s: table %v", name, dense)
			}
			for id, w := range want {
				if got, ok := x.get(id); !ok || got != w {
					t.Errorf("%s first=%v: id %d gives %d %v, want %d", name, first, id, got, ok, w)
				}
			}
			for _, id := range []int64{-1, 2, 4, 10, 13, 1 << 41, math.MinInt64} {
				if _, ok := want[id]; ok {
					continue
				}
				if got, ok := x.get(id); ok {
					t.Errorf("%s: absent id %d gives %d", name, id, got)
				}
			}
		}
	}
}
