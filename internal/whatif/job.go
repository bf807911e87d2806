package whatif

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/ptscope/ptscope/internal/estimate"
)

// Given holds what the user says about the run where its bundle is silent:
// the model (a config.json or preset) and the run's own micro-batch and
// sequence. Zero values leave the bundle's facts.
type Given struct {
	Model      *estimate.Model
	MicroBatch int
	Seq        int
}

// MissingError says which fact the run lacks and how to give it.
type MissingError struct{ What, Flag string }

func (e *MissingError) Error() string {
	return fmt.Sprintf("the run does not record %s; give %s", e.What, e.Flag)
}

// Job rebuilds the run's job as the estimate describes it: the model from
// the Hugging Face config the companion recorded, the setup from the token
// ids' shape, the parameters' dtypes and autocast, gradient checkpointing,
// the attention implementation, the optimizer's state names, the layout
// (FSDP2, tensor parallelism, DDP) and how long the caller held the model's
// output (from the phases). Notes say what was inferred rather than seen.
func Job(r *Run, g Given) (estimate.Model, estimate.Setup, []string, error) {
	var notes []string
	var m estimate.Model
	switch {
	case g.Model != nil:
		m = *g.Model
	case len(r.Model.HFConfig) > 0:
		var err error
		m, err = estimate.ReadHFConfig(bytes.NewReader(r.Model.HFConfig), modelName(r))
		if err != nil {
			return m, estimate.Setup{}, nil, fmt.Errorf("the run's model: %w", err)
		}
	default:
		return m, estimate.Setup{}, nil, &MissingError{"its model (no Hugging Face config in process.json: a model of another library, or a companion before model facts)", "--config config.json or --model NAME"}
	}
	s := estimate.DefaultSetup()
	switch {
	case len(r.Model.InputShape) == 2:
		s.MicroBatch, s.Seq = r.Model.InputShape[0], r.Model.InputShape[1]
	case len(r.Model.InputShape) == 1:
		s.MicroBatch, s.Seq = 1, r.Model.InputShape[0]
	}
	if g.MicroBatch > 0 {
		s.MicroBatch = g.MicroBatch
	}
	if g.Seq > 0 {
		s.Seq = g.Seq
	}
	if s.Seq == 0 || len(r.Model.InputShape) == 0 && g.MicroBatch == 0 {
		return m, s, nil, &MissingError{"the token ids' shape (micro-batch x sequence)", "--run-micro-batch N --run-seq N"}
	}
	s.DType, notes = precision(r, notes)
	if c := r.Model.GradientCheckpointing; c != nil && *c {
		s.Recompute = estimate.RecomputeFull
	}
	if strings.Contains(r.Model.AttnImplementation, "eager") {
		s.Attention = estimate.AttentionEager
	}
	meas := measure(r)
	notes = optimizer(r, &s, meas, notes)
	notes = layout(r, &s, notes)
	if meas.accum > 1 {
		s.GradAccum = meas.accum
	}
	notes = keepLogits(r, m, &s, meas, notes)
	s.ExpandableSegments = r.ExpandableSegments
	return m, s, notes, nil
}

func modelName(r *Run) string {
	if r.Model.Class != "" {
		return r.Model.Class
	}
	return "model"
}

// precision names the run's precision from the parameters' dtypes and autocast.
func precision(r *Run, notes []string) (estimate.Precision, []string) {
	var most string
	var n int64
	for dt, b := range r.Precision.ParameterBytesByDtype {
		if b > n || b == n && dt < most {
			most, n = dt, b
		}
	}
	p := r.Precision
	switch {
	case most == "bfloat16":
		return estimate.BF16True, notes
	case most == "float16":
		return estimate.FP16True, notes
	case p.Autocast && p.AutocastDtype == "float16":
		return estimate.FP16Mixed, notes
	case p.Autocast:
		return estimate.BF16Mixed, notes
	case most == "":
		return estimate.BF16Mixed, append(notes, "precision: not recorded (no forward seen); assumed bf16 autocast")
	}
	return estimate.FP32, notes
}

// optimizer names the optimizer from its state's keys; a run with no
// optimizer state and no backward is inference.
func optimizer(r *Run, s *estimate.Setup, meas measured, notes []string) []string {
	keys := map[string]bool{}
	for _, k := range r.Inventory.OptimizerKeys {
		keys[k] = true
	}
	backward := false
	for _, p := range r.Phases {
		backward = backward || p.Name == "backward"
	}
	switch {
	case keys["exp_avg"] && keys["exp_avg_sq"]:
		s.Optimizer = estimate.AdamW
	case keys["momentum_buffer"]:
		s.Optimizer = estimate.SGD
	case keys["exp_avg_sq_row"] || keys["exp_avg_sq_col"]:
		s.Optimizer = estimate.Adafactor
	case !backward && len(r.Phases) > 0 && r.OOM == nil:
		s.ForwardOnly = true
	case len(keys) > 0:
		notes = append(notes, fmt.Sprintf("optimizer: state keys %s not recognised; assumed AdamW", strings.Join(r.Inventory.OptimizerKeys, ", ")))
	case !meas.complete:
		notes = append(notes, "optimizer: the run never completed a step; assumed AdamW (PyTorch's foreach implementation)")
	}
	return notes
}

