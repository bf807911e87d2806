// Package whatif predicts the GPU memory of a job from a run of it. A
// `ptscope run` bundle (real or simulated) measured the run's model states
// (the tensor inventory), what its forward kept for backward, the outputs
// the caller held, each phase's peak, the allocator's fragmentation and the
// memory outside the allocator; internal/estimate's analytic model of the
// same job, set against those numbers term by term, scales only what a
// change of setup changes (a micro-batch, a precision, recompute, a
// layout). The run's own numbers stand where the change does not touch
// them. docs/estimate.md, "What-if from a run", says how each term is
// carried over.
package whatif

import (
	"encoding/json"
	"sort"

	"github.com/ptscope/ptscope/internal/estimate"
)

// Run is what one rank of a measured run tells. The caller builds it from
// a bundle (internal/cli reads the capture format); every field may be
// missing in a bundle of an older companion, and the prediction says what
// it could not see (Result.Gaps).
type Run struct {
	Source    string `json:"source"`
	Rank      int    `json:"rank"`
	Mode      string `json:"mode"` // capture | simulate-world | fake
	WorldSize int    `json:"world_size"`
	// DeviceName and DeviceMemoryBytes: the device, and the most the
	// process could use (its set_per_process_memory_fraction limit when
	// it set one, else the device's memory).
	DeviceName         string `json:"device_name"`
	DeviceMemoryBytes  int64  `json:"device_memory_bytes"`
	ExpandableSegments bool   `json:"expandable_segments"`

	Model     ModelFacts     `json:"model"`
	Precision PrecisionFacts `json:"precision"`
	Inventory Inventory      `json:"inventory"`
	// DDPBucketsBytes is what DistributedDataParallel allocated for its
	// gradient buckets (the bundle's ddp_buckets region).
	DDPBucketsBytes int64 `json:"ddp_buckets_bytes"`

	Phases             []estimate.PhaseMeasure `json:"-"`
	MaxAllocatedBytes  int64                   `json:"max_allocated_bytes"`
	MaxReservedBytes   int64                   `json:"max_reserved_bytes"`
	MaxDeviceUsedBytes int64                   `json:"max_device_used_bytes"` // what the device had in use (live samples)
	OOM                *OOM                    `json:"oom,omitempty"`
}

// ModelFacts is what the companion saw of the model at the first forward.
type ModelFacts struct {
	HFConfig              json.RawMessage `json:"hf_config,omitempty"`
	Class                 string          `json:"class,omitempty"`
	AttnImplementation    string          `json:"attn_implementation,omitempty"`
	GradientCheckpointing *bool           `json:"gradient_checkpointing,omitempty"`
	// InputShape is the token ids' shape (micro-batch, sequence).
	InputShape []int `json:"input_shape,omitempty"`
}

// PrecisionFacts is the parameters' bytes by dtype and CUDA autocast at the
// first forward.
type PrecisionFacts struct {
	ParameterBytesByDtype map[string]int64 `json:"parameter_bytes_by_dtype,omitempty"`
	Autocast              bool             `json:"autocast"`
	AutocastDtype         string           `json:"autocast_dtype,omitempty"`
	FSDP                  bool             `json:"fsdp"`
}

// Inventory sums the tensor inventories: parameters as the first forward
// saw them, gradients and optimizer state at the end of the last step
// that had them.
type Inventory struct {
	ParametersBytes     int64 `json:"parameters_bytes"`
	GradientsBytes      int64 `json:"gradients_bytes"`
	OptimizerStateBytes int64 `json:"optimizer_state_bytes"`
	// OptimizerKeys are the optimizer's state names ("exp_avg", "momentum_buffer").
	OptimizerKeys []string `json:"optimizer_keys,omitempty"`
	// DTensor: parameters are DTensor shards (tensor parallelism or FSDP2);
	// EmbeddingDTensor: the input embedding is one (a vocabulary-parallel plan).
	DTensor          bool `json:"dtensor"`
	EmbeddingDTensor bool `json:"embedding_dtensor"`
	// TP is the tensor-parallel degree the parameters' DeviceMesh shows
	// (0: not recorded, or none).
	TP int `json:"tp,omitempty"`
	// UnshardedDtype is the dtype of FSDP2's gathered parameters (its
	// MixedPrecisionPolicy param_dtype), "" when none was seen.
	UnshardedDtype string `json:"unsharded_dtype,omitempty"`
}

