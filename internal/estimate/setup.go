package estimate

import (
	"fmt"
)

// Setup is a training (or inference) configuration. Its zero value is not
// useful: start from DefaultSetup, which is the common case of today (bf16
// autocast, AdamW, fused attention, no recompute, one GPU).
type Setup struct {
	Seq        int `json:"seq"`
	MicroBatch int `json:"micro_batch"`
	GradAccum  int `json:"grad_accum"`
	// DType is the precision as people name it (see Precision).
	DType     Precision `json:"dtype"`
	Optimizer Optimizer `json:"optimizer"`
	Recompute Recompute `json:"recompute"`
	Attention Attention `json:"attention"`
	// Compile: torch.compile; its partitioner recomputes pointwise ops in
	// backward instead of saving their outputs.
	Compile     bool `json:"compile"`
	ForwardOnly bool `json:"forward_only"` // inference under torch.no_grad

	DP     int    `json:"dp"`
	TP     int    `json:"tp"`
	TPPlan TPPlan `json:"tp_plan"`
	PP     int    `json:"pp"`
	VPP    int    `json:"vpp"` // virtual stages per pipeline rank (interleaved 1F1B)
	CP     int    `json:"cp"`
	EP     int    `json:"ep"`
	SP     bool   `json:"sp"`
	// Zero: 0 none, 1 optimizer state, 2 + gradients, 3 + parameters, sharded over DP x CP.
	Zero int `json:"zero"`
	// FSDP: PyTorch FSDP2 fully_shard per layer and at the root (ZeRO-3 with
	// per-layer gathers).
	FSDP bool `json:"fsdp"`
	// ParamDType and ReduceDType are FSDP2's MixedPrecisionPolicy: the dtype
	// parameters are gathered (and computed) in, and the dtype gradients are
	// reduce-scattered in. Default: the weights' dtype; the reduce dtype
	// defaults to the param dtype.
	ParamDType  DType   `json:"param_dtype,omitempty"`
	ReduceDType DType   `json:"reduce_dtype,omitempty"`
	Offload     Offload `json:"offload"`
	// DDP: the model is wrapped in DistributedDataParallel, whose reducer
	// allocates gradient buckets (a flat copy of the gradients) when it is
	// built, whatever the world size. Data parallelism without ZeRO or FSDP
	// (dp > 1) implies it; set it for a DDP job of one rank.
	DDP bool `json:"ddp"`
	// DDPBucketView: DistributedDataParallel(gradient_as_bucket_view=True),
	// whose gradients are views into the buckets instead of tensors beside
	// them. It implies DDP.
	DDPBucketView bool `json:"ddp_bucket_view"`

	// GradDType defaults to the weights' dtype; Megatron keeps fp32 gradients for bf16 weights.
	GradDType DType `json:"grad_dtype"`
	// MasterWeights: an fp32 master copy of 16-bit weights in the optimizer
	// (Megatron, DeepSpeed); only with the -true precisions.
	MasterWeights bool `json:"master_weights"`
	// KeepLogits: the caller holds the logits (or the model output) through
	// backward, as in `out = model(x, labels=y); out.loss.backward()`.
	KeepLogits bool `json:"keep_logits"`
	// KeepLogitsStep: ... and through the optimizer step.
	KeepLogitsStep bool `json:"keep_logits_step"`
	// MicroBatches in flight for a pipeline (default GradAccum, at least PP).
	MicroBatches int `json:"micro_batches"`
	// GPUsPerNode is how many ranks share a host, for host memory per node.
	GPUsPerNode int `json:"gpus_per_node"`
	// ExpandableSegments: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True;
	// the allocator grows one mapped range in 2 MiB pages instead of
	// caching split blocks, so the reserved memory stays close to the
	// allocated.
	ExpandableSegments bool `json:"expandable_segments"`
}

// DefaultSetup is one GPU training with bf16 autocast, AdamW and fused
// attention, sequence 2048, micro-batch 1.
func DefaultSetup() Setup {
	return Setup{Seq: 2048, MicroBatch: 1, GradAccum: 1, DType: BF16Mixed, Optimizer: AdamW,
		DP: 1, TP: 1, PP: 1, VPP: 1, CP: 1, EP: 1, KeepLogits: true, KeepLogitsStep: true, GPUsPerNode: 8}
}

// Limits on setup values: far beyond any real run, small enough that no
// byte count overflows.
const (
	maxSeq        = 1 << 24
	maxMicroBatch = 1 << 20
	maxDegree     = 1 << 20
)

// SetupError is an invalid setup value; Field is the flag (and sweep axis)
// name that set it.
type SetupError struct {
	Field string
	Msg   string
}

func (e *SetupError) Error() string { return e.Field + " " + e.Msg }

func setupErr(field, format string, a ...any) error {
	return &SetupError{Field: field, Msg: fmt.Sprintf(format, a...)}
}

