package estimate

import "fmt"

// ActItem is one tensor autograd keeps for backward, in one layer (or the embedding or head),
// for one micro-batch on one rank.
type ActItem struct {
	Name    string `json:"name"`
	Group   string `json:"group"` // attention | mlp | norm | embedding | head
	Bytes   int64  `json:"bytes"`
	Formula string `json:"formula"`
}

// shape holds the sizes one rank sees, derived from the model and setup.
type shape struct {
	m          Model
	s          Setup
	tokens     int64 // b * s / cp: tokens of one micro-batch on this rank
	seqLocal   int64 // s / cp
	res, act   int64 // bytes per element of the residual stream and of matmul activations
	t          int64 // tensor-parallel degree
	seqShard   int64 // t with sequence parallelism, else 1 (LayerNorm/dropout regions)
	vocabShard int64 // t when the logits are split over the vocabulary (Megatron plan), else 1
	amp        bool  // torch.autocast over fp32 weights: weight casts cached, residual stream fp32
	training   bool
	pb, gb     int64 // stored parameter and gradient bytes
	ub         int64 // bytes of an unsharded (gathered) parameter: FSDP's param dtype
	stateBytes int64 // optimizer state element size
}

func newShape(m Model, s Setup) shape {
	compute := s.DType.Compute()
	amp := s.DType.Mixed()
	ub := s.DType.Weights().Bytes()
	if s.FSDP && s.ParamDType.Bytes() < ub {
		// MixedPrecisionPolicy: layers run on gathered 16-bit parameters, so
		// autocast has nothing to cast and the residual stream is 16-bit
		compute, amp, ub = s.ParamDType, false, s.ParamDType.Bytes()
	}
	sh := shape{m: m, s: s, act: compute.Bytes(), t: int64(s.TP), seqShard: 1, vocabShard: 1, amp: amp,
		training: !s.ForwardOnly, pb: s.DType.Weights().Bytes(), gb: s.GradDType.Bytes(), ub: ub}
	sh.res = sh.act
	if amp {
		sh.res = 4 // embeddings, residual adds and LayerNorm run in fp32 under autocast
	}
	if s.SP {
		sh.seqShard = sh.t
	}
	if s.TPPlan == TPPlanMegatron {
		sh.vocabShard = sh.t
	}
	sh.seqLocal = int64(s.Seq / s.CP)
	sh.tokens = int64(s.MicroBatch) * sh.seqLocal
	sh.stateBytes = 4
	if !s.MasterWeights && sh.pb < 4 {
		sh.stateBytes = sh.pb // pure 16-bit training: optimizer state in the parameter dtype
	}
	return sh
}

func (sh shape) item(name, group string, bytes int64, formula string, a ...any) ActItem {
	return ActItem{Name: name, Group: group, Bytes: bytes, Formula: fmt.Sprintf(formula, a...)}
}

// mlpTokens is the number of token rows an MLP (or the experts) processes per layer.
func (sh shape) mlpTokens() (int64, int64) {
	if sh.m.Experts > 0 {
		return sh.tokens * int64(sh.m.TopK), int64(sh.m.MoEFFN)
	}
	return sh.tokens, int64(sh.m.FFN)
}

