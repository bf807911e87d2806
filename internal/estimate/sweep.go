package estimate

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/ptscope/ptscope/internal/envelope"
)

// SweepAxis is one setup field (or the model) and the values to try, as text.
type SweepAxis struct {
	Name   string   `json:"name"`
	Values []string `json:"values"`
}

// SweepRow is one point of a sweep: the model, the values of the axes and
// the most loaded rank's outcome (or why the point is not a valid setup).
type SweepRow struct {
	Model  string         `json:"model"`
	Params int64          `json:"params"`
	Values map[string]any `json:"values"` // axis name -> value (numbers for numeric axes)
	Setup  Setup          `json:"setup"`
	Summary
	Error string `json:"error,omitempty"`
}

// SweepResult is the document of `ptscope estimate --sweep`.
type SweepResult struct {
	envelope.Header
	Device Device      `json:"device"`
	Axes   []SweepAxis `json:"axes"`
	Rows   []SweepRow  `json:"rows"`
	// Best holds, per model (in the order of the model axis), the index of
	// its fitting row with the most tokens per optimizer step (micro-batch x
	// seq x grad-accum; the later row on ties); models with no fitting row
	// (or no device memory known) have none.
	Best []int `json:"best"`
}

// sweepAxis sets one setup field from a value's text.
type sweepAxis struct {
	numeric bool
	set     func(*Setup, string) error
}

func intField(f func(*Setup, int)) sweepAxis {
	return sweepAxis{numeric: true, set: func(s *Setup, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("want an integer, got %q", v)
		}
		f(s, n)
		return nil
	}}
}

// sweepFields maps axis names (the flags' names) to the Setup field they set.
var sweepFields = map[string]sweepAxis{
	"model":       {}, // handled by Sweep: values are the models' names
	"micro-batch": intField(func(s *Setup, v int) { s.MicroBatch = v }),
	"seq":         intField(func(s *Setup, v int) { s.Seq = v }),
	"grad-accum":  intField(func(s *Setup, v int) { s.GradAccum = v; s.MicroBatches = 0 }),
	"dp":          intField(func(s *Setup, v int) { s.DP = v }),
	"tp":          intField(func(s *Setup, v int) { s.TP = v }),
	"pp":          intField(func(s *Setup, v int) { s.PP = v }),
	"vpp":         intField(func(s *Setup, v int) { s.VPP = v }),
	"cp":          intField(func(s *Setup, v int) { s.CP = v }),
	"ep":          intField(func(s *Setup, v int) { s.EP = v }),
	"zero":        intField(func(s *Setup, v int) { s.Zero = v }),
	"dtype": {set: func(s *Setup, v string) (err error) {
		s.DType, err = ParsePrecision(v)
		return err
	}},
	"recompute": {set: func(s *Setup, v string) (err error) {
		s.Recompute, err = ParseRecompute(v)
		return err
	}},
	"attention": {set: func(s *Setup, v string) (err error) {
		s.Attention, err = ParseAttention(v)
		return err
	}},
	"optimizer": {set: func(s *Setup, v string) (err error) {
		s.Optimizer, err = ParseOptimizer(v)
		return err
	}},
	"tp-plan": {set: func(s *Setup, v string) (err error) {
		s.TPPlan, err = ParseTPPlan(v)
		return err
	}},
}

// SetAxis sets the setup field a sweep axis names ("micro-batch", "dtype",
// ...; not "model") from a value's text.
func SetAxis(s *Setup, name, value string) error {
	f, ok := sweepFields[name]
	if !ok || f.set == nil {
		return fmt.Errorf("unknown axis %q", name)
	}
	return f.set(s, value)
}

// AxisNumeric says whether a sweep axis takes whole numbers.
func AxisNumeric(name string) bool { return sweepFields[name].numeric }

// SweepAxisNames lists the axes a sweep accepts.
func SweepAxisNames() string {
	return "model, dtype, seq, micro-batch, recompute, grad-accum, attention, optimizer, dp, tp, tp-plan, pp, vpp, cp, ep, zero"
}

// maxSweepPoints bounds a sweep.
const maxSweepPoints = 100000

