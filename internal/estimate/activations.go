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
		pb: s.DType.Weights().Bytes(), gb: s.GradDType.Bytes(), ub: ub}
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

// kvCacheBytes is the element size of Hugging Face's KV cache: under
// autocast RoPE makes K fp32 (q·cos with fp32 cos promotes) and the cache
// stores V in K's dtype; otherwise the compute dtype.
func (sh shape) kvCacheBytes() int64 {
	if sh.amp && sh.m.PositionEmbedding == "rope" {
		return 4
	}
	return sh.act
}

// kvCacheLayer is one layer's KV cache (use_cache=True).
func (sh shape) kvCacheLayer() int64 {
	kv := int64(sh.m.KVHeads) * int64(sh.m.HeadDim)
	return sh.tokens * 2 * kv * sh.kvCacheBytes() / sh.t
}

func (sh shape) kvCacheFormula() string {
	return fmt.Sprintf("tokens·2kv·%s/t (use_cache=True: past_key_values holds K and V%s)", dname(sh.kvCacheBytes()),
		ifStr(sh.kvCacheBytes() != sh.act, ", fp32 under autocast after RoPE", ""))
}

// consumers is how many matrix products read each norm's output: under
// autocast each casts it to 16 bits separately, and autograd saves every
// copy (Hugging Face's separate q, k, v and gate, up projections).
func (sh shape) consumers() (attn, mlp int64) {
	m := sh.m
	attn, mlp = 1, 1
	if m.SplitLinear {
		attn = 3
		if m.MLP == "swiglu" && m.Experts == 0 {
			mlp = 2
		}
	}
	return attn, mlp
}

// normSaved is what one norm keeps for backward: its input, what the
// normalisation saves, and its output as the next matrix products' input.
//
// layernorm is a fused kernel (nn.LayerNorm, Megatron/TE RMSNorm with
// norm "rmsnorm_fused"): the input, fp32 mean/rstd and the output. rmsnorm is
// Hugging Face's Python RMSNorm: x.to(float32) (saved by pow and by the
// multiplication with rsqrt: the input itself when it is already fp32, else
// an fp32 copy), the normalised fp32 tensor (saved by weight * ...; cast
// to the input dtype first when that is 16-bit), and the output.
func (sh shape) normSaved(name, group string, consumers int64) []ActItem {
	T, h, sq := sh.tokens, int64(sh.m.Hidden), sh.seqShard
	var its []ActItem
	out := T * h * sh.act / sq
	outF := fmt.Sprintf("tokens·h·%s (the matrix products' input)", dname(sh.act))
	if sh.amp {
		out *= consumers
		outF = fmt.Sprintf("%d·tokens·h·%s (autocast casts the fp32 output once per matrix product that reads it)", consumers, dname(sh.act))
	}
	switch sh.m.Norm {
	case "rmsnorm":
		its = append(its, sh.item(name+"_input", group, T*h*4/sq, "tokens·h·4 B: x.to(float32), saved by pow and mul (%s)", ifStr(sh.res == 4, "the fp32 input itself", "an fp32 copy of the 16-bit input")))
		nb := int64(4)
		if sh.res < 4 {
			nb = sh.res
		}
		its = append(its, sh.item(name+"_normalized", group, T*h*nb/sq, "tokens·h·%s: x·rsqrt(mean(x²)+eps)%s, saved by weight·(…)", dname(nb), ifStr(nb < 4, " cast to the input dtype", "")))
		its = append(its, sh.item(name+"_stats", group, T*4/sq, "tokens·4 B (fp32 rsqrt)"))
		if sh.res == 4 && !sh.amp {
			// fp32: the output is a third tensor; 16-bit without autocast it is
			// the matrix products' input as above
			outF = "tokens·h·4 B (weight·normalized, the matrix products' input)"
		}
	default:
		stats := int64(8)
		if sh.m.Norm == "rmsnorm_fused" {
			stats = 4
		}
		its = append(its, sh.item(name+"_input", group, T*h*sh.res/sq, "tokens·h·%s/%d = %d·%d·%d/%d", dname(sh.res), sq, T, h, sh.res, sq))
		its = append(its, sh.item(name+"_stats", group, T*stats/sq, "tokens·%d B (fp32 mean/rstd)", stats))
	}
	return append(its, sh.item(name+"_output", group, out, "%s", outF))
}

