package estimate

import (
	"fmt"
	"strconv"
	"strings"
)

// SweepAxis is one setup field and the values to try.
type SweepAxis struct {
	Name   string `json:"name"`
	Values []int  `json:"values"`
}

// SweepRow is one point of a sweep.
type SweepRow struct {
	Values             []int          `json:"-"`
	ValueMap           map[string]int `json:"values"`
	PeakAllocatedBytes int64          `json:"peak_allocated_bytes"`
	PeakReservedBytes  int64          `json:"peak_reserved_bytes"`
	DeviceTotalBytes   int64          `json:"device_total_bytes"`
	Fits               bool           `json:"fits"`
	Error              string         `json:"error,omitempty"`
}

// sweepFields maps axis names to the Setup field they set.
var sweepFields = map[string]func(*Setup, int){
	"micro-batch": func(s *Setup, v int) { s.MicroBatch = v },
	"seq":         func(s *Setup, v int) { s.Seq = v },
	"grad-accum":  func(s *Setup, v int) { s.GradAccum = v; s.MicroBatches = 0 },
	"dp":          func(s *Setup, v int) { s.DP = v },
	"tp":          func(s *Setup, v int) { s.TP = v },
	"pp":          func(s *Setup, v int) { s.PP = v },
	"vpp":         func(s *Setup, v int) { s.VPP = v },
	"cp":          func(s *Setup, v int) { s.CP = v },
	"ep":          func(s *Setup, v int) { s.EP = v },
	"zero":        func(s *Setup, v int) { s.Zero = v },
}

// ParseSweepAxis parses "micro-batch=1..64" (powers of two from 1 to 64) or "seq=512,1024,2048".
func ParseSweepAxis(spec string) (SweepAxis, error) {
	name, vals, ok := strings.Cut(spec, "=")
	name = strings.ReplaceAll(strings.TrimSpace(strings.ToLower(name)), "_", "-")
	if !ok || vals == "" {
		return SweepAxis{}, fmt.Errorf("sweep %q: want NAME=A..B or a list NAME=V1,V2", spec)
	}
	if _, known := sweepFields[name]; !known {
		return SweepAxis{}, fmt.Errorf("sweep %q: unknown axis %q (have micro-batch, seq, grad-accum, dp, tp, pp, vpp, cp, ep, zero)", spec, name)
	}
	ax := SweepAxis{Name: name}
	if lo, hi, isRange := strings.Cut(vals, ".."); isRange {
		a, err1 := strconv.Atoi(strings.TrimSpace(lo))
		b, err2 := strconv.Atoi(strings.TrimSpace(hi))
		if err1 != nil || err2 != nil || a < 0 || b < a || b > 1<<30 {
			return SweepAxis{}, fmt.Errorf("sweep %q: bad range", spec)
		}
		for v := a; v <= b; {
			ax.Values = append(ax.Values, v)
			if v == 0 {
				v = 1
			} else {
				v *= 2
			}
		}
		if ax.Values[len(ax.Values)-1] != b {
			ax.Values = append(ax.Values, b)
		}
	} else {
		for _, f := range strings.Split(vals, ",") {
			v, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || v < 0 {
				return SweepAxis{}, fmt.Errorf("sweep %q: bad value %q", spec, f)
			}
			ax.Values = append(ax.Values, v)
		}
	}
	if len(ax.Values) > 4096 {
		return SweepAxis{}, fmt.Errorf("sweep %q: too many values", spec)
	}
	return ax, nil
}

// Sweep estimates every combination of the axes (at most 100000). Best is the index of the
// largest fitting row (most tokens per micro-batch, then the later rows), or -1.
func Sweep(m Model, base Setup, dev Device, axes []SweepAxis) (rows []SweepRow, best int, err error) {
	n := 1
	for _, a := range axes {
		n *= len(a.Values)
		if n > 100000 {
			return nil, -1, fmt.Errorf("sweep has more than 100000 points")
		}
	}
	best = -1
	idx := make([]int, len(axes))
	for i := 0; i < n; i++ {
		s := base
		row := SweepRow{ValueMap: map[string]int{}}
		for j, a := range axes {
			v := a.Values[idx[j]]
			sweepFields[a.Name](&s, v)
			row.Values = append(row.Values, v)
			row.ValueMap[a.Name] = v
		}
		r, e := Estimate(m, s, dev)
		if e != nil {
			row.Error = e.Error()
		} else {
			t := r.TopRank()
			row.PeakAllocatedBytes, row.PeakReservedBytes, row.DeviceTotalBytes = t.PeakAllocatedBytes, t.PeakReservedBytes, t.DeviceTotalBytes
			row.Fits, _ = r.Fits()
			if row.Fits && (best < 0 || tokens(s) >= tokens(setupOf(base, axes, rows[best].Values))) {
				best = len(rows)
			}
		}
		rows = append(rows, row)
		for j := len(axes) - 1; j >= 0; j-- { // odometer, last axis fastest
			idx[j]++
			if idx[j] < len(axes[j].Values) {
				break
			}
			idx[j] = 0
		}
	}
	return rows, best, nil
}

func setupOf(base Setup, axes []SweepAxis, vals []int) Setup {
	s := base
	for j, a := range axes {
		sweepFields[a.Name](&s, vals[j])
	}
	return s
}

func tokens(s Setup) int64 {
	return int64(max(s.MicroBatch, 1)) * int64(s.Seq) * int64(max(s.GradAccum, 1))
}
