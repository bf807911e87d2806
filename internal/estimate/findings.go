package estimate

import (
	"fmt"

	"github.com/ptscope/ptscope/internal/finding"
	"github.com/ptscope/ptscope/internal/units"
)

// findings are the verdict when it is not a plain fit, the levers that
// would make the most loaded rank fit (largest saving first), and notes on
// the setup that change what the numbers mean.
func findings(r *Result) []finding.Finding {
	fs := []finding.Finding{}
	s, top := r.Setup, r.Top()
	nums := finding.Numbers{"device_total_bytes": float64(top.DeviceTotalBytes), "device_memory_bytes": float64(r.Device.MemoryBytes)}
	if r.HeadroomBytes != nil {
		nums["headroom_bytes"] = float64(*r.HeadroomBytes)
	}
	switch r.Verdict {
	case DoesNotFit:
		fs = append(fs, finding.New("does-not-fit", finding.Critical, nums,
			fmt.Sprintf("%s needs %s on its most loaded rank (%s), %s more than the %s of %s", r.Model.Name,
				units.Bytes(top.DeviceTotalBytes), top.Name, units.Bytes(-*r.HeadroomBytes), units.Bytes(r.Device.MemoryBytes), r.Device.Name),
			"see the levers below, largest saving first"))
	case Tight:
		nums["fragmentation_allowance_bytes"] = float64(termBytes(top.Terms, "fragmentation_allowance"))
		fs = append(fs, finding.New("tight-fit", finding.Warning, nums,
			fmt.Sprintf("fits %s with %s to spare, less than the %s fragmentation allowance, which varies from run to run",
				r.Device.Name, units.Bytes(*r.HeadroomBytes), units.Bytes(termBytes(top.Terms, "fragmentation_allowance"))),
			"leave more headroom, or set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to cut fragmentation"))
	}
	if r.Verdict == DoesNotFit || r.Verdict == Tight {
		fs = append(fs, levers(r)...)
	}
	a := top.Activations
	if s.TP > 1 && s.TPPlan == TPPlanHF && !s.ForwardOnly {
		rep := top.Activations.LogitsBytes + top.Activations.LossBytes
		fs = append(fs, finding.New("replicated-logits", finding.Info, finding.Numbers{"logits_bytes": float64(a.LogitsBytes), "loss_bytes": float64(a.LossBytes)},
			fmt.Sprintf("with the hf tensor-parallel plan every rank holds the full embeddings, output projection and logits (%s of logits and loss per rank)", units.Bytes(rep)),
			"split them over the vocabulary (--tp-plan megatron: embed_tokens RowwiseParallel, lm_head ColwiseParallel with loss_parallel)"))
	}
	if top.HostBytes > 0 {
		node := min(s.GPUsPerNode, s.DP*s.TP*s.PP*s.CP)
		fs = append(fs, finding.New("offload-host-memory", finding.Info,
			finding.Numbers{"host_bytes": float64(top.HostBytes), "host_node_bytes": float64(top.HostBytes * int64(node))},
			fmt.Sprintf("CPU offload moves %s per rank to host memory (%s for the %d ranks of one node), pinned", units.Bytes(top.HostBytes), units.Bytes(top.HostBytes*int64(node)), node),
			"check the host's free memory: pinned memory cannot be swapped"))
	}
	if s.Attention == AttentionEager && !s.ForwardOnly {
		if b := itemBytes(a.PerLayer, "attention_scores"); b > 0 {
			fs = append(fs, finding.New("eager-attention-scores", finding.Info, finding.Numbers{"per_layer_bytes": float64(b)},
				fmt.Sprintf("eager attention keeps the seq x seq scores: %s per layer", units.Bytes(b)),
				"use attn_implementation=\"sdpa\" (or flash_attention_2): fused attention keeps only the softmax statistics"))
		}
	}
	finding.Sort(fs)
	return fs
}

func itemBytes(its []ActItem, name string) int64 {
	for _, it := range its {
		if it.Name == name {
			return it.Bytes
		}
	}
	return 0
}

// levers suggest the usual changes for the most loaded rank.
func levers(r *Result) []finding.Finding {
	s, top := r.Setup, r.Top()
	a := top.Activations
	var fs []finding.Finding
	lever := func(id string, saving int64, msg, rec string) {
		var n finding.Numbers
		if saving > 0 {
			n = finding.Numbers{"saving_bytes": float64(saving)}
		}
		fs = append(fs, finding.New(id, finding.Info, n, msg, rec))
	}
	if s.TP > 1 && !s.SP {
		lever("try-sequence-parallel", int64(float64(a.NormBytes)*float64(a.Layers)*a.InFlight*(1-1/float64(s.TP))),
			fmt.Sprintf("tensor parallelism replicates the %s of norm inputs and outputs per layer", units.Bytes(a.NormBytes)),
			"--sp (sequence parallelism) shards them over the tensor-parallel ranks")
	}
	if s.Recompute != RecomputeFull && !s.ForwardOnly && a.LayersTotalBytes > 0 {
		kept := int64(float64(a.Layers) * a.InFlight * float64(a.ResidualTensorBytes))
		lever("try-recompute", a.LayersTotalBytes-kept,
			fmt.Sprintf("the layers keep %s of activations for backward", units.Bytes(a.LayersTotalBytes)),
			"--recompute full (gradient_checkpointing_enable) keeps only each layer's input and recomputes the rest in backward")
	}
	if !s.ForwardOnly && s.Zero < 3 && s.DP*s.CP > 1 {
		lever("try-zero", 0, fmt.Sprintf("model states are sharded at ZeRO stage %d over %d data-parallel ranks", s.Zero, s.DP*s.CP),
			fmt.Sprintf("--zero %d (or --fsdp) shards more of them", s.Zero+1))
	}
	if s.MicroBatch > 1 {
		lever("try-smaller-micro-batch", 0, fmt.Sprintf("micro-batch %d", s.MicroBatch),
			"a smaller --micro-batch with more --grad-accum keeps the same global batch")
	}
	return fs
}
