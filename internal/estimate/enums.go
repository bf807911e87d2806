package estimate

import (
	"fmt"
	"strings"
)

// enumSpec names the values of one enum: names[i] is value i's text, aliases
// are other spellings users type (all lower case).
type enumSpec struct {
	kind    string
	names   []string
	aliases map[string]int
}

func (e enumSpec) text(v uint8) string {
	if int(v) < len(e.names) {
		return e.names[v]
	}
	return fmt.Sprintf("%s(%d)", e.kind, v)
}

func (e enumSpec) marshal(v uint8) ([]byte, error) {
	if int(v) >= len(e.names) {
		return nil, fmt.Errorf("estimate: invalid %s %d", e.kind, v)
	}
	return []byte(e.names[v]), nil
}

func (e enumSpec) parse(s string) (uint8, error) {
	k := strings.ToLower(strings.TrimSpace(s))
	for i, n := range e.names {
		if n == k {
			return uint8(i), nil
		}
	}
	if i, ok := e.aliases[k]; ok {
		return uint8(i), nil
	}
	var want []string
	for _, n := range e.names {
		if n != "" {
			want = append(want, n)
		}
	}
	return 0, fmt.Errorf("unknown %s %q (want %s)", e.kind, s, strings.Join(want, ", "))
}

// Precision is how a model trains or runs, named as people name it:
// "bf16" is torch.autocast in bf16 over fp32 weights (Hugging Face Trainer
// --bf16, Lightning "bf16-mixed", Accelerate mixed_precision="bf16"), the
// default; "bf16-true" is a model converted to bf16 (model.to(torch.bfloat16),
// Lightning "bf16-true"), whose optimizer state is bf16 too unless master
// weights are kept; "fp16" is autocast in fp16 (with a GradScaler); "fp32"
// is no mixed precision.
type Precision uint8

// Precisions.
const (
	BF16Mixed Precision = iota
	FP16Mixed
	BF16True
	FP16True
	FP32
)

var precisionSpec = enumSpec{kind: "dtype", names: []string{"bf16", "fp16", "bf16-true", "fp16-true", "fp32"},
	aliases: map[string]int{"bf16-mixed": 0, "amp-bf16": 0, "amp_bf16": 0, "bfloat16": 0,
		"fp16-mixed": 1, "16-mixed": 1, "amp-fp16": 1, "amp_fp16": 1, "float16": 1, "half": 1,
		"bf16_true": 2, "pure-bf16": 2, "fp16_true": 3, "16-true": 3, "pure-fp16": 3,
		"32": 4, "32-true": 4, "float32": 4, "float": 4, "none": 4}}

func (p Precision) String() string               { return precisionSpec.text(uint8(p)) }
func (p Precision) MarshalText() ([]byte, error) { return precisionSpec.marshal(uint8(p)) }
func (p *Precision) UnmarshalText(b []byte) error {
	v, err := precisionSpec.parse(string(b))
	*p = Precision(v)
	return err
}

// ParsePrecision reads a precision name or alias ("bf16", "bf16-mixed", "bf16-true", "fp32", ...).
func ParsePrecision(s string) (Precision, error) {
	v, err := precisionSpec.parse(s)
	return Precision(v), err
}

// Mixed reports whether the precision is torch.autocast over fp32 weights.
func (p Precision) Mixed() bool { return p == BF16Mixed || p == FP16Mixed }

// Compute is the dtype matrix products run in.
func (p Precision) Compute() DType {
	switch p {
	case BF16Mixed, BF16True:
		return BF16
	case FP16Mixed, FP16True:
		return FP16
	}
	return F32
}

// Weights is the dtype the parameters are stored in.
func (p Precision) Weights() DType {
	if p.Mixed() {
		return F32
	}
	return p.Compute()
}

// DType is a tensor element type.
type DType uint8

// DTypes. The zero value means "the default for this field" (filled in by
// the estimate); its text is empty.
const (
	DTypeDefault DType = iota
	F32
	BF16
	FP16
	FP8
)

var dtypeSpec = enumSpec{kind: "dtype", names: []string{"", "fp32", "bf16", "fp16", "fp8"},
	aliases: map[string]int{"default": 0, "float32": 1, "float": 1, "32": 1, "bfloat16": 2, "float16": 3, "half": 3, "int8": 4, "float8": 4}}

func (d DType) String() string               { return dtypeSpec.text(uint8(d)) }
func (d DType) MarshalText() ([]byte, error) { return dtypeSpec.marshal(uint8(d)) }
func (d *DType) UnmarshalText(b []byte) error {
	v, err := dtypeSpec.parse(string(b))
	*d = DType(v)
	return err
}

