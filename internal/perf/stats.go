package perf

import (
	"math"
	"slices"
)

// ValueStats are pandas' describe() of a sample, as HTA prints them: the
// count, mean, sample standard deviation (n-1; 0 for fewer than two
// values), minimum, quartiles (linear interpolation between the order
// statistics) and maximum. The field that holds it names the unit.
type ValueStats struct {
	Count int     `json:"count"`
	Mean  float64 `json:"mean"`
	Std   float64 `json:"std"`
	Min   float64 `json:"min"`
	P25   float64 `json:"p25"`
	P50   float64 `json:"p50"`
	P75   float64 `json:"p75"`
	Max   float64 `json:"max"`
}

// DurationStats are ValueStats of durations, in integer nanoseconds
// (rounded).
type DurationStats struct {
	Count  int   `json:"count"`
	MeanNS int64 `json:"mean_ns"`
	StdNS  int64 `json:"std_ns"`
	MinNS  int64 `json:"min_ns"`
	P25NS  int64 `json:"p25_ns"`
	P50NS  int64 `json:"p50_ns"`
	P75NS  int64 `json:"p75_ns"`
	MaxNS  int64 `json:"max_ns"`
	SumNS  int64 `json:"sum_ns"`
}

// describe computes the statistics of v, which it sorts.
func describe(v []float64) ValueStats {
	n := len(v)
	if n == 0 {
		return ValueStats{}
	}
	slices.Sort(v)
	var sum float64
	for _, x := range v {
		sum += x
	}
	mean := sum / float64(n)
	var ss float64
	for _, x := range v {
		d := x - mean
		ss += d * d
	}
	s := ValueStats{Count: n, Mean: mean, Min: v[0], Max: v[n-1], P25: quantile(v, 0.25), P50: quantile(v, 0.5),
		P75: quantile(v, 0.75)}
	if n > 1 {
		s.Std = math.Sqrt(ss / float64(n-1))
	}
	return s
}

// quantile is the q-quantile of sorted v, interpolated linearly (pandas'
// and numpy's default).
func quantile(v []float64, q float64) float64 {
	h := q * float64(len(v)-1)
	lo := int(math.Floor(h))
	if lo+1 >= len(v) {
		return v[len(v)-1]
	}
	return v[lo] + (h-float64(lo))*(v[lo+1]-v[lo])
}

// describeNS computes the statistics of durations v (ns), which it sorts.
func describeNS(v []int64) DurationStats {
	if len(v) == 0 {
		return DurationStats{}
	}
	f := make([]float64, len(v))
	var sum int64
	for i, x := range v {
		f[i] = float64(x)
		sum += x
	}
	s := describe(f)
	r := func(x float64) int64 { return int64(math.Round(x)) }
	return DurationStats{Count: s.Count, MeanNS: r(s.Mean), StdNS: r(s.Std), MinNS: r(s.Min), P25NS: r(s.P25),
		P50NS: r(s.P50), P75NS: r(s.P75), MaxNS: r(s.Max), SumNS: sum}
}

// SeriesPoint is one point of a step function decimated for a chart: the
// lowest and highest value it takes in [TimeNS, the next point's TimeNS).
type SeriesPoint struct {
	TimeNS int64   `json:"time_ns"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

// seriesPoints is the maximum number of points a series keeps.
const seriesPoints = 500

// stepSeries decimates a step function (value v[i] from t[i] on, t sorted)
// into at most seriesPoints buckets of equal time, each with the minimum
// and maximum the function takes there; base is added to the times.
func stepSeries(t []int64, v []float64, base int64) []SeriesPoint {
	if len(t) == 0 {
		return []SeriesPoint{}
	}
	s, e := t[0], t[len(t)-1]
	if len(t) <= seriesPoints || e <= s {
		out := make([]SeriesPoint, 0, len(t))
		for i := range t {
			if n := len(out); n > 0 && out[n-1].TimeNS == base+t[i] {
				out[n-1].Min, out[n-1].Max = min(out[n-1].Min, v[i]), max(out[n-1].Max, v[i])
				continue
			}
			out = append(out, SeriesPoint{base + t[i], v[i], v[i]})
		}
		return out
	}
	bucket := (e - s + seriesPoints - 1) / seriesPoints
	out := make([]SeriesPoint, 0, seriesPoints+1)
	cur := 0.0
	for i := 0; i < len(t); {
		b := (t[i] - s) / bucket
		p := SeriesPoint{TimeNS: base + s + b*bucket, Min: cur, Max: cur}
		if t[i] == s+b*bucket {
			p.Min, p.Max = v[i], v[i]
		}
		for ; i < len(t) && (t[i]-s)/bucket == b; i++ {
			cur = v[i]
			p.Min, p.Max = min(p.Min, cur), max(p.Max, cur)
		}
		out = append(out, p)
	}
	return out
}
