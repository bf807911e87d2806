package estimate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// Setup is a training (or inference) configuration.
type Setup struct {
	Seq        int    `json:"seq"`
	MicroBatch int    `json:"micro_batch"`
	DType      string `json:"dtype"` // fp32 | bf16 | fp16: the compute dtype
	// AMP: weights stay fp32 and torch.autocast runs matrix products in DType.
	AMP       bool   `json:"amp"`
	Optimizer string `json:"optimizer"` // adamw | adam | sgd (momentum) | adafactor | adamw8bit
	GradAccum int    `json:"grad_accum"`
	Recompute string `json:"recompute"` // none | selective | full
	// FlashAttention: a fused attention kernel (SDPA flash / memory-efficient, FlashAttention)
	// that never stores the heads x seq x seq scores. Default true.
	FlashAttention bool `json:"flash_attention"`
	ForwardOnly    bool `json:"forward_only"` // inference under torch.no_grad

	DP  int  `json:"dp"`
	TP  int  `json:"tp"`
	PP  int  `json:"pp"`
	VPP int  `json:"vpp"` // virtual stages per pipeline rank (interleaved 1F1B)
	CP  int  `json:"cp"`
	EP  int  `json:"ep"`
	SP  bool `json:"sp"`
	// Zero: 0 none, 1 optimizer state, 2 + gradients, 3 + parameters, sharded over DP x CP.
	Zero    int    `json:"zero"`
	FSDP    bool   `json:"fsdp"`    // PyTorch FSDP full shard: ZeRO-3 with unsharded per-layer buffers
	Offload string `json:"offload"` // "" | optimizer | params

	// GradDType defaults to the parameter dtype; Megatron keeps fp32 grads for bf16 models.
	GradDType string `json:"grad_dtype"`
	// MasterWeights: fp32 master copy for 16-bit parameters (default true when DType is 16-bit
	// without AMP).
	MasterWeights bool `json:"master_weights"`
	// KeepLogits: the caller holds the logits (or the model output) until the step ends, as in
	// `logits = model(x); loss = f(logits); loss.backward(); opt.step()`. Default true.
	KeepLogits bool `json:"keep_logits"`
	// MicroBatches in flight for a pipeline (default GradAccum).
	MicroBatches int `json:"micro_batches"`
}

// DefaultSetup is a single-GPU fp32 AdamW setup.
func DefaultSetup() Setup {
	return Setup{Seq: 1024, MicroBatch: 1, DType: "fp32", Optimizer: "adamw", GradAccum: 1,
		Recompute: "none", FlashAttention: true, DP: 1, TP: 1, PP: 1, VPP: 1, CP: 1, EP: 1,
		MasterWeights: true, KeepLogits: true}
}

func dtypeBytes(d string) (int64, error) {
	switch strings.ToLower(d) {
	case "fp32", "float32", "float":
		return 4, nil
	case "bf16", "bfloat16", "fp16", "float16", "half":
		return 2, nil
	case "fp8", "int8":
		return 1, nil
	}
	return 0, fmt.Errorf("unknown dtype %q (want fp32, bf16 or fp16)", d)
}

// normalize checks a setup against a model and returns the filled-in copy.
func (s Setup) normalize(m Model) (Setup, error) {
	one := func(v *int) {
		if *v <= 0 {
			*v = 1
		}
	}
	for _, v := range []*int{&s.GradAccum, &s.DP, &s.TP, &s.PP, &s.VPP, &s.CP, &s.EP, &s.MicroBatch} {
		one(v)
	}
	if s.DType == "" {
		s.DType = "fp32"
	}
	s.DType = strings.ToLower(s.DType)
	if _, err := dtypeBytes(s.DType); err != nil {
		return s, err
	}
	if s.DType == "fp32" {
		s.AMP = false
	}
	if s.Optimizer == "" {
		s.Optimizer = "adamw"
	}
	s.Optimizer = strings.ToLower(s.Optimizer)
	if s.Recompute == "" {
		s.Recompute = "none"
	}
	if s.MicroBatches <= 0 {
		s.MicroBatches = s.GradAccum
		if s.PP > 1 {
			s.MicroBatches = max(s.GradAccum, s.PP) // 1F1B needs at least pp micro-batches to fill the pipeline
		}
	}
	switch {
	case s.Seq <= 0:
		return s, fmt.Errorf("seq must be positive")
	case s.Seq > m.SeqMax && m.PositionEmbedding == "learned":
		return s, fmt.Errorf("seq %d exceeds the model's learned positions %d", s.Seq, m.SeqMax)
	case !oneOf(s.Optimizer, "adamw", "adam", "sgd", "adafactor", "adamw8bit"):
		return s, fmt.Errorf("unknown optimizer %q (want adamw, adam, sgd, adafactor or adamw8bit)", s.Optimizer)
	case !oneOf(s.Recompute, "none", "selective", "full"):
		return s, fmt.Errorf("unknown recompute %q (want none, selective or full)", s.Recompute)
	case s.Zero < 0 || s.Zero > 3:
		return s, fmt.Errorf("zero stage %d (want 0..3)", s.Zero)
	case !oneOf(s.Offload, "", "none", "optimizer", "params"):
		return s, fmt.Errorf("unknown offload %q (want optimizer or params)", s.Offload)
	case m.Layers%s.PP != 0:
		return s, fmt.Errorf("layers %d not divisible by pp %d", m.Layers, s.PP)
	case s.VPP > 1 && (m.Layers/s.PP)%s.VPP != 0:
		return s, fmt.Errorf("layers per stage %d not divisible by vpp %d", m.Layers/s.PP, s.VPP)
	case m.Heads%s.TP != 0 || (m.KVHeads%s.TP != 0 && s.TP%m.KVHeads != 0):
		return s, fmt.Errorf("heads %d / kv heads %d not divisible by tp %d", m.Heads, m.KVHeads, s.TP)
	case s.Seq%s.CP != 0:
		return s, fmt.Errorf("seq %d not divisible by cp %d", s.Seq, s.CP)
	case s.EP > 1 && (m.Experts == 0 || m.Experts%s.EP != 0):
		return s, fmt.Errorf("ep %d needs a model whose experts (%d) it divides", s.EP, m.Experts)
	case s.SP && s.TP == 1:
		s.SP = false
	}
	if s.Offload == "none" {
		s.Offload = ""
	}
	if s.FSDP && s.Zero < 3 {
		s.Zero = 3
	}
	if s.Offload == "params" && s.Zero < 3 {
		return s, fmt.Errorf("--offload params needs --zero 3 or --fsdp")
	}
	if s.GradDType == "" {
		s.GradDType = s.paramDType()
	}
	if _, err := dtypeBytes(s.GradDType); err != nil {
		return s, err
	}
	if s.AMP || s.DType == "fp32" {
		s.MasterWeights = false
	}
	return s, nil
}

func oneOf(s string, opts ...string) bool {
	for _, o := range opts {
		if s == o {
			return true
		}
	}
	return false
}

// paramDType is the dtype parameters are stored in.
func (s Setup) paramDType() string {
	if s.AMP {
		return "fp32"
	}
	return s.DType
}

// ParseSetupJSON reads a Setup from JSON, starting from DefaultSetup (used by tests and testdata).
func ParseSetupJSON(b []byte) (Setup, error) {
	s := DefaultSetup()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return s, err
	}
	return s, nil
}
