package estimate

import "fmt"

// modelStates computes the persistent memory of the stage: parameters,
// gradients, master weights, optimizer state, DDP buckets and the cuBLAS
// workspaces, and what offloading moves to host memory.
func (st *stage) modelStates() {
	s, sh := st.s, st.sh
	pdesc := fmt.Sprintf("%d params on this rank", st.params())
	st.W = st.all(sh.pb, st.shardP)
	offParams := s.Offload == OffloadParams
	if offParams {
		st.W = 0
	}
	st.note("parameters", Allocated, st.W, "%s · %d B%s", pdesc, sh.pb, shardNote(st.shardP, "params"))
	st.G = st.all(sh.gb, st.shardG)
	if offParams {
		st.G = 0 // the sharded gradients are copied to the host as they are reduced
	}
	st.vocabG = st.vocabParallelEmbeddingGrad()
	st.G += st.vocabG
	if !s.ForwardOnly {
		if s.DDP {
			st.ddpBuckets()
		}
		if s.DDPBucketView {
			st.note("gradients", Allocated, st.G, "views into the DDP buckets (gradient_as_bucket_view=True): nothing beside them")
		} else {
			st.note("gradients", Allocated, st.G, "%s · %d B (%s)%s%s", pdesc, sh.gb, s.GradDType, shardNote(st.shardG, "grads"), st.vocabGradNote())
		}
		if s.MasterWeights {
			st.master = st.all(4, st.shardO)
			if sh.gb < 4 {
				st.gradCopy = st.all(4, st.shardO)
			}
		}
		st.optState, st.optTemp = st.optimizer()
		if s.Offload != OffloadNone {
			st.offloadHost(pdesc)
			st.master, st.gradCopy, st.optState, st.optTemp = 0, 0, 0, 0
		}
		st.note("master_weights", Allocated, st.master, "fp32 copy of 16-bit params: %s · 4 B%s", pdesc, shardNote(st.shardO, "optimizer"))
		if st.gradCopy > 0 {
			st.note("fp32_grad_copy", Allocated, st.gradCopy, "fp32 gradients for the optimizer: %s · 4 B%s", pdesc, shardNote(st.shardO, "optimizer"))
		}
		st.note("optimizer_state", Allocated, st.optState, "%s: %s%s", s.Optimizer, optStateFormula(s.Optimizer, sh.stateBytes), shardNote(st.shardO, "optimizer"))
	}
	st.ws = st.dev.CublasWorkspaceBytes
	st.note("cublas_workspace", Allocated, st.ws, "cuBLAS + cuBLASLt workspaces allocated through the caching allocator (%s)", st.dev.Arch)
}

// vocabParallelEmbeddingGrad is what the megatron plan's embedding gradient
// holds beyond its shard. The plan splits the embedding over the vocabulary
// as PyTorch writes it (RowwiseParallel on embed_tokens): DTensor computes
// the embedding's gradient for the whole vocabulary and keeps the local rows
// as a view of it, so the full vocab x hidden storage stays with the
// gradient until it is freed.
func (st *stage) vocabParallelEmbeddingGrad() int64 {
	s := st.s
	if !st.first || s.TP == 1 || s.TPPlan != TPPlanMegatron || st.shardG > 1 || s.Offload == OffloadParams || s.ForwardOnly {
		return 0
	}
	full := int64(st.m.Vocab) * int64(st.m.Hidden) * st.sh.gb
	return blockBytes(full) - blockBytes(full/int64(s.TP))
}

func (st *stage) vocabGradNote() string {
	if st.vocabG == 0 {
		return ""
	}
	return fmt.Sprintf(" + %d B: the megatron plan's embedding gradient keeps the whole vocabulary's storage (DTensor computes it whole and keeps the local rows as a view): vocab·h·%d·(1-1/%d)", st.vocabG, st.sh.gb, st.s.TP)
}

// ddpBuckets are DistributedDataParallel's gradient buckets. The reducer
// allocates them when DDP wraps the model (Reducer::initialize_buckets, one
// flat tensor per bucket of about 25 MiB in the gradients' dtype), whatever
// the world size, and keeps them: they are allocated in every phase. Without
// gradient_as_bucket_view each gradient is copied into its bucket and the
// gradients are tensors of their own beside them; with it the gradients are
// views into the buckets and take nothing more.
func (st *stage) ddpBuckets() {
	s, sh := st.s, st.sh
	st.ddp = round512(st.raw(sh.gb, st.shardG))
	if s.DDPBucketView {
		st.G = 0
		st.note("ddp_buckets", Allocated, st.ddp, "DistributedDataParallel gradient buckets, allocated when DDP wraps the model: params · %d B; the gradients are views into them (gradient_as_bucket_view=True)", sh.gb)
		return
	}
	st.note("ddp_buckets", Allocated, st.ddp, "DistributedDataParallel gradient buckets, allocated when DDP wraps the model: a flat copy of the gradients, params · %d B (gradient_as_bucket_view=False: the gradients are tensors beside them)", sh.gb)
}