// OOM is the run's first out-of-memory error.
type OOM struct {
	RequestedBytes int64  `json:"requested_bytes"`
	Step           int    `json:"step"`
	Phase          string `json:"phase"`
}

// phasePeak is a phase's own peak as the run measured it, carried to the
// steady state (optimizer state present).
type phasePeak struct {
	bytes int64
	ok    bool
	how   string
}

// measured is what the run's phases and inventory give, in the terms the
// estimate uses.
type measured struct {
	steady    bool  // a complete step after the first (optimizer state exists)
	complete  bool  // a forward, backward and optimizer phase in one step
	start     int64 // allocated when a steady forward starts
	kept      int64 // allocated when backward starts minus start: what forward left
	keptOK    bool
	held      int64 // left after backward beyond the gradients: outputs the caller holds
	heldOK    bool
	heldStep  int64 // held when the optimizer step starts
	params    int64
	grads     int64
	opt       int64
	other     int64 // start minus the model states: workspaces, buffers, the batch
	otherOK   bool
	peaks     map[estimate.PhaseName]phasePeak
	peak      int64
	accum     int   // forward phases per step
	oomAt     int64 // allocated when the OOM's phase was cut short
	oomStart  int64 // allocated when that phase's step started
	oomPhase  string
	oomRecord bool
}

// measure reads the run's phases and inventory.
func measure(r *Run) measured {
	m := measured{peaks: map[estimate.PhaseName]phasePeak{}, params: r.Inventory.ParametersBytes,
		grads: r.Inventory.GradientsBytes, opt: r.Inventory.OptimizerStateBytes, accum: 1}
	m.peak = r.MaxAllocatedBytes
	for _, p := range r.Phases {
		m.peak = max(m.peak, p.MaxAllocatedAfter)
	}
	rs := groupSteps(r.Phases)
	if rs.last >= 0 {
		m.fromStep(rs.by[rs.last], rs.last > rs.firstOpt)
	}
	m.phasePeaks(rs)
	if r.OOM != nil {
		m.fromOOM(r, rs)
	}
	return m
}

// runSteps are a run's top-level phases by step.
type runSteps struct {
	by       map[int][]estimate.PhaseMeasure
	order    []int // the steps, in order
	firstOpt int   // the first step with an optimizer phase, else -1
	last     int   // the last complete step (forward, backward, optimizer), else -1
}

func groupSteps(phases []estimate.PhaseMeasure) runSteps {
	rs := runSteps{by: map[int][]estimate.PhaseMeasure{}, firstOpt: -1, last: -1}
	for _, p := range phases {
		if p.Nested {
			continue
		}
		if _, ok := rs.by[p.Step]; !ok {
			rs.order = append(rs.order, p.Step)
		}
		rs.by[p.Step] = append(rs.by[p.Step], p)
	}
	sort.Ints(rs.order)
	for _, s := range rs.order {
		if phaseNamed(rs.by[s], "optimizer") != nil {
			rs.firstOpt = s
			break
		}
	}
	for i := len(rs.order) - 1; i >= 0; i-- {
		ps := rs.by[rs.order[i]]
		if phaseNamed(ps, "forward") != nil && phaseNamed(ps, "backward") != nil && phaseNamed(ps, "optimizer") != nil {
			rs.last = rs.order[i]
			break
		}
	}
	return rs
}

// phaseNamed is the step's first phase of that name that was not cut short.
func phaseNamed(ps []estimate.PhaseMeasure, name string) *estimate.PhaseMeasure {
	for i := range ps {
		if ps[i].Name == name && !ps[i].Aborted {
			return &ps[i]
		}
	}
	return nil
}

