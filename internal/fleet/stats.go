package fleet

import (
	"math"
	"sort"
)

// An outlier is a rank whose value lies more than OutlierMADs scaled median
// absolute deviations (1.4826 MAD estimates the standard deviation of normal
// data; 3.5 is Iglewicz and Hoaglin's cut-off for the modified z-score) from
// the median of the ranks, and at least a floor away from it, so that a
// fleet of nearly equal ranks has none: MinSizeDeviation of the median for
// sizes, MinTimeDeviation for durations (lower: in synchronous training
// every rank waits for the slowest, so a few percent costs the whole job),
// MinRatioDifference (an absolute difference) for ratios. With a MAD of
// zero (most ranks equal) the floor alone decides.
const (
	OutlierMADs        = 3.5
	MinSizeDeviation   = 0.05
	MinTimeDeviation   = 0.02
	MinRatioDifference = 0.05
)

// sample is one rank's value of a metric.
type sample struct {
	rank int
	v    float64
}

// spread is the distribution of a metric over ranks, in the metric's unit.
type spread struct {
	n                     int
	min, median, p99, max float64
	mean                  float64
	minRank, maxRank      int
	// outliers, largest deviation first; dev is v/median-1, or v-median
	// for ratios
	outliers []outlier
}

type outlier struct {
	rank   int
	v, dev float64
}

// quantile is the nearest-rank quantile q of sorted xs: the smallest value
// with at least q of the values at or below it (p99 of 1,000 ranks is the
// 990th smallest).
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	k := int(math.Ceil(q*float64(len(xs)))) - 1
	return xs[min(max(k, 0), len(xs)-1)]
}

// median of sorted xs: the middle value, or the mean of the two middle ones.
func median(xs []float64) float64 {
	n := len(xs)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}

// spreadOf computes the distribution of samples; ratio says the values are
// ratios in 0..1, whose deviations are differences rather than relative;
// floor is the least deviation of an outlier. Ties for the minimum and
// maximum go to the lowest rank.
func spreadOf(s []sample, ratio bool, floor float64) spread {
	var d spread
	d.n = len(s)
	if d.n == 0 {
		d.minRank, d.maxRank = -1, -1
		return d
	}
	xs := make([]float64, len(s))
	sum := 0.0
	d.minRank, d.maxRank = s[0].rank, s[0].rank
	d.min, d.max = s[0].v, s[0].v
	for i, x := range s {
		xs[i] = x.v
		sum += x.v
		if x.v < d.min || (x.v == d.min && x.rank < d.minRank) {
			d.min, d.minRank = x.v, x.rank
		}
		if x.v > d.max || (x.v == d.max && x.rank < d.maxRank) {
			d.max, d.maxRank = x.v, x.rank
		}
	}
	sort.Float64s(xs)
	d.median = median(xs)
	d.p99 = quantile(xs, 0.99)
	d.mean = sum / float64(len(xs))
	dev := make([]float64, len(xs))
	for i, x := range xs {
		dev[i] = math.Abs(x - d.median)
	}
	sort.Float64s(dev)
	mad := median(dev) * 1.4826
	for _, x := range s {
		diff := x.v - d.median
		var rel float64
		switch {
		case ratio:
			rel = diff
		case d.median != 0:
			rel = diff / math.Abs(d.median)
		case diff != 0:
			rel = math.Inf(1)
		}
		if math.Abs(rel) < floor || (mad > 0 && math.Abs(diff) <= OutlierMADs*mad) {
			continue
		}
		if math.IsInf(rel, 0) {
			rel = math.MaxFloat64
		}
		d.outliers = append(d.outliers, outlier{rank: x.rank, v: x.v, dev: rel})
	}
	sort.SliceStable(d.outliers, func(i, j int) bool {
		a, b := math.Abs(d.outliers[i].dev), math.Abs(d.outliers[j].dev)
		if a != b {
			return a > b
		}
		return d.outliers[i].rank < d.outliers[j].rank
	})
	return d
}