// optimizer is the optimizer state and the step's temporaries.
func (st *stage) optimizer() (state, temp int64) {
	s, sh := st.s, st.sh
	sb := sh.stateBytes
	switch s.Optimizer {
	case AdamW, Adam:
		return 2 * st.all(sb, st.shardO), st.adamTemp(sb)
	case AdamWFused:
		return 2 * st.all(sb, st.shardO), 0
	case SGD:
		return st.all(sb, st.shardO), 0
	case AdamW8bit:
		return 2 * st.all(1, st.shardO), 0
	case Adafactor:
		var big int64
		fact := func(ts []tensor) (n int64) {
			for _, t := range ts {
				f := t.numel
				if t.rows > 0 {
					f = t.rows + t.cols
				}
				n += round512(ceilDiv(f, t.shardOver(st.shardO)) * sb)
				big = max(big, t.numel)
			}
			return n
		}
		state = int64(st.L)*fact(st.layerTs) + fact(st.otherTs) // factored second moments
		return state, round512(ceilDiv(big, st.shardO) * sb)
	}
	return 0, 0
}

// adamTemp is what the AdamW (Adam) step allocates beyond the state. The
// foreach implementation, PyTorch's default, computes sqrt(exp_avg_sq) for
// every parameter at once (then divides and adds in place). With tensor
// parallelism the parameters mix DTensors (the sharded layers) and plain
// tensors (norms, and the hf plan's replicated embeddings and lm_head), which
// one foreach call cannot take, so the step runs the for-loop implementation:
// one parameter at a time, denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt)
// holds two tensors of the largest parameter at once.
func (st *stage) adamTemp(sb int64) int64 {
	if st.s.TP == 1 {
		return st.all(sb, st.shardO)
	}
	var big int64
	each := func(ts []tensor) {
		for _, t := range ts {
			big = max(big, blockBytes(ceilDiv(t.numel, t.shardOver(st.shardO))*sb))
		}
	}
	each(st.layerTs)
	each(st.otherTs)
	return 2 * big
}

// offloadHost lists the host memory of CPU offload: the optimizer runs on
// the CPU over fp32 master weights, fp32 gradients and its state (DeepSpeed
// ZeRO-Offload, FSDP2 CPUOffloadPolicy), all in pinned memory; parameter
// offload keeps the 16-bit parameters there too.
func (st *stage) offloadHost(pdesc string) {
	s := st.s
	n := st.raw(4, st.shardO)
	var state int64
	switch s.Optimizer {
	case AdamW, Adam, AdamWFused:
		state = 2 * n
	case SGD:
		state = n
	case AdamW8bit:
		state = 2 * st.raw(1, st.shardO)
	case Adafactor:
		state, _ = st.optimizer()
	}
	st.host = append(st.host,
		Term{"host_master_weights", n, Host, fmt.Sprintf("fp32 parameters the CPU optimizer updates: %s · 4 B%s", pdesc, shardNote(st.shardO, "optimizer"))},
		Term{"host_gradients", n, Host, fmt.Sprintf("fp32 gradients copied to the CPU: %s · 4 B%s", pdesc, shardNote(st.shardO, "optimizer"))},
		Term{"host_optimizer_state", state, Host, fmt.Sprintf("%s state on the CPU: %s%s", s.Optimizer, optStateFormula(s.Optimizer, 4), shardNote(st.shardO, "optimizer"))})
	if s.Offload == OffloadParams && st.sh.pb < 4 {
		p := st.raw(st.sh.pb, st.shardP)
		st.host = append(st.host, Term{"host_parameters", p, Host,
			fmt.Sprintf("%d-byte parameters kept on the CPU between uses: %s · %d B%s", st.sh.pb, pdesc, st.sh.pb, shardNote(st.shardP, "params"))})
	}
}

func optStateFormula(o Optimizer, sb int64) string {
	switch o {
	case AdamW, Adam, AdamWFused:
		return fmt.Sprintf("exp_avg + exp_avg_sq = 2 · %d B/param", sb)
	case SGD:
		return fmt.Sprintf("momentum buffer = %d B/param", sb)
	case AdamW8bit:
		return "two 8-bit states = 2 B/param"
	case Adafactor:
		return fmt.Sprintf("factored second moment: (rows + cols) · %d B per matrix", sb)
	}
	return ""
}

func optTempFormula(o Optimizer, s Setup) string {
	switch {
	case (o == AdamW || o == Adam) && s.TP > 1:
		return "for-loop AdamW (foreach cannot mix DTensor and plain tensors): sqrt(exp_avg_sq) and its quotient for the largest parameter (2 · its state bytes)"
	case o == AdamW || o == Adam:
		return "foreach AdamW: sqrt(exp_avg_sq) for all parameters at once (1 · state bytes/param)"
	case o == AdamWFused:
		return "fused AdamW: one kernel updates in place, no temporaries"
	case o == Adafactor:
		return "one update tensor of the largest parameter"
	}
	return "in-place update, no temporaries"
}