// normSavedCompiled is what a norm inside a torch.compile'd block keeps. The
// min-cut partitioner saves what backward needs and cannot recompute
// cheaply, and recomputes pointwise work: the normalisation and its
// statistics' use are recomputed from the input and the statistics (a
// reduction, which it saves); the output as the matrix products' input must
// exist in backward for their weight gradients, so it is saved, once (CSE
// merges autocast's per-projection casts). The first norm's input is the
// block's input; the second norm's input (the residual after attention,
// fp32 under autocast) is recomputed from the block's input and the output
// projection's output, which is saved instead (tokens·h·act: smaller than
// the residual under autocast).
func (sh shape) normSavedCompiled(name, group string, second bool) []ActItem {
	T, h, sq := sh.tokens, int64(sh.m.Hidden), sh.seqShard
	stats := int64(4)
	if sh.m.Norm == "layernorm" {
		stats = 8
	}
	in := sh.item(name+"_input", group, T*h*sh.res/sq, "tokens·h·%s (compiled: the block's input)", dname(sh.res))
	if second {
		in = sh.item("attention_projection_output", group, T*h*sh.act/sq,
			"tokens·h·%s (compiled: the output projection's output; the residual it adds to, the norm's input, is recomputed from it and the block's input)", dname(sh.act))
	}
	return []ActItem{in,
		sh.item(name+"_stats", group, T*stats/sq, "tokens·%d B (fp32 statistics: a reduction the partitioner saves)", stats),
		sh.item(name+"_output", group, T*h*sh.act/sq, "tokens·h·%s (compiled: the matrix products' input, saved once; the normalisation is recomputed)", dname(sh.act)),
	}
}

// attnBackend is the kernel scaled_dot_product_attention picks: flash for
// 16-bit inputs; for fp32 the memory-efficient kernel, or the math
// fallback (which saves the softmax) when keys and values have fewer heads
// than the queries (GQA).
func (sh shape) attnBackend() string {
	switch {
	case sh.s.Attention == AttentionEager:
		return "eager"
	case sh.act < 4:
		return "flash"
	case sh.m.KVHeads < sh.m.Heads:
		return "math"
	}
	return "efficient"
}

// attentionSaved is what self-attention keeps for backward.
func (sh shape) attentionSaved(selective bool) []ActItem {
	m, T, t := sh.m, sh.tokens, sh.t
	q, kv := int64(m.Heads)*int64(m.HeadDim), int64(m.KVHeads)*int64(m.HeadDim)
	a, s := int64(m.Heads), sh.seqLocal
	c, cn := sh.act, dname(sh.act)
	var its []ActItem
	add := func(name string, b int64, f string, args ...any) {
		its = append(its, sh.item(name, "attention", b, f, args...))
	}
	backend := sh.attnBackend()
	if selective {
		backend = "selective"
	}
	switch backend {
	case "flash", "efficient", "selective":
		add("qkv", T*(q+2*kv)*c/t, "tokens·(q+2kv)·%s/t = %d·%d·%d/%d", cn, T, q+2*kv, c, t)
		if backend != "selective" {
			add("attention_logsumexp", T*a*4/t, "tokens·heads·4/t (%s attention saves only the softmax statistics)", backend)
		}
	case "math":
		// fp32 with GQA: SDPA's math path repeats K and V to all heads, scales Q and K and
		// saves the fp32 softmax
		add("qkv", T*3*q*c/t, "tokens·3q·%s/t (scaled Q, K and V repeated to every head by SDPA's math fallback)", cn)
		add("attention_scores", T*a*s*4/t, "tokens·heads·seq·4/t (fp32 softmax saved by the math fallback) = %d·%d·%d·4/%d", T, a, s, t)
	case "eager":
		k := kv
		if m.KVHeads < m.Heads {
			k = q // repeat_kv copies K and V to every head
		}
		add("qkv", T*(q+2*k)*c/t, "tokens·(q+2·%s)·%s/t (eager attention's matmul inputs%s)", ifStr(k == q, "q", "kv"), cn, ifStr(k == q, ", K and V repeated to every head", ""))
		per, f := sh.eagerScoreBytes()
		add("attention_scores", T*a*s*per/t, "tokens·heads·seq·%d/t (%s) = %d·%d·%d·%d/%d", per, f, T, a, s, per, t)
	}
	if m.QKNorm {
		// Hugging Face's RMSNorm per head: x.to(float32) saved by pow and mul, the
		// normalised tensor in the projection's dtype saved by weight·(…), fp32 rsqrt
		// per head; its output goes through RoPE into attention (counted above)
		add("qk_norm", T*(q+kv)*(4+c)/t+T*(a+int64(m.KVHeads))*4/t,
			"tokens·(q+kv)·(4+%d)/t + tokens·(heads+kv_heads)·4/t (q_norm, k_norm: an fp32 copy of q and k, the normalised %s tensor, fp32 rsqrt per head)", c, cn)
	}
	add("attention_output", T*q*c/t, "tokens·q·%s/t (output projection input)", cn)
	if m.HFUseCache {
		add("kv_cache", sh.kvCacheLayer(), "%s", sh.kvCacheFormula())
	}
	return its
}