// Bytes is the element size (0 for DTypeDefault).
func (d DType) Bytes() int64 {
	switch d {
	case F32:
		return 4
	case BF16, FP16:
		return 2
	case FP8:
		return 1
	}
	return 0
}

// Optimizer is the optimizer whose state the estimate counts.
type Optimizer uint8

// Optimizers: AdamW and Adam in PyTorch's default foreach implementation,
// SGD with momentum, Adafactor (factored second moments) and 8-bit AdamW
// (bitsandbytes).
const (
	AdamW Optimizer = iota
	Adam
	SGD
	Adafactor
	AdamW8bit
	// AdamWFused is torch.optim.AdamW(fused=True), the Hugging Face Trainer's
	// default (optim="adamw_torch_fused"): one kernel updates every
	// parameter in place, with no temporaries.
	AdamWFused
)

var optimizerSpec = enumSpec{kind: "optimizer", names: []string{"adamw", "adam", "sgd", "adafactor", "adamw8bit", "adamw-fused"},
	aliases: map[string]int{"adamw_torch": 0, "adamw-torch": 0, "adamw_torch_fused": 5, "adamw-torch-fused": 5, "fused": 5, "adamw_fused": 5,
		"sgd-momentum": 2, "adamw_8bit": 4, "adamw-8bit": 4, "paged_adamw_8bit": 4}}

func (o Optimizer) String() string               { return optimizerSpec.text(uint8(o)) }
func (o Optimizer) MarshalText() ([]byte, error) { return optimizerSpec.marshal(uint8(o)) }
func (o *Optimizer) UnmarshalText(b []byte) error {
	v, err := optimizerSpec.parse(string(b))
	*o = Optimizer(v)
	return err
}

// ParseOptimizer reads an optimizer name.
func ParseOptimizer(s string) (Optimizer, error) {
	v, err := optimizerSpec.parse(s)
	return Optimizer(v), err
}

// Recompute is activation checkpointing: none, selective (Megatron's: the
// attention core is recomputed) or full (every layer keeps only its input;
// Hugging Face gradient_checkpointing_enable, torch.utils.checkpoint per block).
type Recompute uint8

// Recompute modes.
const (
	RecomputeNone Recompute = iota
	RecomputeSelective
	RecomputeFull
)

var recomputeSpec = enumSpec{kind: "recompute", names: []string{"none", "selective", "full"},
	aliases: map[string]int{"off": 0, "no": 0, "false": 0, "checkpoint": 2, "gradient-checkpointing": 2, "ckpt": 2, "on": 2}}

func (r Recompute) String() string               { return recomputeSpec.text(uint8(r)) }
func (r Recompute) MarshalText() ([]byte, error) { return recomputeSpec.marshal(uint8(r)) }
func (r *Recompute) UnmarshalText(b []byte) error {
	v, err := recomputeSpec.parse(string(b))
	*r = Recompute(v)
	return err
}

// ParseRecompute reads a recompute mode.
func ParseRecompute(s string) (Recompute, error) {
	v, err := recomputeSpec.parse(s)
	return Recompute(v), err
}

// Attention is the attention implementation: sdpa (PyTorch's fused
// scaled_dot_product_attention, flash or memory-efficient; also
// FlashAttention) keeps no seq x seq scores; eager materialises them.
type Attention uint8

// Attention implementations.
const (
	AttentionSDPA Attention = iota
	AttentionEager
)

var attentionSpec = enumSpec{kind: "attention", names: []string{"sdpa", "eager"},
	aliases: map[string]int{"flash": 0, "flash_attention_2": 0, "flash-attention": 0, "fused": 0, "math": 1}}

func (a Attention) String() string               { return attentionSpec.text(uint8(a)) }
func (a Attention) MarshalText() ([]byte, error) { return attentionSpec.marshal(uint8(a)) }
func (a *Attention) UnmarshalText(b []byte) error {
	v, err := attentionSpec.parse(string(b))
	*a = Attention(v)
	return err
}

// ParseAttention reads an attention implementation.
func ParseAttention(s string) (Attention, error) {
	v, err := attentionSpec.parse(s)
	return Attention(v), err
}

// Offload is what lives in host memory instead of the GPU.
type Offload uint8

// Offload modes: the optimizer (master weights, optimizer state and fp32
// gradients; DeepSpeed ZeRO-Offload, FSDP CPUOffload's optimizer side) or
// the parameters too (ZeRO-3 / FSDP parameter offload).
const (
	OffloadNone Offload = iota
	OffloadOptimizer
	OffloadParams
)