// layout reads FSDP2, tensor parallelism and DDP from the run.
func layout(r *Run, s *estimate.Setup, notes []string) []string {
	ws := max(r.WorldSize, 1)
	switch {
	case r.Precision.FSDP:
		s.FSDP, s.DP = true, ws
		if tp := r.Inventory.TP; tp > 1 && ws%tp == 0 {
			// FSDP2 over one mesh dimension, tensor parallelism over another
			s.TP, s.DP = tp, ws/tp
			notes = append(notes, fmt.Sprintf("tensor parallelism: the parameters' DeviceMesh shows tp %d; FSDP2 over dp %d", tp, ws/tp))
		}
		s.DType = estimate.FP32
		switch r.Inventory.UnshardedDtype {
		case "bfloat16":
			s.ParamDType = estimate.BF16
		case "float16":
			s.ParamDType = estimate.FP16
		case "float32", "":
			if r.Inventory.UnshardedDtype == "" {
				notes = append(notes, "FSDP2: no gathered parameter seen; assumed the parameters' dtype for MixedPrecisionPolicy.param_dtype")
			}
		}
		if s.ParamDType != estimate.DTypeDefault {
			s.ReduceDType = estimate.F32
			notes = append(notes, "FSDP2: MixedPrecisionPolicy.reduce_dtype is not recorded; assumed float32")
		}
	case r.Inventory.DTensor && ws > 1:
		s.TP = ws
		if r.Inventory.EmbeddingDTensor {
			s.TPPlan = estimate.TPPlanMegatron
		}
		if tp := r.Inventory.TP; tp > 1 && ws%tp == 0 {
			s.TP, s.DP = tp, ws/tp
			notes = append(notes, fmt.Sprintf("tensor parallelism: the parameters' DeviceMesh shows tp %d", tp))
			break
		}
		notes = append(notes, fmt.Sprintf("tensor parallelism: DTensor parameters without FSDP; assumed tp %d over all %d ranks", ws, ws))
	case r.DDPBucketsBytes > 0:
		s.DDP, s.DP = true, ws
	}
	return notes
}

// keepLogits reads how long the caller held the model's output: what
// backward left beyond the gradients, and what the optimizer step started
// with, against the logits' size.
func keepLogits(r *Run, m estimate.Model, s *estimate.Setup, meas measured, notes []string) []string {
	if s.ForwardOnly || !meas.heldOK {
		if !s.ForwardOnly {
			notes = append(notes, "the caller's outputs: no complete step measured; assumed held through the optimizer step")
		}
		return notes
	}
	res, err := estimate.Estimate(m, *s, estimate.DefaultDevice())
	if err != nil {
		return notes
	}
	lg := res.Top().Activations.LogitsBytes
	switch {
	case lg == 0:
	case meas.held < lg/4:
		s.KeepLogits, s.KeepLogitsStep = false, false
	case meas.heldStep < lg/4:
		s.KeepLogits, s.KeepLogitsStep = true, false
	default:
		s.KeepLogits, s.KeepLogitsStep = true, true
	}
	return notes
}

// DeviceFor is the run's device: the GPU description whose name the run's
// device name holds (for the CUDA context and workspaces of its
// architecture), with the memory the run could use.
func DeviceFor(r *Run) estimate.Device {
	d := estimate.DefaultDevice()
	name := strings.ToLower(r.DeviceName)
	best := 0
	if gs, err := estimate.GPUs(); err == nil && name != "" {
		for _, g := range gs {
			for _, n := range append([]string{g.Name}, g.Aliases...) {
				n = strings.ToLower(n)
				// "h100-80gb" in "nvidia h100 80gb hbm3": compare without separators
				if strings.Contains(strings.NewReplacer(" ", "", "-", "").Replace(name), strings.ReplaceAll(n, "-", "")) && len(n) > best {
					d, best = g, len(n)
				}
			}
		}
	}
	if r.DeviceName != "" {
		d.Name = r.DeviceName
	}
	d.Aliases = nil
	if r.DeviceMemoryBytes > 0 {
		d.MemoryBytes = r.DeviceMemoryBytes
	}
	return d
}