// eagerScoreBytes is what eager attention saves per score element. Hugging
// Face's RoPE models (Llama family) take softmax(dtype=float32) and cast it
// to the query's dtype, which under autocast is fp32 (q·cos with fp32 cos
// promotes), then the probabilities-times-V product casts it to 16 bits;
// GPT-2 takes the softmax in the compute dtype (fp32 under autocast) and
// casts it to the value's dtype. Dropout adds a mask and its output.
func (sh shape) eagerScoreBytes() (int64, string) {
	c := sh.act
	drop := sh.m.Dropout > 0
	var per int64
	var f string
	if sh.m.PositionEmbedding == "rope" {
		qd := c
		if sh.amp {
			qd = 4
		}
		per, f = 4, "fp32 softmax"
		x := int64(0)
		if qd != 4 {
			x = qd
			f += fmt.Sprintf(" + its %d-byte copy", qd)
		}
		if drop {
			per += 1 + qd
			f += " + dropout mask and output"
			x = qd
		}
		if sh.amp && qd != c {
			per += c
			f += fmt.Sprintf(" + the %d-byte cast for the product with V", c)
		}
		return per + boolMul(!drop, x), f
	}
	sm := c
	if sh.amp {
		sm = 4
	}
	per, f = sm, ifStr(sm == 4, "fp32 softmax", "softmax")
	if sm != c {
		per += c
		f += fmt.Sprintf(" + its %d-byte copy", c)
	}
	if drop {
		per += 1 + c
		f += " + dropout mask and output"
	}
	return per, f
}

// mlpSaved is what the MLP (or the experts) keeps for backward, beyond the
// norm output it reads.
func (sh shape) mlpSaved() []ActItem {
	m, T, t, sq := sh.m, sh.tokens, sh.t, sh.seqShard
	h := int64(m.Hidden)
	c, cn := sh.act, dname(sh.act)
	rows, f := sh.mlpTokens()
	var its []ActItem
	add := func(name string, b int64, fm string, args ...any) {
		its = append(its, sh.item(name, "mlp", b, fm, args...))
	}
	if m.Experts > 0 {
		add("router_probs", T*int64(m.Experts)*4, "tokens·experts·4 (fp32 routing softmax)")
		in := rows * h * c / sq
		add("expert_input", in, "tokens·top_k·h·%s (each expert's gathered input rows)", cn)
		add("expert_output", rows*h*c/sq, "tokens·top_k·h·%s (expert outputs saved by the routing-weight product)", cn)
	}
	switch {
	case sh.s.Compile && m.MLP == "swiglu":
		// the partitioner saves the matmul outputs (it cannot recompute them) and the down
		// projection's input (its weight gradient needs it); SiLU is recomputed
		add("gate_up_output", rows*2*f*c/t, "rows·2ffn·%s/t (compiled: gate and up, matmul outputs)", cn)
		add("product_output", rows*f*c/t, "rows·ffn·%s/t (compiled: the down projection's input; SiLU is recomputed)", cn)
	case sh.s.Compile:
		add("fc1_output", rows*f*c/t, "rows·ffn·%s/t (compiled: the fc1 output, a matmul output)", cn)
		add("gelu_output", rows*f*c/t, "rows·ffn·%s/t (compiled: the down projection's input; the activation's intermediates are recomputed)", cn)
	case m.MLP == "swiglu":
		add("gate_up_output", rows*2*f*c/t, "rows·2ffn·%s/t = %d·%d·%d/%d (gate and up projections, saved by SiLU and the product)", cn, rows, 2*f, c, t)
		add("silu_output", rows*f*c/t, "rows·ffn·%s/t", cn)
		add("product_output", rows*f*c/t, "rows·ffn·%s/t (down projection input)", cn)
	case m.Activation == "gelu_tanh_python":
		// Python tanh-GELU 0.5·x·(1+tanh(√(2/π)·(x+0.044715·x³))): pow saves its input (under
		// autocast an fp32 copy, pow being an fp32 op, and the chain after it is promoted to
		// fp32), tanh saves its output, the last product saves 0.5·x and 1+tanh; its output
		// (fp32 under autocast) is cast for the down projection
		i := c
		if sh.amp {
			i = 4
		}
		add("fc1_output", rows*f*i/t, "rows·ffn·%s/t (%s)", dname(i), ifStr(sh.amp, "pow's fp32 copy of the fc1 output", "the fc1 output, saved by pow"))
		add("gelu_intermediates", rows*f*(2*i+c)/t, "rows·ffn·%d/t (tanh and 1+tanh in %s, 0.5·x in %s)", 2*i+c, dname(i), cn)
		add("gelu_output", rows*f*c/t, "rows·ffn·%s/t (down projection input%s)", cn, ifStr(sh.amp, ", cast from the fp32 product", ""))
	default:
		add("fc1_output", rows*f*c/t, "rows·ffn·%s/t = %d·%d·%d/%d", cn, rows, f, c, t)
		add("gelu_output", rows*f*c/t, "rows·ffn·%s/t (down projection input)", cn)
	}
	return its
}

