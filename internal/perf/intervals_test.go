package perf

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSortStarts checks the radix sort against a comparison sort on lists
// long enough to take it: random starts over narrow, trace-like and full
// int64 ranges, already sorted and reversed lists, and equal starts.
func TestSortStarts(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	gen := func(n int, f func(i int) int64) spans {
		v := make(spans, n)
		for i := range v {
			v[i] = span{f(i), int64(i)}
		}
		return v
	}
	n := 3 * radixMin
	cases := map[string]spans{
		"short":     gen(100, func(int) int64 { return rng.Int64N(1000) }),
		"narrow":    gen(n, func(int) int64 { return rng.Int64N(1 << 10) }),
		"trace":     gen(n, func(int) int64 { return 1_700_000_000_000_000_000 + rng.Int64N(60e9) }),
		"negative":  gen(n, func(int) int64 { return rng.Int64N(1<<40) - 1<<39 }),
		"full":      gen(n, func(int) int64 { return int64(rng.Uint64()) }),
		"extremes":  gen(n, func(i int) int64 { return []int64{math.MinInt64, math.MaxInt64, 0, -1}[i%4] }),
		"sorted":    gen(n, func(i int) int64 { return int64(i) * 7 }),
		"reversed":  gen(n, func(i int) int64 { return int64(n-i) * 1000 }),
		"equal":     gen(n, func(int) int64 { return 42 }),
		"two_level": gen(n, func(i int) int64 { return int64(i%3) << 50 }),
	}
	for name, v := range cases {
		t.Run(name, func(t *testing.T) {
			want := slices.Clone(v)
			slices.SortStableFunc(want, func(a, b span) int { return cmp.Compare(a.S, b.S) })
			got := slices.Clone(v)
			sortStarts(got)
			for i := range got {
				if got[i].S != want[i].S {
					t.Fatalf("at %d: start %d, want %d", i, got[i].S, want[i].S)
				}
			}
			// the same spans, each once (ends are the original indexes)
			seen := make([]bool, len(v))
			for _, x := range got {
				if seen[x.E] {
					t.Fatalf("span %d twice", x.E)
				}
				seen[x.E] = true
			}
		})
	}
}

// TestUnionOrderFree checks that union gives the same list whatever the
// order of equal starts, empty and negative spans included: sortStarts
// relies on it.
func TestUnionOrderFree(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for round := 0; round < 200; round++ {
		v := make(spans, 1+rng.IntN(40))
		for i := range v {
			s := rng.Int64N(20)
			v[i] = span{s, s + rng.Int64N(8) - 2}
		}
		want := union(slices.Clone(v))
		for k := 0; k < 5; k++ {
			w := slices.Clone(v)
			rng.Shuffle(len(w), func(i, j int) { w[i], w[j] = w[j], w[i] })
			if got := union(w); !slices.Equal(got, want) {
				t.Fatalf("%v: union %v, shuffled %v", v, want, got)
			}
		}
	}
}

// BenchmarkSortStarts sorts 783k spans, as many as the CPU role of the
// 361.6 MB generated trace holds, in 1, 2, 8, 16, 109 (that list's) and
// 10000 ascending runs.
func BenchmarkSortStarts(b *testing.B) {
	const n = 783_540
	for _, runs := range []int{1, 2, 8, 16, 109, 10_000} {
		b.Run(fmt.Sprintf("runs=%d", runs), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(7, 8))
			v := make(spans, n)
			per := n / runs
			for i := range v {
				s := int64(i%per)*60e9/int64(per) + rng.Int64N(1000)
				v[i] = span{s, s + 1000}
			}
			for r := 0; r < runs; r++ { // each run ascending
				sortStartsRef(v[r*per : min((r+1)*per, n)])
			}
			w := make(spans, n)
			b.SetBytes(n * 16)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				copy(w, v)
				sortStarts(w)
			}
		})
	}
}

func sortStartsRef(v spans) { slices.SortFunc(v, func(a, b span) int { return cmp.Compare(a.S, b.S) }) }