// fromStep reads the last complete step: the steady state when it comes
// after the first optimizer step (which creates the optimizer's state).
func (m *measured) fromStep(ps []estimate.PhaseMeasure, steady bool) {
	f, b, o := phaseNamed(ps, "forward"), phaseNamed(ps, "backward"), phaseNamed(ps, "optimizer")
	m.complete, m.steady = true, steady
	n := 0
	for _, p := range ps {
		if p.Name == "forward" && !p.Aborted {
			n++
		}
	}
	m.accum = max(n, 1)
	m.start = f.AllocatedBefore
	if m.accum == 1 {
		m.kept, m.keptOK = b.AllocatedBefore-f.AllocatedBefore, true
		m.held, m.heldOK = b.AllocatedAfter-f.AllocatedBefore-m.grads, m.grads > 0
		m.heldStep = o.AllocatedBefore - f.AllocatedBefore - m.grads
	}
	if m.steady {
		m.other, m.otherOK = m.start-m.params-m.opt, m.params > 0 && m.opt > 0
	}
}

// phasePeaks takes each phase's own peak, where it raised the run's peak
// counter, carried to a steady step: forward and backward peaks by their
// rise above their step's start, optimizer peaks as they are (the first
// step creates the state inside its optimizer phase).
func (m *measured) phasePeaks(rs runSteps) {
	steadyStart := m.start
	for _, s := range rs.order {
		ps := rs.by[s]
		f := phaseNamed(ps, "forward")
		if f == nil {
			continue
		}
		for _, p := range ps {
			if p.Aborted || p.MaxAllocatedAfter <= p.MaxAllocatedBefore {
				continue
			}
			var name estimate.PhaseName
			var v int64
			// before the optimizer's first step its state is missing (and the
			// first matrix product allocates the cuBLAS workspace inside the
			// first forward): add the state; later steps rise from their start
			carry := p.MaxAllocatedAfter - f.AllocatedBefore + steadyStart
			if s <= rs.firstOpt {
				carry = p.MaxAllocatedAfter + m.opt
			}
			switch p.Name {
			case "forward":
				name, v = estimate.Forward, carry
			case "backward":
				name, v = estimate.Backward, carry
			case "optimizer":
				name, v = estimate.OptimizerStep, p.MaxAllocatedAfter
				if s != rs.firstOpt {
					if o := phaseNamed(rs.by[rs.last], "optimizer"); o != nil && rs.last >= 0 {
						v = p.MaxAllocatedAfter - p.AllocatedBefore + o.AllocatedBefore
					}
				}
			default:
				continue
			}
			if !m.steady && name != estimate.OptimizerStep {
				continue
			}
			if cur := m.peaks[name]; v > cur.bytes {
				m.peaks[name] = phasePeak{bytes: v, ok: true, how: stepHow(s, rs.firstOpt)}
			}
		}
	}
}

// fromOOM reads what was allocated when an OOM cut a phase short.
func (m *measured) fromOOM(r *Run, rs runSteps) {
	for _, p := range r.Phases {
		if p.Aborted && p.Step == r.OOM.Step && p.Name == r.OOM.Phase {
			m.oomAt, m.oomPhase, m.oomRecord = p.AllocatedAfter, p.Name, true
			if f := phaseNamed(rs.by[p.Step], "forward"); f != nil {
				m.oomStart = f.AllocatedBefore
			} else if p.Name == "forward" {
				m.oomStart = p.AllocatedBefore
			}
		}
	}
	if m.oomRecord && m.oomPhase == "backward" && !m.keptOK {
		if b := firstAborted(r.Phases, "backward", r.OOM.Step); b != nil {
			m.kept, m.keptOK = b.AllocatedBefore-m.oomStart, true
		}
	}
}

func firstAborted(ps []estimate.PhaseMeasure, name string, step int) *estimate.PhaseMeasure {
	for i := range ps {
		if ps[i].Name == name && ps[i].Step == step && ps[i].Aborted {
			return &ps[i]
		}
	}
	return nil
}

func stepHow(step, firstOpt int) string {
	if step == firstOpt {
		return "the first step"
	}
	return "a steady step"
}
