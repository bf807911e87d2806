package whatif

import (
	"fmt"
	"strconv"

	"github.com/ptscope/ptscope/internal/envelope"
	"github.com/ptscope/ptscope/internal/estimate"
)

// maxSweepPoints bounds a sweep from a run (each point is a prediction).
const maxSweepPoints = 10000

// DefaultAxes are the axes of `--sweep auto`: round micro-batches up to
// four times the run's, recompute none and full, and the precisions the
// run's could change to.
func DefaultAxes(s estimate.Setup) []estimate.SweepAxis {
	var mbs []string
	for _, mb := range roundBatches {
		if mb <= max(4*s.MicroBatch, 8) {
			mbs = append(mbs, strconv.Itoa(mb))
		}
	}
	dts := []string{"bf16", "bf16-true", "fp32"}
	if s.DType == estimate.FP16Mixed || s.DType == estimate.FP16True {
		dts = []string{"fp16", "fp16-true", "fp32"}
	}
	axes := []estimate.SweepAxis{{Name: "dtype", Values: dts}, {Name: "recompute", Values: []string{"none", "full"}},
		{Name: "micro-batch", Values: mbs}}
	if s.ForwardOnly {
		axes = []estimate.SweepAxis{{Name: "dtype", Values: dts}, {Name: "micro-batch", Values: mbs}}
	}
	return axes
}

// Sweep predicts every combination of the axes (last axis fastest) for the
// run's job changed by s, as a sweep result whose rows are predictions.
func (p *Predictor) Sweep(s estimate.Setup, axes []estimate.SweepAxis) (*estimate.SweepResult, error) {
	for _, a := range axes {
		if a.Name == "model" {
			return nil, fmt.Errorf("sweep: a run's job keeps its model (no model axis with --from)")
		}
	}
	n, err := estimate.CheckAxes(axes, maxSweepPoints)
	if err != nil {
		return nil, err
	}
	res := &estimate.SweepResult{Header: envelope.NewHeader("estimate"), Device: p.dev, Axes: axes, Best: []int{}}
	idx := make([]int, len(axes))
	best := -1
	for i := 0; i < n; i++ {
		t := s
		row := estimate.SweepRow{Model: p.model.Name, Params: p.model.Params(), Values: map[string]any{}}
		var err error
		for j, a := range axes {
			v := a.Values[idx[j]]
			if err == nil {
				err = estimate.SetAxis(&t, a.Name, v)
			}
			row.Values[a.Name] = v
			if estimate.AxisNumeric(a.Name) {
				row.Values[a.Name], _ = strconv.Atoi(v)
			}
		}
		if a, ok := row.Values["grad-accum"]; !ok || a == nil {
			t.MicroBatches = 0
		}
		row.Setup = t
		if err == nil {
			var pr *Result
			if pr, err = p.Predict(t); err == nil {
				row.Setup, row.Summary = pr.Setup, pr.Summary
				if row.Verdict.Fit() && (best < 0 || tokens(pr.Setup) >= tokens(res.Rows[best].Setup)) {
					best = len(res.Rows)
				}
			}
		}
		if err != nil {
			row.Error = err.Error()
		}
		res.Rows = append(res.Rows, row)
		for j := len(axes) - 1; j >= 0; j-- {
			idx[j]++
			if idx[j] < len(axes[j].Values) {
				break
			}
			idx[j] = 0
		}
	}
	if best >= 0 {
		res.Best = append(res.Best, best)
	}
	return res, nil
}

func tokens(s estimate.Setup) int64 {
	return int64(max(s.MicroBatch, 1)) * int64(s.Seq) * int64(max(s.GradAccum, 1))
}