// layerSaved lists what one layer keeps for backward (no recompute), per micro-batch.
func (sh shape) layerSaved(selective bool) []ActItem {
	m, T, t, sq := sh.m, sh.tokens, sh.t, sh.seqShard
	h := int64(m.Hidden)
	q, kv := int64(m.Heads)*int64(m.HeadDim), int64(m.KVHeads)*int64(m.HeadDim)
	a := int64(m.Heads)
	var its []ActItem
	add := func(it ActItem) { its = append(its, it) }
	resName, actName := dname(sh.res), dname(sh.act)
	stats := int64(8)
	if m.Norm == "rmsnorm" {
		stats = 4
	}
	add(sh.item("norm1_input", "norm", T*h*sh.res/sq, "tokens·h·%s/%d = %d·%d·%d/%d", resName, sq, T, h, sh.res, sq))
	add(sh.item("norm1_output", "norm", T*h*sh.act/sq, "tokens·h·%s/%d (matmul input%s)", actName, sq, ampNote(sh.amp)))
	add(sh.item("norm_stats", "norm", 2*T*stats/sq, "2 norms·tokens·%d B (fp32 mean/rstd)", stats))
	add(sh.item("qkv", "attention", T*(q+2*kv)*sh.act/t, "tokens·(q+2kv)·%s/t = %d·%d·%d/%d", actName, T, q+2*kv, sh.act, t))
	if sh.s.Attention == AttentionSDPA {
		add(sh.item("attention_logsumexp", "attention", T*a*4/t, "tokens·heads·4/t (fused attention saves only the softmax statistics)"))
	} else if !selective {
		// eager attention: softmax output, its low-precision copy and dropout
		per := int64(4)
		f := "fp32 softmax"
		switch {
		case sh.amp:
			per = 4 + sh.act
			f = "fp32 softmax + bf16 copy"
		case sh.act < 4:
			per = sh.act
			f = "softmax"
		}
		if m.Dropout > 0 {
			per += 1 + sh.act
			f += " + dropout mask + dropout output"
		}
		add(sh.item("attention_scores", "attention", T*a*sh.seqLocal*per/t, "tokens·heads·seq·%d/t (%s) = %d·%d·%d·%d/%d", per, f, T, a, sh.seqLocal, per, t))
	}
	add(sh.item("attention_output", "attention", T*q*sh.act/t, "tokens·q·%s/t", actName))
	if m.Dropout > 0 {
		add(sh.item("attention_dropout_mask", "attention", T*h/sq, "tokens·h·1 B"))
	}
	if m.HFUseCache {
		add(sh.item("kv_cache", "attention", T*2*kv*sh.act/t, "tokens·2kv·%s/t (use_cache=True returns K and V copies)", actName))
	}
	add(sh.item("norm2_input", "norm", T*h*sh.res/sq, "tokens·h·%s/%d", resName, sq))
	add(sh.item("norm2_output", "norm", T*h*sh.act/sq, "tokens·h·%s/%d (matmul input%s)", actName, sq, ampNote(sh.amp)))
	rows, f := sh.mlpTokens()
	if m.Experts > 0 {
		add(sh.item("router_logits", "mlp", T*int64(m.Experts)*4, "tokens·experts·4"))
		add(sh.item("expert_input", "mlp", rows*h*sh.act/sq, "tokens·top_k·h·%s", actName))
	}
	switch {
	case m.MLP == "swiglu":
		add(sh.item("gate_up_output", "mlp", rows*2*f*sh.act/t, "rows·2ffn·%s/t = %d·%d·%d/%d", actName, rows, 2*f, sh.act, t))
		add(sh.item("silu_output", "mlp", rows*f*sh.act/t, "rows·ffn·%s/t", actName))
		add(sh.item("product_output", "mlp", rows*f*sh.act/t, "rows·ffn·%s/t (fc2 input)", actName))
	default:
		add(sh.item("fc1_output", "mlp", rows*f*sh.act/t, "rows·ffn·%s/t = %d·%d·%d/%d", actName, rows, f, sh.act, t))
		if m.Activation == "gelu_tanh_python" {
			per := 3 * sh.act
			if sh.amp {
				// pow is an fp32 autocast op: it saves an fp32 copy of its input, and the chain
				// after it is promoted, so tanh and 1+tanh are fp32; 0.5·x stays 16-bit (seen in
				// the fixtures' gpt2tiny_train_bf16 allocator history: 3 fp32 + 1 bf16 per layer)
				per = 4 + 4 + 4 + sh.act
			} else if sh.act == 4 {
				per = 12
			}
			add(sh.item("gelu_intermediates", "mlp", rows*f*per/t, "rows·ffn·%d/t (Python tanh-GELU: tanh, 1+tanh, 0.5x%s)", per, ifStr(sh.amp, " and pow's fp32 input copy", "")))
		}
		add(sh.item("gelu_output", "mlp", rows*f*sh.act/t, "rows·ffn·%s/t (fc2 input)", actName))
	}
	if m.Dropout > 0 {
		add(sh.item("mlp_dropout_mask", "mlp", T*h/sq, "tokens·h·1 B"))
	}
	return its
}

// layerFull is a recomputed layer's saved input only.
func (sh shape) layerCheckpointed() []ActItem {
	h := int64(sh.m.Hidden)
	its := []ActItem{sh.item("layer_input", "norm", sh.tokens*h*sh.res/sh.seqShard, "tokens·h·%s (checkpointed block input)", dname(sh.res))}
	if sh.m.HFUseCache {
		kv := int64(sh.m.KVHeads) * int64(sh.m.HeadDim)
		its = append(its, sh.item("kv_cache", "attention", sh.tokens*2*kv*sh.act/sh.t, "tokens·2kv·%s/t", dname(sh.act)))
	}
	return its
}

// embeddingSaved is what the first stage keeps per micro-batch outside the layers.
func (sh shape) embeddingSaved() []ActItem {
	its := []ActItem{sh.item("token_ids", "embedding", 16*sh.tokens, "tokens·(8 B ids + 8 B labels)")}
	if sh.m.Dropout > 0 {
		its = append(its, sh.item("embedding_dropout_mask", "embedding", sh.tokens*int64(sh.m.Hidden)/sh.seqShard, "tokens·h·1 B"))
	}
	return its
}

