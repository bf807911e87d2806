package estimate

import (
	"sort"

	"github.com/ptscope/ptscope/internal/envelope"
)

// PhaseMeasure is one forward/backward/optimizer phase of a measured run
// (a line of a bundle's phases.jsonl): allocator counters before and after.
type PhaseMeasure struct {
	Name               string // forward | backward | optimizer
	Step               int
	AllocatedBefore    int64
	AllocatedAfter     int64
	MaxAllocatedBefore int64
	MaxAllocatedAfter  int64
	MaxReservedAfter   int64
	Nested             bool // ran inside another phase (optimizer.step(closure))
	Aborted            bool
}

// Measurement is what one rank of a run (real or simulated) recorded.
type Measurement struct {
	Source            string // the bundle
	Rank              int
	Mode              string // capture | simulate-world | fake
	Simulated         bool
	MaxAllocatedBytes int64 // the process's peak counter at its end (0 = unknown)
	Phases            []PhaseMeasure
}

// CalibrationRow compares one term of the estimate with the measurement.
type CalibrationRow struct {
	Term          string  `json:"term"`
	EstimateBytes int64   `json:"estimate_bytes"`
	MeasuredBytes int64   `json:"measured_bytes"`
	Measured      bool    `json:"measured"` // false: the run's phases do not show this term
	DiffBytes     int64   `json:"diff_bytes"`
	DiffRatio     float64 `json:"diff_ratio"` // (estimate - measured) / measured
	How           string  `json:"how"`        // how the measured number was derived
}

// Calibration is the estimate set against one measured rank, term by term:
// the document of `ptscope estimate --calibrate BUNDLE`. Model, Setup,
// Device and Params are the estimate's, in the shape of Result's.
type Calibration struct {
	envelope.Header
	Model     Model            `json:"model"`
	Setup     Setup            `json:"setup"`
	Device    Device           `json:"device"`
	Params    int64            `json:"params"`
	Source    string           `json:"source"`
	Rank      int              `json:"rank"`
	Mode      string           `json:"mode"`
	Simulated bool             `json:"simulated"`
	Rows      []CalibrationRow `json:"rows"`
	Notes     []string         `json:"notes"`
}

