package estimate

import (
	"github.com/ptscope/ptscope/internal/envelope"
	"github.com/ptscope/ptscope/internal/finding"
)

// Term is one labelled amount of memory with the formula that produced it.
type Term struct {
	Name  string `json:"name"`
	Bytes int64  `json:"bytes"`
	// Where: allocated (counted by torch.cuda.memory_allocated), reserved
	// (allocator overhead on top), device (outside the PyTorch allocator) or
	// host (CPU memory).
	Where   Where  `json:"where"`
	Formula string `json:"formula"`
}

// Phase is the allocated memory at the peak of one phase and what it is made of.
type Phase struct {
	Name  PhaseName `json:"name"`
	Bytes int64     `json:"bytes"`
	// At says where in the phase its peak is ("loss", "layer 3 of 32", "end").
	At    string `json:"at,omitempty"`
	Terms []Term `json:"terms"`
}

// Activations describes what one rank keeps for backward.
type Activations struct {
	PerLayer         []ActItem `json:"per_layer"`
	PerLayerBytes    int64     `json:"per_layer_bytes"`
	AttentionBytes   int64     `json:"attention_bytes"` // per layer
	MLPBytes         int64     `json:"mlp_bytes"`       // per layer
	NormBytes        int64     `json:"norm_bytes"`      // per layer
	Layers           int       `json:"layers"`          // on this rank
	InFlight         float64   `json:"in_flight_micro_batches"`
	LayersTotalBytes int64     `json:"layers_total_bytes"`
	Embedding        []ActItem `json:"embedding"`
	Head             []ActItem `json:"head"`
	LogitsBytes      int64     `json:"logits_bytes"`
	LossBytes        int64     `json:"loss_bytes"` // what cross-entropy saves (log-softmax)
	TotalBytes       int64     `json:"total_bytes"`
	// RecomputedLayerBytes: with full recompute, what backward rebuilds for one layer.
	RecomputedLayerBytes int64  `json:"recomputed_layer_bytes,omitempty"`
	ResidualTensorBytes  int64  `json:"residual_tensor_bytes"`
	ResidualTensorHow    string `json:"residual_tensor_formula"`
}

// ModelStates are the full sizes of the model states on one rank (the peak
// phase may hold only part of the gradients).
type ModelStates struct {
	ParametersBytes     int64 `json:"parameters_bytes"`
	GradientsBytes      int64 `json:"gradients_bytes"`
	MasterWeightsBytes  int64 `json:"master_weights_bytes"`
	FP32GradCopyBytes   int64 `json:"fp32_grad_copy_bytes"`
	OptimizerStateBytes int64 `json:"optimizer_state_bytes"`
	// DDPBucketsBytes: DistributedDataParallel's gradient buckets (with
	// gradient_as_bucket_view the gradients live in them and
	// GradientsBytes is 0).
	DDPBucketsBytes int64 `json:"ddp_buckets_bytes"`
}

// Rank is the estimate for one rank (one pipeline stage; all data-,
// tensor- and context-parallel ranks of a stage look alike).
type Rank struct {
	Name   string `json:"name"`
	Stage  int    `json:"stage"`
	Params int64  `json:"params"`
	// PeakAllocatedBytes compares with torch.cuda.max_memory_allocated(),
	// PeakReservedBytes with max_memory_reserved(); DeviceTotalBytes adds
	// what lives outside the allocator (what nvidia-smi shows).
	PeakAllocatedBytes int64 `json:"peak_allocated_bytes"`
	PeakReservedBytes  int64 `json:"peak_reserved_bytes"`
	DeviceTotalBytes   int64 `json:"device_total_bytes"`
	// HostBytes is the CPU memory this rank's offloaded state needs.
	HostBytes int64     `json:"host_bytes"`
	PeakPhase PhaseName `json:"peak_phase"`
	// Terms are the peak phase's allocated terms (they sum to
	// PeakAllocatedBytes) followed by the reserved, device and host terms.
	Terms       []Term      `json:"terms"`
	Phases      []Phase     `json:"phases"`
	Activations Activations `json:"activations"`
	ModelStates ModelStates `json:"model_states"`
	// AllocatorRoundingBytes is how much of the model states is the
	// allocator's block rounding (512 B, and whole 2 MiB blocks for requests
	// over 10 MiB); it is included in their terms.
	AllocatorRoundingBytes int64 `json:"allocator_rounding_bytes"`
}

// Summary is the most loaded rank's outcome: what a user reads first, and
// one row of a sweep.
type Summary struct {
	TopRank            int       `json:"top_rank"` // index in ranks of the most loaded rank
	PeakAllocatedBytes int64     `json:"peak_allocated_bytes"`
	PeakReservedBytes  int64     `json:"peak_reserved_bytes"`
	DeviceTotalBytes   int64     `json:"device_total_bytes"`
	HostBytes          int64     `json:"host_bytes"`
	PeakPhase          PhaseName `json:"peak_phase"`
	Verdict            Verdict   `json:"verdict"`
	// HeadroomBytes is device memory minus DeviceTotalBytes (negative when it
	// does not fit); absent when no device memory is known.
	HeadroomBytes *int64 `json:"headroom_bytes,omitempty"`
}

// Result is an estimate for a model, setup and device: the document of
// `ptscope estimate --json`.
type Result struct {
	envelope.Header
	Model        Model  `json:"model"`
	Setup        Setup  `json:"setup"`
	Device       Device `json:"device"`
	Params       int64  `json:"params"`
	ActiveParams int64  `json:"active_params"` // per token (MoE: top-k experts)
	Summary
	Ranks    []Rank            `json:"ranks"`
	Findings []finding.Finding `json:"findings"`
}

// Top is the most loaded rank.
func (r *Result) Top() *Rank { return &r.Ranks[r.TopRank] }