// headSaved is what the last stage keeps for the final norm and output projection.
func (sh shape) headSaved() []ActItem {
	h := int64(sh.m.Hidden)
	return []ActItem{
		sh.item("final_norm_input", "head", sh.tokens*h*sh.res/sh.seqShard, "tokens·h·%s", dname(sh.res)),
		sh.item("final_norm_output", "head", sh.tokens*h*sh.act/sh.seqShard, "tokens·h·%s (output projection input)", dname(sh.act)),
	}
}

// logitsBytes is the logits tensor; lossSavedBytes the fp32 log-softmax cross-entropy keeps.
func (sh shape) logitsBytes() int64 { return sh.vocabRowBytes(sh.act) }

// vocabRowBytes is a tokens x vocab tensor of b-byte elements on this rank.
func (sh shape) vocabRowBytes(b int64) int64 {
	return sh.tokens * int64(sh.m.Vocab) * b / sh.vocabShard
}

func sumItems(its []ActItem) int64 {
	var n int64
	for _, it := range its {
		n += it.Bytes
	}
	return n
}

func groupBytes(its []ActItem, g string) int64 {
	var n int64
	for _, it := range its {
		if it.Group == g {
			n += it.Bytes
		}
	}
	return n
}

func dname(b int64) string {
	switch b {
	case 4:
		return "4 B"
	case 2:
		return "2 B"
	}
	return fmt.Sprintf("%d B", b)
}

func ampNote(amp bool) string {
	if amp {
		return ", the autocast low-precision copy"
	}
	return ""
}

// KorthikantiPerLayer is Korthikanti et al. 2022 (arXiv:2205.05198) Table 2: activation bytes per
// layer for 16-bit activations with dropout, for tensor parallel degree t, with or without sequence
// parallelism and selective recompute.
func KorthikantiPerLayer(s, b, h, a, t int64, sp, selective bool) float64 {
	sbh := float64(s * b * h)
	attn := 5 * float64(a*s) / float64(h*t)
	if selective {
		attn = 0
	}
	if sp {
		return sbh * (34/float64(t) + attn)
	}
	return sbh * (10 + 24/float64(t) + attn)
}

// The loss. F.cross_entropy is log_softmax(x, dtype=x.dtype) then nll_loss. On fp32 logits the
// log-softmax (tokens x vocab x 4 B) is saved and backward adds nll_loss's gradient and
// log_softmax's gradient. Under autocast the log-softmax stays 16-bit and nll_loss (an fp32
// autocast op) saves an fp32 copy of it; backward then adds only nll_loss's fp32 gradient before
// the copy is released. Hugging Face models call logits.float() first (LossUpcast): the fp32 path.

// Without autocast, 16-bit training code (Megatron, Hugging Face) computes the loss on fp32 logits.
func (sh shape) lossFP32() bool { return sh.act >= 4 || sh.m.LossUpcast || !sh.amp }

// lossSaved is what the loss keeps for backward.
func (sh shape) lossSaved() int64 {
	if sh.lossFP32() {
		return sh.vocabRowBytes(4)
	}
	return sh.vocabRowBytes(sh.act) + sh.vocabRowBytes(4)
}

func (sh shape) lossSavedFormula() string {
	if sh.lossFP32() {
		return fmt.Sprintf("fp32 log-softmax: tokens·vocab·4/%d = %d·%d·4/%d", sh.vocabShard, sh.tokens, sh.m.Vocab, sh.vocabShard)
	}
	return fmt.Sprintf("%d-byte log-softmax + nll_loss's fp32 copy of it: tokens·vocab·(%d+4)/%d = %d·%d·%d/%d", sh.act, sh.act, sh.vocabShard, sh.tokens, sh.m.Vocab, sh.act+4, sh.vocabShard)
}

// lossForwardTemp is what the loss allocates in forward and frees before backward: the fp32
// copy of 16-bit logits made by logits.float().
func (sh shape) lossForwardTemp() int64 {
	if sh.act < 4 && sh.lossFP32() {
		return sh.vocabRowBytes(4)
	}
	return 0
}

func (sh shape) lossForwardTempFormula() string {
	if sh.lossForwardTemp() > 0 {
		return "fp32 copy of the 16-bit logits (logits.float()): tokens·vocab·4"
	}
	return "none"
}

// lossBackwardTemp is the start of backward.
func (sh shape) lossBackwardTemp() int64 {
	if sh.lossFP32() {
		return 2 * sh.vocabRowBytes(4)
	}
	return sh.vocabRowBytes(4)
}

func (sh shape) lossBackwardTempFormula() string {
	if sh.lossFP32() {
		return fmt.Sprintf("nll_loss's gradient and log_softmax's gradient, fp32: 2·tokens·vocab·4/%d = 2·%d·%d·4/%d", sh.vocabShard, sh.tokens, sh.m.Vocab, sh.vocabShard)
	}
	return fmt.Sprintf("nll_loss's fp32 gradient: tokens·vocab·4/%d = %d·%d·4/%d", sh.vocabShard, sh.tokens, sh.m.Vocab, sh.vocabShard)
}
