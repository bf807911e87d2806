package timeline

// pyramidBase is how many raw points the first level of a Pyramid
// aggregates: queries scan at most 2*pyramidBase raw points at their ends,
// and the pyramid costs a sixteenth of the curve in memory.
const pyramidBase = 16

// Pyramid answers min/max queries over any range of a curve in O(log n):
// level 0 holds the min and max of every pyramidBase raw points, each next
// level the min and max of two points of the one below (Perfetto's counter
// mipmaps, as an implicit segment tree).
type Pyramid struct {
	raw      []int64
	min, max [][]int64
}

// NewPyramid indexes v, which it keeps and must not change afterwards.
func NewPyramid(v []int64) *Pyramid {
	p := &Pyramid{raw: v}
	n := (len(v) + pyramidBase - 1) / pyramidBase
	if n == 0 {
		return p
	}
	mn, mx := make([]int64, n), make([]int64, n)
	for i := 0; i < n; i++ {
		lo, hi := i*pyramidBase, min((i+1)*pyramidBase, len(v))
		a, b := v[lo], v[lo]
		for _, x := range v[lo+1 : hi] {
			a, b = min(a, x), max(b, x)
		}
		mn[i], mx[i] = a, b
	}
	p.min, p.max = append(p.min, mn), append(p.max, mx)
	for len(mn) > 1 {
		k := (len(mn) + 1) / 2
		nmn, nmx := make([]int64, k), make([]int64, k)
		for j := 0; j < k; j++ {
			a, b := mn[2*j], mx[2*j]
			if 2*j+1 < len(mn) {
				a, b = min(a, mn[2*j+1]), max(b, mx[2*j+1])
			}
			nmn[j], nmx[j] = a, b
		}
		mn, mx = nmn, nmx
		p.min, p.max = append(p.min, mn), append(p.max, mx)
	}
	return p
}

// Len is the number of points.
func (p *Pyramid) Len() int { return len(p.raw) }

// MinMax returns the smallest and largest points in [lo, hi), which must be
// a non-empty range within the curve.
func (p *Pyramid) MinMax(lo, hi int) (int64, int64) {
	mn, mx := p.raw[lo], p.raw[lo]
	// raw points up to the first whole base block, and after the last
	bl, bh := (lo+pyramidBase-1)/pyramidBase, hi/pyramidBase
	if bl >= bh {
		for _, x := range p.raw[lo:hi] {
			mn, mx = min(mn, x), max(mx, x)
		}
		return mn, mx
	}
	for _, x := range p.raw[lo : bl*pyramidBase] {
		mn, mx = min(mn, x), max(mx, x)
	}
	for _, x := range p.raw[bh*pyramidBase : hi] {
		mn, mx = min(mn, x), max(mx, x)
	}
	for l := 0; bl < bh; l++ {
		if bl&1 == 1 {
			mn, mx = min(mn, p.min[l][bl]), max(mx, p.max[l][bl])
			bl++
		}
		if bh&1 == 1 {
			bh--
			mn, mx = min(mn, p.min[l][bh]), max(mx, p.max[l][bh])
		}
		bl >>= 1
		bh >>= 1
	}
	return mn, mx
}