// Calibrate compares the most loaded rank of r with m. Terms are derived from
// the phases of the first step (parameters, optimizer state, which PyTorch's
// optimizers create lazily in their first step) and of the last complete
// step (activations, gradients, phase peaks: the steady state).
func Calibrate(r *Result, m Measurement) Calibration {
	top := r.Top()
	c := Calibration{Header: envelope.NewHeader("estimate"), Model: r.Model, Setup: r.Setup, Device: r.Device, Params: r.Params,
		Source: m.Source, Rank: m.Rank, Mode: m.Mode, Simulated: m.Simulated}
	add := func(term string, est int64, meas int64, ok bool, how string) {
		row := CalibrationRow{Term: term, EstimateBytes: est, MeasuredBytes: meas, Measured: ok, How: how}
		if ok {
			row.DiffBytes = est - meas
			if meas > 0 {
				row.DiffRatio = float64(est-meas) / float64(meas)
			}
		}
		c.Rows = append(c.Rows, row)
	}
	steps := stepsOf(m.Phases)

	peak := m.MaxAllocatedBytes
	for _, p := range m.Phases {
		peak = max(peak, p.MaxAllocatedAfter)
	}
	add("peak allocated", top.PeakAllocatedBytes, peak, peak > 0, "the largest max_memory_allocated the run recorded (process.json, phase ends)")

	first, firstOK := steps.first()
	if f := first.get("forward"); firstOK && f != nil {
		add("parameters", top.ModelStates.ParametersBytes+top.ModelStates.MasterWeightsBytes, f.AllocatedBefore, true,
			"allocated before the first forward (parameters, buffers and the first batch)")
	} else {
		add("parameters", top.ModelStates.ParametersBytes+top.ModelStates.MasterWeightsBytes, 0, false, "no forward phase")
	}
	if o := first.get("optimizer"); firstOK && o != nil {
		add("optimizer state", top.ModelStates.OptimizerStateBytes, o.AllocatedAfter-o.AllocatedBefore, true,
			"growth of allocated memory over the first optimizer step (state is created lazily there)")
	} else {
		add("optimizer state", top.ModelStates.OptimizerStateBytes, 0, false, "no optimizer phase in the first step")
	}

	last, lastOK := steps.lastComplete()
	f, b := last.get("forward"), last.get("backward")
	switch {
	case lastOK && f != nil && b != nil:
		add("activations (kept after forward)", top.Activations.TotalBytes, b.AllocatedBefore-f.AllocatedBefore, true,
			"allocated when backward starts minus before forward, in a steady step (saved tensors, logits, loss)")
	case lastOK && f != nil:
		add("activations (kept after forward)", top.Activations.TotalBytes, f.AllocatedAfter-f.AllocatedBefore, true,
			"growth of allocated memory over the forward of a steady step (saved tensors and outputs)")
	default:
		add("activations (kept after forward)", top.Activations.TotalBytes, 0, false, "no complete step with a forward phase")
	}
	held := int64(0)
	if r.Setup.KeepLogits {
		held = top.Activations.LogitsBytes
	}
	if lastOK && f != nil && b != nil {
		add("gradients (+ outputs held by the caller)", top.ModelStates.GradientsBytes+top.ModelStates.FP32GradCopyBytes+held,
			b.AllocatedAfter-f.AllocatedBefore, true, "allocated after backward minus before forward, in a steady step")
	} else {
		add("gradients (+ outputs held by the caller)", top.ModelStates.GradientsBytes+held, 0, false, "no complete forward+backward step")
	}
	for _, ep := range top.Phases {
		name := ep.Name.String()
		if ep.Name == OptimizerStep {
			name = "optimizer"
		}
		best, ok := int64(0), false
		how := "the run's peak counter where it grew during " + name + " phases"
		if ep.Name == Forward {
			// ptscope's forward phase ends when the root module returns; the estimate's
			// forward includes the loss, computed before backward starts
			how = "the run's peak counter where it grew between a forward's start and its backward's start (the loss included)"
			for _, st := range steps {
				f, b := st.get("forward"), st.get("backward")
				switch {
				case f != nil && b != nil && b.MaxAllocatedBefore > f.MaxAllocatedBefore:
					best, ok = max(best, b.MaxAllocatedBefore), true
				case f != nil && f.MaxAllocatedAfter > f.MaxAllocatedBefore:
					best, ok = max(best, f.MaxAllocatedAfter), true
				}
			}
		} else {
			for _, p := range m.Phases {
				if p.Name == name && !p.Aborted && !p.Nested && p.MaxAllocatedAfter > p.MaxAllocatedBefore {
					best, ok = max(best, p.MaxAllocatedAfter), true
				}
			}
		}
		if !ok {
			how = "no " + name + " phase raised the run's peak (its own peak is not recorded)"
		}
		add(ep.Name.String()+" peak", ep.Bytes, best, ok, how)
	}
	if m.Mode == "fake" {
		c.Notes = append(c.Notes, "measured with fake tensors (--no-gpu): 512-byte rounding only; the CUDA context, workspaces and allocator cache are not in either number")
	} else if m.Mode == "simulate-world" {
		c.Notes = append(c.Notes, "measured as a simulated rank (--simulate-world-size): NCCL buffers are outside both allocated numbers")
	}
	if len(m.Phases) == 0 {
		c.Notes = append(c.Notes, "the bundle has no phases.jsonl (ptscope run --phases=false?): only the peak can be compared")
	}
	return c
}

type stepPhases struct {
	step   int
	phases []*PhaseMeasure
}

// get returns the first top-level phase called name.
func (s stepPhases) get(name string) *PhaseMeasure {
	for _, p := range s.phases {
		if p.Name == name && !p.Nested && !p.Aborted {
			return p
		}
	}
	return nil
}

type stepList []stepPhases

func stepsOf(ps []PhaseMeasure) stepList {
	by := map[int]*stepPhases{}
	for i := range ps {
		p := &ps[i]
		s := by[p.Step]
		if s == nil {
			s = &stepPhases{step: p.Step}
			by[p.Step] = s
		}
		s.phases = append(s.phases, p)
	}
	var out stepList
	for _, s := range by {
		out = append(out, *s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].step < out[j].step })
	return out
}

func (l stepList) first() (stepPhases, bool) {
	if len(l) == 0 {
		return stepPhases{}, false
	}
	return l[0], true
}

// lastComplete is the last step with a forward, a backward and an optimizer
// phase (else the last step with a forward).
func (l stepList) lastComplete() (stepPhases, bool) {
	for i := len(l) - 1; i >= 0; i-- {
		if l[i].get("forward") != nil && l[i].get("backward") != nil && l[i].get("optimizer") != nil {
			return l[i], true
		}
	}
	for i := len(l) - 1; i >= 0; i-- {
		if l[i].get("forward") != nil {
			return l[i], true
		}
	}
	return stepPhases{}, false
}