var offloadSpec = enumSpec{kind: "offload", names: []string{"none", "optimizer", "params"},
	aliases: map[string]int{"": 0, "no": 0, "cpu": 1, "optim": 1, "param": 2, "parameters": 2, "all": 2}}

func (o Offload) String() string               { return offloadSpec.text(uint8(o)) }
func (o Offload) MarshalText() ([]byte, error) { return offloadSpec.marshal(uint8(o)) }
func (o *Offload) UnmarshalText(b []byte) error {
	v, err := offloadSpec.parse(string(b))
	*o = Offload(v)
	return err
}

// TPPlan is how tensor parallelism splits the model. hf is the plan people
// write with torch.distributed.tensor.parallel.parallelize_module for a
// Hugging Face model (q/k/v/gate/up colwise, o/down rowwise; embeddings and
// lm_head replicated, so every rank computes the full logits); megatron
// also splits the embeddings and the output projection over the vocabulary
// (vocab-parallel logits and cross-entropy, loss_parallel in PyTorch).
type TPPlan uint8

// Tensor-parallel plans.
const (
	TPPlanHF TPPlan = iota
	TPPlanMegatron
)

var tpPlanSpec = enumSpec{kind: "tp plan", names: []string{"hf", "megatron"},
	aliases: map[string]int{"huggingface": 0, "parallelize_module": 0, "torch": 0, "vocab-parallel": 1, "loss-parallel": 1, "torchtitan": 1}}

func (p TPPlan) String() string               { return tpPlanSpec.text(uint8(p)) }
func (p TPPlan) MarshalText() ([]byte, error) { return tpPlanSpec.marshal(uint8(p)) }
func (p *TPPlan) UnmarshalText(b []byte) error {
	v, err := tpPlanSpec.parse(string(b))
	*p = TPPlan(v)
	return err
}

// ParseTPPlan reads a tensor-parallel plan name.
func ParseTPPlan(s string) (TPPlan, error) {
	v, err := tpPlanSpec.parse(s)
	return TPPlan(v), err
}

// Where says which counter a term belongs to.
type Where uint8

// Where a term is counted: allocated (torch.cuda.memory_allocated), reserved
// (the caching allocator's overhead on top), device (outside the allocator:
// CUDA context, NCCL) or host (CPU memory: offloaded state, pinned buffers).
const (
	Allocated Where = iota
	Reserved
	OnDevice
	Host
)

var whereSpec = enumSpec{kind: "where", names: []string{"allocated", "reserved", "device", "host"}}

func (w Where) String() string               { return whereSpec.text(uint8(w)) }
func (w Where) MarshalText() ([]byte, error) { return whereSpec.marshal(uint8(w)) }
func (w *Where) UnmarshalText(b []byte) error {
	v, err := whereSpec.parse(string(b))
	*w = Where(v)
	return err
}

// PhaseName names a phase of a step.
type PhaseName uint8

// Phases of a training step (inference has only Forward).
const (
	Forward PhaseName = iota
	Backward
	OptimizerStep
)

var phaseSpec = enumSpec{kind: "phase", names: []string{"forward", "backward", "optimizer_step"},
	aliases: map[string]int{"optimizer": 2}}

func (p PhaseName) String() string               { return phaseSpec.text(uint8(p)) }
func (p PhaseName) MarshalText() ([]byte, error) { return phaseSpec.marshal(uint8(p)) }
func (p *PhaseName) UnmarshalText(b []byte) error {
	v, err := phaseSpec.parse(string(b))
	*p = PhaseName(v)
	return err
}

// Verdict says whether the most loaded rank fits the device.
type Verdict uint8

// Verdicts. Tight: it fits, but with less headroom than the fragmentation
// allowance, which varies from run to run.
const (
	VerdictUnknown Verdict = iota
	Fits
	Tight
	DoesNotFit
)

var verdictSpec = enumSpec{kind: "verdict", names: []string{"unknown", "fits", "tight", "does_not_fit"}}

func (v Verdict) String() string               { return verdictSpec.text(uint8(v)) }
func (v Verdict) MarshalText() ([]byte, error) { return verdictSpec.marshal(uint8(v)) }
func (v *Verdict) UnmarshalText(b []byte) error {
	x, err := verdictSpec.parse(string(b))
	*v = Verdict(x)
	return err
}

// Fit reports whether the verdict is Fits or Tight.
func (v Verdict) Fit() bool { return v == Fits || v == Tight }