// layerSaved lists what one layer keeps for backward (no recompute), per micro-batch.
func (sh shape) layerSaved(selective bool) []ActItem {
	m, T, sq := sh.m, sh.tokens, sh.seqShard
	h := int64(m.Hidden)
	attnC, mlpC := sh.consumers()
	// dropout masks are saved compiled too: the partitioner does not recompute random ops
	masks := m.Dropout > 0
	norm1, norm2 := sh.normSaved("norm1", "norm", attnC), sh.normSaved("norm2", "norm", mlpC)
	if sh.s.Compile {
		norm1, norm2 = sh.normSavedCompiled("norm1", "norm", false), sh.normSavedCompiled("norm2", "norm", true)
	}
	its := norm1
	its = append(its, sh.attentionSaved(selective)...)
	if masks {
		its = append(its, sh.item("attention_dropout_mask", "attention", T*h/sq, "tokens·h·1 B"))
	}
	its = append(its, norm2...)
	its = append(its, sh.mlpSaved()...)
	if masks {
		its = append(its, sh.item("mlp_dropout_mask", "mlp", T*h/sq, "tokens·h·1 B"))
	}
	return its
}

// layerFull is a recomputed layer's saved input only.
func (sh shape) layerCheckpointed() []ActItem {
	h := int64(sh.m.Hidden)
	its := []ActItem{sh.item("layer_input", "norm", sh.tokens*h*sh.res/sh.seqShard, "tokens·h·%s (checkpointed block input)", dname(sh.res))}
	if sh.m.HFUseCache {
		its = append(its, sh.item("kv_cache", "attention", sh.kvCacheLayer(), "%s", sh.kvCacheFormula()))
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

// headSaved is what the last stage keeps for the final norm and output
// projection (outside the compiled blocks with --compile).
func (sh shape) headSaved() []ActItem {
	return sh.normSaved("final_norm", "head", 1)
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

// lossParallel: the logits are split over the vocabulary (the megatron plan)
// and the loss is PyTorch's loss_parallel, whose log-softmax and its
// backward are composed of separate ops on the local shard (max, x - max,
// exp, sum, log, ...), each a tensor of its own, where F.cross_entropy's
// fused kernels write one.
func (sh shape) lossParallel() bool { return sh.vocabShard > 1 && sh.lossFP32() }

// lossForwardTemp is what the loss allocates in forward and frees before backward: the fp32
// copy of 16-bit logits made by logits.float(); with loss_parallel also the shifted logits
// and their exp, alive together before the log-softmax exists (3 tensors where the saved
// log-softmax counts one).
func (sh shape) lossForwardTemp() int64 {
	switch {
	case sh.lossParallel():
		return 2 * sh.vocabRowBytes(4)
	case sh.act < 4 && sh.lossFP32():
		return sh.vocabRowBytes(4)
	}
	return 0
}

func (sh shape) lossForwardTempFormula() string {
	switch {
	case sh.lossParallel():
		return fmt.Sprintf("loss_parallel's log-softmax op by op: the fp32 logits, the shifted logits and their exp live together before the log-softmax (counted under loss) exists: 2·tokens·vocab·4/%d", sh.vocabShard)
	case sh.lossForwardTemp() > 0:
		return "fp32 copy of the 16-bit logits (logits.float()): tokens·vocab·4"
	}
	return "none"
}

// lossBackwardTemp is the start of backward.
func (sh shape) lossBackwardTemp() int64 {
	switch {
	case sh.lossParallel():
		return 3 * sh.vocabRowBytes(4)
	case sh.lossFP32():
		return 2 * sh.vocabRowBytes(4)
	}
	return sh.vocabRowBytes(4)
}

func (sh shape) lossBackwardTempFormula() string {
	switch {
	case sh.lossParallel():
		return fmt.Sprintf("loss_parallel's backward op by op, fp32: nll_loss's gradient, the exp of the log-softmax and the log-softmax's gradient: 3·tokens·vocab·4/%d = 3·%d·%d·4/%d", sh.vocabShard, sh.tokens, sh.m.Vocab, sh.vocabShard)
	case sh.lossFP32():
		return fmt.Sprintf("nll_loss's gradient and log_softmax's gradient, fp32: 2·tokens·vocab·4/%d = 2·%d·%d·4/%d", sh.vocabShard, sh.tokens, sh.m.Vocab, sh.vocabShard)
	}
	return fmt.Sprintf("nll_loss's fp32 gradient: tokens·vocab·4/%d = %d·%d·4/%d", sh.vocabShard, sh.tokens, sh.m.Vocab, sh.vocabShard)
}
