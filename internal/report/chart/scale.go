package chart

import (
	"math"
	"strconv"

	"github.com/ptscope/ptscope/internal/units"
)

// axis is one plotted dimension: the data range it shows and its ticks.
type axis struct {
	min, max float64
	ticks    []float64
	labels   []string
}

// pos maps v in data space to [a, b] in pixel space.
func (ax axis) pos(v, a, b float64) float64 {
	if ax.max == ax.min {
		return (a + b) / 2
	}
	return a + (v-ax.min)/(ax.max-ax.min)*(b-a)
}

// unitScale is the display unit chosen for an axis: values are divided by div
// and shown with suffix.
type unitScale struct {
	div    float64
	suffix string // including any leading space
	minDiv float64
}

// scaleFor picks the display unit for values up to absMax.
func scaleFor(u Unit, absMax float64) unitScale {
	switch u {
	case UnitBytes:
		steps := []struct {
			d float64
			s string
		}{{1 << 50, " PiB"}, {1 << 40, " TiB"}, {1 << 30, " GiB"}, {1 << 20, " MiB"}, {1 << 10, " KiB"}}
		for _, st := range steps {
			if absMax >= st.d {
				return unitScale{div: st.d, suffix: st.s}
			}
		}
		return unitScale{div: 1, suffix: " B", minDiv: 1}
	case UnitDuration:
		switch {
		case absMax >= 1e9:
			return unitScale{div: 1e9, suffix: " s"}
		case absMax >= 1e6:
			return unitScale{div: 1e6, suffix: " ms"}
		case absMax >= 1e3:
			return unitScale{div: 1e3, suffix: " us"}
		}
		return unitScale{div: 1, suffix: " ns", minDiv: 1}
	case UnitPercent:
		return unitScale{div: 0.01, suffix: "%"}
	}
	switch {
	case absMax >= 1e12:
		return unitScale{div: 1e12, suffix: "T"}
	case absMax >= 1e9:
		return unitScale{div: 1e9, suffix: "G"}
	case absMax >= 1e6:
		return unitScale{div: 1e6, suffix: "M"}
	case absMax >= 1e4:
		return unitScale{div: 1e3, suffix: "k"}
	}
	return unitScale{div: 1}
}

// niceStep returns a step of 1, 2, 2.5 or 5 times a power of ten that splits
// span into about target intervals.
func niceStep(span float64, target int) float64 {
	if target < 1 {
		target = 1
	}
	if !(span > 0) || math.IsInf(span, 0) {
		return 1
	}
	raw := span / float64(target)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 2.5, 5} {
		if raw <= m*mag*1.0000001 {
			return m * mag
		}
	}
	return 10 * mag
}

// decimals returns how many decimals print every multiple of step exactly.
func decimals(step float64) int {
	for d := 0; d < 9; d++ {
		v := step * math.Pow(10, float64(d))
		if math.Abs(v-math.Round(v)) < 1e-6*math.Max(1, math.Abs(v)) {
			return d
		}
	}
	return 9
}

// newAxis lays out ticks for data in [lo, hi] in unit u with about target
// intervals. With extend the axis range grows to the outer ticks (value
// axes); without it the range stays [lo, hi] (X axes).
func newAxis(lo, hi float64, u Unit, target int, extend bool) axis {
	if math.IsNaN(lo) || math.IsNaN(hi) || math.IsInf(lo, 0) || math.IsInf(hi, 0) {
		lo, hi = 0, 1
	}
	if lo > hi {
		lo, hi = hi, lo
	}
	if lo == hi {
		d := math.Abs(lo) * 0.1
		if d == 0 {
			d = 1
		}
		if lo >= 0 && lo-d < 0 {
			lo, hi = 0, hi+d
		} else {
			lo, hi = lo-d, hi+d
		}
	}
	us := scaleFor(u, math.Max(math.Abs(lo), math.Abs(hi)))
	slo, shi := lo/us.div, hi/us.div
	step := niceStep(shi-slo, target)
	if us.minDiv > 0 && step < us.minDiv {
		step = us.minDiv
	}
	if extend {
		slo = math.Floor(slo/step+1e-9) * step
		shi = math.Ceil(shi/step-1e-9) * step
		lo, hi = slo*us.div, shi*us.div
	}
	dec := decimals(step)
	ax := axis{min: lo, max: hi}
	first := math.Ceil(slo/step - 1e-9)
	last := math.Floor(shi/step + 1e-9)
	for k := first; k <= last && len(ax.ticks) < 200; k++ {
		v := k * step
		ax.ticks = append(ax.ticks, v*us.div)
		ax.labels = append(ax.labels, tickLabel(v, dec, us.suffix))
	}
	return ax
}

func tickLabel(v float64, dec int, suffix string) string {
	if math.Abs(v) < 1e-12 {
		return "0"
	}
	return strconv.FormatFloat(v, 'f', dec, 64) + suffix
}

// valueLabel formats one value for a label (bar totals, markers).
func valueLabel(u Unit, v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "n/a"
	}
	switch u {
	case UnitBytes:
		return units.Bytes(int64(math.Round(v)))
	case UnitDuration:
		return units.Duration(int64(math.Round(v)))
	case UnitPercent:
		return units.Percent(v)
	}
	a := math.Abs(v)
	if a < 1e4 {
		if v == math.Trunc(v) {
			return strconv.FormatFloat(v, 'f', 0, 64)
		}
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
	us := scaleFor(UnitPlain, a)
	s := v / us.div
	switch d := math.Abs(s); {
	case d < 10:
		return strconv.FormatFloat(s, 'f', 2, 64) + us.suffix
	case d < 100:
		return strconv.FormatFloat(s, 'f', 1, 64) + us.suffix
	}
	return strconv.FormatFloat(s, 'f', 0, 64) + us.suffix
}