// normalize checks a setup against a model and returns the filled-in copy.
func (s Setup) normalize(m Model) (Setup, error) {
	for _, c := range []struct {
		name string
		v    int
		max  int
	}{{"seq", s.Seq, maxSeq}, {"micro-batch", s.MicroBatch, maxMicroBatch}, {"grad-accum", s.GradAccum, maxMicroBatch},
		{"dp", s.DP, maxDegree}, {"tp", s.TP, maxDegree}, {"pp", s.PP, maxDegree}, {"vpp", s.VPP, maxDegree},
		{"cp", s.CP, maxDegree}, {"ep", s.EP, maxDegree}} {
		switch {
		case c.v < 1:
			return s, setupErr(c.name, "%d: must be at least 1", c.v)
		case c.v > c.max:
			return s, setupErr(c.name, "%d: must be at most %d", c.v, c.max)
		}
	}
	if s.MicroBatches < 0 || s.MicroBatches > maxMicroBatch {
		return s, setupErr("micro-batches", "%d: must be between 0 (default) and %d", s.MicroBatches, maxMicroBatch)
	}
	if s.GPUsPerNode < 0 || s.GPUsPerNode > maxDegree {
		return s, setupErr("gpus-per-node", "%d: must be between 1 and %d", s.GPUsPerNode, maxDegree)
	}
	if s.GPUsPerNode == 0 {
		s.GPUsPerNode = 8
	}
	if s.MicroBatches == 0 {
		s.MicroBatches = s.GradAccum
		if s.PP > 1 {
			s.MicroBatches = max(s.GradAccum, s.PP) // 1F1B needs at least pp micro-batches to fill the pipeline
		}
	}
	for _, c := range []struct {
		name string
		ok   bool
	}{{"dtype", int(s.DType) < len(precisionSpec.names)}, {"optimizer", int(s.Optimizer) < len(optimizerSpec.names)},
		{"recompute", int(s.Recompute) < len(recomputeSpec.names)}, {"attention", int(s.Attention) < len(attentionSpec.names)},
		{"tp-plan", int(s.TPPlan) < len(tpPlanSpec.names)}, {"offload", int(s.Offload) < len(offloadSpec.names)},
		{"grad-dtype", int(s.GradDType) < len(dtypeSpec.names)}, {"param-dtype", int(s.ParamDType) < len(dtypeSpec.names)},
		{"reduce-dtype", int(s.ReduceDType) < len(dtypeSpec.names)}} {
		if !c.ok {
			return s, setupErr(c.name, "has an invalid value")
		}
	}
	switch {
	case s.Seq > m.SeqMax && m.PositionEmbedding == "learned":
		return s, setupErr("seq", "%d exceeds the model's %d learned positions", s.Seq, m.SeqMax)
	case s.Zero < 0 || s.Zero > 3:
		return s, setupErr("zero", "%d: want a stage 0..3", s.Zero)
	case m.Layers%s.PP != 0:
		return s, setupErr("pp", "%d does not divide the model's %d layers", s.PP, m.Layers)
	case s.VPP > 1 && (m.Layers/s.PP)%s.VPP != 0:
		return s, setupErr("vpp", "%d does not divide the %d layers per stage", s.VPP, m.Layers/s.PP)
	case m.Heads%s.TP != 0 || (m.KVHeads%s.TP != 0 && s.TP%m.KVHeads != 0):
		return s, setupErr("tp", "%d does not divide the model's %d heads / %d kv heads", s.TP, m.Heads, m.KVHeads)
	case s.Seq%s.CP != 0:
		return s, setupErr("cp", "%d does not divide seq %d", s.CP, s.Seq)
	case s.EP > 1 && (m.Experts == 0 || m.Experts%s.EP != 0):
		return s, setupErr("ep", "%d needs a model whose experts (%d) it divides", s.EP, m.Experts)
	case (s.ParamDType != DTypeDefault || s.ReduceDType != DTypeDefault) && !s.FSDP:
		return s, setupErr("param-dtype", "and --reduce-dtype are FSDP's MixedPrecisionPolicy: they need --fsdp")
	case (s.DDP || s.DDPBucketView) && (s.FSDP || s.Zero > 0):
		return s, setupErr(ifStr(s.DDPBucketView, "ddp-bucket-view", "ddp"), "is DistributedDataParallel: it does not combine with --zero or --fsdp")
	}
	if s.DDPBucketView || (s.DP > 1 && s.Zero == 0 && !s.FSDP) {
		s.DDP = true
	}
	if s.ForwardOnly {
		s.DDP, s.DDPBucketView = false, false // no backward, no buckets in use
	}
	if s.SP && s.TP == 1 {
		s.SP = false
	}
	if s.FSDP && s.Zero < 3 {
		s.Zero = 3
	}
	if s.Offload == OffloadParams && s.Zero < 3 {
		return s, setupErr("offload", "params needs --zero 3 or --fsdp")
	}
	if s.MasterWeights && s.DType.Weights() == F32 {
		s.MasterWeights = false // fp32 weights are their own master copy
	}
	if s.FSDP {
		if s.ParamDType == DTypeDefault {
			s.ParamDType = s.DType.Weights()
		}
		if s.ReduceDType == DTypeDefault {
			s.ReduceDType = s.ParamDType
		}
	}
	if s.GradDType == DTypeDefault {
		s.GradDType = s.DType.Weights()
	}
	if s.ForwardOnly {
		s.Optimizer, s.GradAccum, s.MicroBatches, s.Recompute = AdamW, 1, 1, RecomputeNone
	}
	if err := checkMagnitude(m, s); err != nil {
		return s, err
	}
	return s, nil
}

// checkMagnitude refuses setups whose byte counts would overflow: it bounds
// the largest products the estimate forms (eager attention scores, logits,
// MLP rows, model states) in floating point.
func checkMagnitude(m Model, s Setup) error {
	tokens := float64(s.MicroBatch) * float64(s.Seq)
	perLayer := tokens * (float64(m.Heads)*float64(s.Seq)*16 + float64(m.Hidden)*64 +
		float64(max(m.FFN, m.MoEFFN))*float64(max(m.TopK, 1))*64 + float64(m.Heads*m.HeadDim+2*m.KVHeads*m.HeadDim)*16 +
		float64(m.Experts)*8)
	total := float64(m.Layers)*perLayer*float64(s.MicroBatches) + tokens*float64(m.Vocab)*32 + float64(m.Params())*64
	if total > 1<<61 {
		return setupErr("seq", "%d x micro-batch %d is too large to estimate for %s (over 2^61 bytes)", s.Seq, s.MicroBatch, m.Name)
	}
	return nil
}