// ParseSweepAxis parses "micro-batch=1..64" (powers of two from 1 to 64, and
// 64), "seq=512,1024,2048", "dtype=fp32,bf16" or "model=gpt2,llama3-8b".
// Values of enum axes are checked here; model names are resolved by the caller.
func ParseSweepAxis(spec string) (SweepAxis, error) {
	name, vals, ok := strings.Cut(spec, "=")
	name = strings.ReplaceAll(strings.TrimSpace(strings.ToLower(name)), "_", "-")
	if name == "micro-batch-size" || name == "batch" {
		name = "micro-batch"
	}
	if !ok || strings.TrimSpace(vals) == "" {
		return SweepAxis{}, fmt.Errorf("sweep %q: want NAME=A..B or a list NAME=V1,V2", spec)
	}
	f, known := sweepFields[name]
	if !known {
		return SweepAxis{}, fmt.Errorf("sweep %q: unknown axis %q (have %s)", spec, name, SweepAxisNames())
	}
	ax := SweepAxis{Name: name}
	if lo, hi, isRange := strings.Cut(vals, ".."); isRange && f.numeric {
		a, err1 := strconv.Atoi(strings.TrimSpace(lo))
		b, err2 := strconv.Atoi(strings.TrimSpace(hi))
		if err1 != nil || err2 != nil || a < 0 || b < a || b > 1<<30 {
			return SweepAxis{}, fmt.Errorf("sweep %q: bad range (want A..B with 0 <= A <= B <= 2^30)", spec)
		}
		for v := a; v <= b; {
			ax.Values = append(ax.Values, strconv.Itoa(v))
			if v == 0 {
				v = 1
			} else {
				v *= 2
			}
		}
		if last := strconv.Itoa(b); ax.Values[len(ax.Values)-1] != last {
			ax.Values = append(ax.Values, last)
		}
	} else {
		for _, v := range strings.Split(vals, ",") {
			v = strings.TrimSpace(v)
			if v == "" {
				return SweepAxis{}, fmt.Errorf("sweep %q: empty value", spec)
			}
			if f.numeric {
				n, err := strconv.Atoi(v)
				if err != nil || n < 0 {
					return SweepAxis{}, fmt.Errorf("sweep %q: bad value %q (want a whole number)", spec, v)
				}
				v = strconv.Itoa(n)
			} else if f.set != nil {
				var s Setup
				if err := f.set(&s, v); err != nil {
					return SweepAxis{}, fmt.Errorf("sweep %q: %v", spec, err)
				}
			}
			ax.Values = append(ax.Values, v)
		}
	}
	if len(ax.Values) > 4096 {
		return SweepAxis{}, fmt.Errorf("sweep %q: too many values", spec)
	}
	return ax, nil
}

// CheckAxes checks a sweep's axes (each named once, each with values, at
// most maxPoints combinations) and returns how many combinations they make.
func CheckAxes(axes []SweepAxis, maxPoints int) (int, error) {
	n := 1
	seen := map[string]bool{}
	for _, a := range axes {
		if seen[a.Name] {
			return 0, fmt.Errorf("sweep: axis %s given twice", a.Name)
		}
		seen[a.Name] = true
		if len(a.Values) == 0 {
			return 0, fmt.Errorf("sweep: axis %s has no values", a.Name)
		}
		n *= len(a.Values)
		if n > maxPoints {
			return 0, fmt.Errorf("sweep has more than %d points", maxPoints)
		}
	}
	return n, nil
}

// Sweep estimates every combination of the axes (last axis fastest). With
// a "model" axis, models holds one model per value, in order; otherwise
// exactly one model.
func Sweep(models []Model, base Setup, dev Device, axes []SweepAxis) (*SweepResult, error) {
	n, err := CheckAxes(axes, maxSweepPoints)
	if err != nil {
		return nil, err
	}
	modelAxis := -1
	for i, a := range axes {
		if a.Name == "model" {
			modelAxis = i
			if len(a.Values) != len(models) {
				return nil, fmt.Errorf("sweep: %d models for %d model values", len(models), len(a.Values))
			}
		}
	}
	if modelAxis < 0 && len(models) != 1 {
		return nil, fmt.Errorf("sweep: want one model, got %d", len(models))
	}
	res := &SweepResult{Header: envelope.NewHeader("estimate"), Device: dev, Axes: axes}
	idx := make([]int, len(axes))
	bestOf := map[string]int{} // model -> row index
	for i := 0; i < n; i++ {
		s, m := base, models[0]
		row := SweepRow{Values: map[string]any{}}
		var err error
		for j, a := range axes {
			v := a.Values[idx[j]]
			f := sweepFields[a.Name]
			switch {
			case j == modelAxis:
				m = models[idx[j]]
			case err == nil:
				err = f.set(&s, v)
			}
			row.Values[a.Name] = v
			if f.numeric {
				row.Values[a.Name], _ = strconv.Atoi(v)
			}
		}
		row.Model, row.Setup = m.Name, s
		if err == nil {
			var r *Result
			if r, err = Estimate(m, s, dev); err == nil {
				row.Params, row.Setup, row.Summary = r.Params, r.Setup, r.Summary
				if row.Verdict.Fit() {
					if b, ok := bestOf[m.Name]; !ok || tokens(r.Setup) >= tokens(res.Rows[b].Setup) {
						bestOf[m.Name] = len(res.Rows)
					}
				}
			}
		}
		if err != nil {
			row.Error = err.Error()
		}
		res.Rows = append(res.Rows, row)
		for j := len(axes) - 1; j >= 0; j-- { // odometer, last axis fastest
			idx[j]++
			if idx[j] < len(axes[j].Values) {
				break
			}
			idx[j] = 0
		}
	}
	res.Best = []int{}
	for _, m := range models {
		if b, ok := bestOf[m.Name]; ok {
			res.Best = append(res.Best, b)
			delete(bestOf, m.Name)
		}
	}
	return res, nil
}

func tokens(s Setup) int64 {
	return int64(max(s.MicroBatch, 1)) * int64(s.Seq) * int64(max(s.GradAccum, 1))
}
