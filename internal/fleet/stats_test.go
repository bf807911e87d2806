package fleet

import (
	"fmt"
	"math"
	"testing"
)

func samples(vs ...float64) []sample {
	s := make([]sample, len(vs))
	for i, v := range vs {
		s[i] = sample{rank: i, v: v}
	}
	return s
}

func TestQuantiles(t *testing.T) {
	xs := make([]float64, 1000)
	for i := range xs {
		xs[i] = float64(i + 1)
	}
	// nearest rank: the 990th smallest of 1,000, the 100th of 100
	if q := quantile(xs, 0.99); q != 990 {
		t.Errorf("p99 of 1..1000 = %v", q)
	}
	if q := quantile(xs[:100], 0.99); q != 99 {
		t.Errorf("p99 of 1..100 = %v", q)
	}
	if q := quantile(xs[:3], 0.99); q != 3 {
		t.Errorf("p99 of 1..3 = %v", q)
	}
	if m := median(xs[:4]); m != 2.5 {
		t.Errorf("median of 1..4 = %v", m)
	}
	if m := median(xs[:5]); m != 3 {
		t.Errorf("median of 1..5 = %v", m)
	}
	if quantile(nil, 0.5) != 0 || median(nil) != 0 {
		t.Error("empty")
	}
}

func TestSpread(t *testing.T) {
	for _, c := range []struct {
		name     string
		vs       []float64
		ratio    bool
		outliers string // rank:dev
		minR     int
		maxR     int
	}{
		// 20 ranks within 1%, one 40% higher, one 30% lower
		{"two outliers", append([]float64{140, 70}, 100, 101, 99, 100, 100.5, 99.5, 100, 101, 99, 100, 100, 100.2, 99.8, 100, 100, 100.1, 99.9, 100, 100.3, 99.7), false,
			"0:+0.40 1:-0.30", 1, 0},
		// equal ranks: no outlier, ties go to the lowest rank
		{"equal", []float64{5, 5, 5, 5}, false, "", 0, 0},
		// MAD 0: anything 5% off the median is an outlier, nothing less
		{"mad zero", []float64{100, 100, 100, 100, 104, 106}, false, "5:+0.06", 0, 5},
		// a spread-out fleet: 3.5 scaled MADs keep the tails in
		{"uniform", []float64{80, 85, 90, 95, 100, 105, 110, 115, 120}, false, "", 0, 8},
		// ratios: differences, not relative deviations
		{"ratios", []float64{0.90, 0.91, 0.90, 0.89, 0.90, 0.50}, true, "5:-0.40", 5, 1},
	} {
		floor := MinSizeDeviation
		if c.ratio {
			floor = MinRatioDifference
		}
		d := spreadOf(samples(c.vs...), c.ratio, floor)
		var got string
		for i, o := range d.outliers {
			if i > 0 {
				got += " "
			}
			got += fmt.Sprintf("%d:%+.2f", o.rank, o.dev)
		}
		if got != c.outliers || d.minRank != c.minR || d.maxRank != c.maxR || d.n != len(c.vs) {
			t.Errorf("%s: outliers %q (want %q), min rank %d (%d), max rank %d (%d)", c.name, got, c.outliers, d.minRank, c.minR, d.maxRank, c.maxR)
		}
	}
	d := spreadOf(nil, false, MinSizeDeviation)
	if d.n != 0 || d.minRank != -1 || d.maxRank != -1 || len(d.outliers) != 0 {
		t.Errorf("empty: %+v", d)
	}
	// a zero median: any non-zero value is infinitely far, kept finite
	d = spreadOf(samples(0, 0, 0, 7), false, MinSizeDeviation)
	if len(d.outliers) != 1 || d.outliers[0].rank != 3 || math.IsInf(d.outliers[0].dev, 0) {
		t.Errorf("zero median: %+v", d.outliers)
	}
}

func TestTypedStats(t *testing.T) {
	s := samples(100, 200, 300, 400, 1000)
	b := bytesStats(s)
	if b.Ranks != 5 || b.MinBytes != 100 || b.MedianBytes != 300 || b.P99Bytes != 1000 || b.MaxBytes != 1000 || b.MeanBytes != 400 ||
		b.MinRank != 0 || b.MaxRank != 4 || len(b.Outliers) != 1 || b.Outliers[0].ValueBytes != 1000 || b.Outliers[0].DeviationRatio < 2.3 {
		t.Errorf("bytes %+v", b)
	}
	d := durationStats(s)
	if d.MedianNS != 300 || d.MaxNS != 1000 || len(d.Outliers) != 1 {
		t.Errorf("durations %+v", d)
	}
	// durations: 3% off a flat fleet is an outlier, not for sizes
	flat := samples(100, 100, 100, 100, 103)
	if len(durationStats(flat).Outliers) != 1 || len(bytesStats(flat).Outliers) != 0 {
		t.Errorf("floors: %+v %+v", durationStats(flat), bytesStats(flat))
	}
	r := ratioStats(samples(0.5, 0.5, 0.5, 0.9))
	if r.MedianRatio != 0.5 || r.MaxRatio != 0.9 || len(r.Outliers) != 1 || math.Abs(r.Outliers[0].DifferenceRatio-0.4) > 1e-12 {
		t.Errorf("ratios %+v", r)
	}
	if e := bytesStats(nil); e.Outliers == nil || e.MinRank != -1 {
		t.Errorf("empty bytes: %+v", e)
	}
}
