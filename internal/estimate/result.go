package estimate

// Term is one labelled amount of memory with the formula that produced it.
type Term struct {
	Name    string `json:"name"`
	Bytes   int64  `json:"bytes"`
	Formula string `json:"formula"`
	// Where: "allocated" (counted by torch.cuda.memory_allocated), "reserved" (allocator
	// overhead on top) or "device" (outside the PyTorch allocator).
	Where string `json:"where"`
}

// Phase is the allocated memory at the peak of one phase and what it is made of.
type Phase struct {
	Name  string `json:"name"`
	Bytes int64  `json:"bytes"`
	Terms []Term `json:"terms"`
}

// Activations describes what one rank keeps for backward.
type Activations struct {
	PerLayer          []ActItem `json:"per_layer"`
	PerLayerBytes     int64     `json:"per_layer_bytes"`
	AttentionBytes    int64     `json:"attention_bytes"` // per layer
	MLPBytes          int64     `json:"mlp_bytes"`       // per layer
	NormBytes         int64     `json:"norm_bytes"`      // per layer
	Layers            int       `json:"layers"`          // on this rank
	InFlight          float64   `json:"in_flight_micro_batches"`
	LayersTotalBytes  int64     `json:"layers_total_bytes"`
	Embedding         []ActItem `json:"embedding"`
	Head              []ActItem `json:"head"`
	LogitsBytes       int64     `json:"logits_bytes"`
	LossBytes         int64     `json:"loss_bytes"` // fp32 log-softmax saved by cross-entropy
	TotalBytes        int64     `json:"total_bytes"`
	RecomputedLayer   int64     `json:"recomputed_layer_bytes,omitempty"`
	ResidualTensor    int64     `json:"residual_tensor_bytes"`
	ResidualTensorHow string    `json:"residual_tensor_formula"`
}

// Rank is the estimate for one rank (one pipeline stage).
type Rank struct {
	Name               string      `json:"name"`
	Stage              int         `json:"stage"`
	Params             int64       `json:"params"`
	PeakAllocatedBytes int64       `json:"peak_allocated_bytes"`
	PeakReservedBytes  int64       `json:"peak_reserved_bytes"`
	DeviceTotalBytes   int64       `json:"device_total_bytes"`
	PeakPhase          string      `json:"peak_phase"`
	Terms              []Term      `json:"terms"`
	Phases             []Phase     `json:"phases"`
	Activations        Activations `json:"activations"`
	// ModelStates are the full sizes of parameters, gradients, optimizer state and master
	// weights on this rank (the peak phase may hold only part of the gradients).
	ModelStates map[string]int64 `json:"model_states"`
	// AllocatorRounding is how much of the model states is the allocator's block rounding
	// (512 B, and whole 2 MiB blocks for requests over 10 MiB); it is included in their terms.
	AllocatorRounding   int64 `json:"allocator_rounding_bytes"`
	persistentAllocated int64
}

// Result is an estimate for a model, setup and device.
type Result struct {
	Model  Model  `json:"model"`
	Setup  Setup  `json:"setup"`
	Device Device `json:"device"`
	Params int64  `json:"params"`
	Ranks  []Rank `json:"ranks"`
	Top    int    `json:"-"` // index of the most loaded rank
}

// TopRank is the most loaded rank.
func (r *Result) TopRank() *Rank { return &r.Ranks[r.Top] }

// Fits reports whether the most loaded rank fits the device (false when no memory size is known).
func (r *Result) Fits() (fits, known bool) {
	if r.Device.MemoryBytes <= 0 {
		return false, false
	}
	return r.TopRank().DeviceTotalBytes <= r.Device.MemoryBytes, true
}
