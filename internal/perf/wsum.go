package perf

import (
	"math"
	"math/bits"
)

// wsum is an exact sum of non-negative products value × duration (kernel
// time weighted by blocks per SM or by occupancy): each value is rounded
// once to a multiple of 2^-32 and the products are summed as 128-bit
// integers, so that the sum does not depend on the order of its terms, and
// the windows of a streamed trace add up to exactly the whole trace's sum.
type wsum struct{ hi, lo uint64 }

const fixOne = 1 << 32 // 1.0 in the fixed point of wsum and smEdge

// fixed rounds v ≥ 0 to the fixed point (values are capped at 2^31).
func fixed(v float64) uint64 {
	if !(v > 0) {
		return 0
	}
	return uint64(math.Round(min(v, 1<<31) * fixOne))
}

// add adds q × d, q in fixed point and d ≥ 0.
func (s *wsum) add(q uint64, d int64) {
	if d <= 0 || q == 0 {
		return
	}
	h, l := bits.Mul64(q, uint64(d))
	var c uint64
	s.lo, c = bits.Add64(s.lo, l, 0)
	s.hi += h + c
}

func (s *wsum) merge(o wsum) {
	var c uint64
	s.lo, c = bits.Add64(s.lo, o.lo, 0)
	s.hi += o.hi + c
}

// value is the sum as a float.
func (s wsum) value() float64 {
	return (float64(s.hi)*(1<<64) + float64(s.lo)) / fixOne
}