// BytesStats is the distribution of a size over ranks.
type BytesStats struct {
	Ranks       int   `json:"ranks"` // ranks with a value
	MinBytes    int64 `json:"min_bytes"`
	MedianBytes int64 `json:"median_bytes"`
	P99Bytes    int64 `json:"p99_bytes"` // nearest rank: the value 99% of the ranks are at or below
	MaxBytes    int64 `json:"max_bytes"`
	MeanBytes   int64 `json:"mean_bytes"`
	MinRank     int   `json:"min_rank"` // -1 with no ranks
	MaxRank     int   `json:"max_rank"`
	// Outliers are the ranks far from the median (package doc of
	// OutlierMADs), largest deviation first.
	Outliers []BytesOutlier `json:"outliers"`
}

// BytesOutlier is a rank whose size stands out.
type BytesOutlier struct {
	Rank           int     `json:"rank"`
	ValueBytes     int64   `json:"value_bytes"`
	DeviationRatio float64 `json:"deviation_ratio"` // value / median - 1
}

// DurationStats is the distribution of a duration over ranks.
type DurationStats struct {
	Ranks    int               `json:"ranks"`
	MinNS    int64             `json:"min_ns"`
	MedianNS int64             `json:"median_ns"`
	P99NS    int64             `json:"p99_ns"`
	MaxNS    int64             `json:"max_ns"`
	MeanNS   int64             `json:"mean_ns"`
	MinRank  int               `json:"min_rank"`
	MaxRank  int               `json:"max_rank"`
	Outliers []DurationOutlier `json:"outliers"`
}

// DurationOutlier is a rank whose duration stands out.
type DurationOutlier struct {
	Rank           int     `json:"rank"`
	ValueNS        int64   `json:"value_ns"`
	DeviationRatio float64 `json:"deviation_ratio"` // value / median - 1
}

// RatioStats is the distribution of a ratio over ranks.
type RatioStats struct {
	Ranks       int            `json:"ranks"`
	MinRatio    float64        `json:"min_ratio"`
	MedianRatio float64        `json:"median_ratio"`
	P99Ratio    float64        `json:"p99_ratio"`
	MaxRatio    float64        `json:"max_ratio"`
	MeanRatio   float64        `json:"mean_ratio"`
	MinRank     int            `json:"min_rank"`
	MaxRank     int            `json:"max_rank"`
	Outliers    []RatioOutlier `json:"outliers"`
}

// RatioOutlier is a rank whose ratio stands out.
type RatioOutlier struct {
	Rank            int     `json:"rank"`
	ValueRatio      float64 `json:"value_ratio"`
	DifferenceRatio float64 `json:"difference_ratio"` // value - median
}

func bytesStats(s []sample) BytesStats {
	d := spreadOf(s, false, MinSizeDeviation)
	out := BytesStats{Ranks: d.n, MinBytes: int64(d.min), MedianBytes: int64(math.Round(d.median)), P99Bytes: int64(d.p99),
		MaxBytes: int64(d.max), MeanBytes: int64(math.Round(d.mean)), MinRank: d.minRank, MaxRank: d.maxRank, Outliers: []BytesOutlier{}}
	for _, o := range d.outliers {
		out.Outliers = append(out.Outliers, BytesOutlier{Rank: o.rank, ValueBytes: int64(o.v), DeviationRatio: o.dev})
	}
	return out
}

func durationStats(s []sample) DurationStats {
	d := spreadOf(s, false, MinTimeDeviation)
	out := DurationStats{Ranks: d.n, MinNS: int64(d.min), MedianNS: int64(math.Round(d.median)), P99NS: int64(d.p99),
		MaxNS: int64(d.max), MeanNS: int64(math.Round(d.mean)), MinRank: d.minRank, MaxRank: d.maxRank, Outliers: []DurationOutlier{}}
	for _, o := range d.outliers {
		out.Outliers = append(out.Outliers, DurationOutlier{Rank: o.rank, ValueNS: int64(o.v), DeviationRatio: o.dev})
	}
	return out
}

func ratioStats(s []sample) RatioStats {
	d := spreadOf(s, true, MinRatioDifference)
	out := RatioStats{Ranks: d.n, MinRatio: d.min, MedianRatio: d.median, P99Ratio: d.p99, MaxRatio: d.max, MeanRatio: d.mean,
		MinRank: d.minRank, MaxRank: d.maxRank, Outliers: []RatioOutlier{}}
	for _, o := range d.outliers {
		out.Outliers = append(out.Outliers, RatioOutlier{Rank: o.rank, ValueRatio: o.v, DifferenceRatio: o.dev})
	}
	return out
}
