package estimate

import (
	"fmt"
	"math"
)

// stageActs are the activation sizes the phases are built from.
type stageActs struct {
	perLayer     int64 // kept per layer per micro-batch (the checkpointed input with full recompute)
	perLayerFull int64 // saved per layer without recompute
	layersTotal  int64 // all layers, all micro-batches in flight
	embTotal     int64
	headTotal    int64
	logits       int64
	lossSaved    int64
	inflight     float64
}

// activations is what the stage keeps for backward.
func (st *stage) activations() (Activations, stageActs) {
	s, sh, m := st.s, st.sh, st.m
	full := s.Recompute == RecomputeFull
	layerIts := sh.layerSaved(s.Recompute == RecomputeSelective)
	var a stageActs
	a.perLayerFull = sumItems(layerIts)
	a.perLayer = a.perLayerFull
	if full {
		a.perLayer = sumItems(sh.layerCheckpointed())
	}
	a.inflight = 1.0
	if s.PP > 1 && !s.ForwardOnly {
		a.inflight = float64(min(s.PP-st.k, s.MicroBatches))
		if s.VPP > 1 {
			a.inflight *= 1 + float64(s.PP-1)/float64(s.PP*s.VPP)
		}
	}
	var embIts, headIts []ActItem
	if st.first {
		embIts = sh.embeddingSaved()
	}
	if st.last {
		headIts = sh.headSaved()
	}
	a.logits = sh.logitsBytes()
	a.lossSaved = sh.lossSaved()
	L := st.L
	a.layersTotal = int64(math.Round(a.inflight * float64(int64(L)*a.perLayer)))
	a.embTotal = int64(math.Round(a.inflight * float64(sumItems(embIts))))
	a.headTotal = sumItems(headIts)
	h := int64(m.Hidden)
	act := Activations{PerLayer: layerIts, PerLayerBytes: a.perLayer, Layers: L, InFlight: a.inflight,
		AttentionBytes: groupBytes(layerIts, "attention"), MLPBytes: groupBytes(layerIts, "mlp"), NormBytes: groupBytes(layerIts, "norm"),
		LayersTotalBytes: a.layersTotal, Embedding: embIts, Head: headIts,
		ResidualTensorBytes: sh.tokens * h * sh.res / sh.seqShard,
		ResidualTensorHow: fmt.Sprintf("micro_batch·seq/cp·hidden·%s/%d = %d·%d·%d·%d/%d", dname(sh.res), sh.seqShard,
			s.MicroBatch, sh.seqLocal, m.Hidden, sh.res, sh.seqShard)}
	if full {
		act.RecomputedLayerBytes = a.perLayerFull
	}
	if st.last {
		act.LogitsBytes = a.logits
		if !s.ForwardOnly {
			act.LossBytes = a.lossSaved
		}
	}
	act.TotalBytes = a.layersTotal + a.embTotal + a.headTotal
	if !s.ForwardOnly {
		act.TotalBytes += act.LogitsBytes + act.LossBytes
	}
	if s.ForwardOnly { // nothing is saved for backward; transients are counted in the phase
		act = Activations{Layers: L, ResidualTensorBytes: act.ResidualTensorBytes, ResidualTensorHow: act.ResidualTensorHow, LogitsBytes: act.LogitsBytes}
		if m.HFUseCache {
			act.TotalBytes = st.kvCache()
		}
	}
	return act, a
}

// kvCache is Hugging Face's past_key_values over the stage's layers.
func (st *stage) kvCache() int64 {
	return int64(st.L) * st.sh.kvCacheLayer()
}

// phases builds the allocated memory at the peak of each phase.
func (st *stage) phases(a stageActs) []Phase {
	var ps []Phase
	if st.s.ForwardOnly {
		ps = []Phase{st.inference(a)}
	} else {
		ps = st.training(a)
	}
	for i := range ps {
		ps[i] = sumPhase(ps[i])
	}
	return ps
}

// persist are the model-state terms every phase holds.
func (st *stage) persist(extra ...Term) []Term {
	ts := []Term{
		{Name: "parameters", Bytes: st.W, Formula: "model parameters on this rank"},
		{Name: "master_weights", Bytes: st.master, Formula: "fp32 master copy"},
		{Name: "fp32_grad_copy", Bytes: st.gradCopy, Formula: "fp32 gradients for the optimizer"},
		{Name: "optimizer_state", Bytes: st.optState, Formula: st.s.Optimizer.String() + " state"},
		{Name: "ddp_buckets", Bytes: st.ddp, Formula: "DDP gradient buckets"},
		{Name: "cublas_workspace", Bytes: st.ws, Formula: "cuBLAS/cuBLASLt workspaces"},
	}
	return append(ts, extra...)
}

func term(name string, b int64, f string, a ...any) Term {
	return Term{Name: name, Bytes: b, Where: Allocated, Formula: fmt.Sprintf(f, a...)}
}

// weightCache is the autocast weight cache: low-precision copies of matmul
// weights, held until autocast exits and, in training, saved by autograd
// until each layer's backward. perLayer is one layer's, all the stage's.
func (st *stage) weightCache() (perLayer, other, all int64, formula string) {
	if !st.sh.amp {
		return 0, 0, 0, "no autocast: no weight copies"
	}
	// compiled blocks cast their weights inside the graph: in training the partitioner saves
	// the copies (backward's matrix products need them and cannot recompute them), as many as
	// autocast's cache holds; under no_grad they are temporaries. The output projection is
	// outside the blocks, cached by autocast.
	compiledInference := st.s.Compile && st.s.ForwardOnly
	var n int64
	for _, t := range st.layerTs {
		if t.matmul && !compiledInference {
			perLayer += round512(t.numel * st.sh.act)
			n += int64(st.L) * t.numel
		}
	}
	for _, t := range st.otherTs {
		if t.matmul {
			other += round512(t.numel * st.sh.act)
			n += t.numel
		}
	}
	all = int64(st.L)*perLayer + other
	formula = fmt.Sprintf("torch.autocast caches a %d-byte copy of each matmul weight: %d params · %d B", st.sh.act, n, st.sh.act)
	if st.s.Compile {
		formula = fmt.Sprintf("%d-byte copies of the matmul weights: the compiled blocks' saved by the graph for backward%s, the output projection's by autocast: %d params · %d B",
			st.sh.act, ifStr(compiledInference, " (none under no_grad)", ""), n, st.sh.act)
	}
	return perLayer, other, all, formula
}

// unsharded is what FSDP / ZeRO-3 hold gathered: parameters and, in
// backward, one layer's unsharded gradients with the reduce-scatter input
// they are copied into.
func (st *stage) unsharded() (params, grad int64) {
	s, sh := st.s, st.sh
	switch {
	case s.FSDP:
		// FSDP2 gathers even on one rank; the root group (embeddings, final norm, output
		// projection) stays gathered from forward through backward, and one layer is gathered
		// at a time (its prefetch overlaps the previous layer's reshard).
		params = tensorBytes(st.otherTs, 1, sh.ub, 1) + tensorBytes(st.layerTs, 1, sh.ub, 1)
		// foreach_reduce: the layer's unsharded gradients (param dtype) are copied into one
		// flat reduce-scatter input in the reduce dtype before they are freed
		grad = tensorBytes(st.layerTs, 1, sh.ub, 1) + blockBytes(rawBytes(st.layerTs, 1, s.ReduceDType.Bytes(), 1))
	case s.Zero >= 3 && s.DP*s.CP > 1:
		params = 2 * tensorBytes(st.layerTs, 1, sh.pb, 1) // current + prefetched layer
		grad = tensorBytes(st.layerTs, 1, sh.gb, 1)
	}
	return params, grad
}

// inference is the forward phase under torch.no_grad: the model, the KV
// cache, the logits and the largest transient of one layer or the head.
func (st *stage) inference(a stageActs) Phase {
	sh, m := st.sh, st.m
	h := int64(m.Hidden)
	rows, ffn := sh.mlpTokens()
	kv := int64(0)
	if m.HFUseCache {
		kv = st.kvCache()
	}
	layerTmp := sh.tokens*h*sh.res/sh.seqShard + rows*ffn*2*sh.act/sh.t + sh.tokens*h*sh.act
	var headTmp, lg int64
	headF := "the final norm's output, the output projection's input"
	if st.last {
		// while the logits are written: the final norm's output (fp32 under autocast, with
		// its 16-bit cast)
		headTmp = sh.tokens * h * sh.res / sh.seqShard
		if sh.amp {
			headTmp += sh.tokens * h * sh.act / sh.seqShard
			headF += " and its 16-bit cast"
		}
		if m.HoldsFinalNormInput {
			headTmp += sh.tokens * h * sh.res / sh.seqShard
			headF += ", and the last layer's output the forward still holds"
		}
		lg = a.logits
	}
	tmp, tf := layerTmp, fmt.Sprintf("one layer's MLP in flight: tokens·(h·res + 2·ffn·act + h·act) = %d", layerTmp)
	if headTmp+lg > layerTmp {
		tmp, tf = headTmp, headF
	} else {
		lg = 0
	}
	_, _, cache, cacheF := st.weightCache()
	unsh, _ := st.unsharded()
	return Phase{Name: Forward, At: ifStr(lg > 0, "logits", "a layer's MLP"), Terms: st.persist(
		term("autocast_weight_cache", cache, "%s", cacheF),
		term("activations", kv, "Hugging Face use_cache: layers · %s", st.sh.kvCacheFormula()),
		term("unsharded_params", unsh, "gathered parameters (ZeRO-3/FSDP)"),
		term("logits", lg, "tokens·vocab·%d B", sh.act),
		term("temporaries", tmp, "%s", tf),
	)}
}

// training is the forward, backward and optimizer-step phases.
func (st *stage) training(a stageActs) []Phase {
	c := st.trainingTerms(a)
	fwd := st.trainingForward(a, c)
	best := st.backwardPeak(a, c)
	if end := st.backwardEnd(c); end.Bytes > best.Bytes {
		best = end
	}
	s := st.s
	keepStep := int64(0)
	if s.PP == 1 && s.KeepLogits && s.KeepLogitsStep {
		keepStep = a.logits
	}
	step := Phase{Name: OptimizerStep, Terms: st.persist(
		term("gradients", st.G, "all gradients"),
		term("logits", keepStep, "held by the caller until the step returns: %s", c.logitsF),
		term("temporaries", st.optTemp, "%s", optTempFormula(s.Optimizer, s)),
	)}
	return []Phase{fwd, best, step}
}

// trainTerms are the terms the training phases share.
type trainTerms struct {
	full                     bool // full recompute
	cacheLayer, cacheAll     int64
	cacheF                   string
	unsharded, unshardedGrad int64
	logitsF, actF            string
	g0                       int64 // gradients kept across micro-batches
	saved                    int64 // saved activations of every layer, embedding and head
	lossFwd                  int64 // what the loss saves
	keep                     int64 // logits held by the caller
}

func (st *stage) trainingTerms(a stageActs) trainTerms {
	s, sh, m := st.s, st.sh, st.m
	c := trainTerms{full: s.Recompute == RecomputeFull}
	c.cacheLayer, _, c.cacheAll, c.cacheF = st.weightCache()
	c.unsharded, c.unshardedGrad = st.unsharded()
	c.logitsF = fmt.Sprintf("tokens·vocab·%d B/%d = %d·%d·%d/%d", sh.act, sh.vocabShard, sh.tokens, m.Vocab, sh.act, sh.vocabShard)
	c.actF = fmt.Sprintf("%.2f micro-batches · %d layers · %d B/layer + embedding %d B + head %d B", a.inflight, st.L, a.perLayer, a.embTotal, a.headTotal)
	if s.GradAccum > 1 || s.MicroBatches > 1 {
		c.g0 = st.G
	}
	c.saved = a.layersTotal + a.embTotal + a.headTotal
	if st.last {
		c.lossFwd = a.lossSaved
		if s.KeepLogits {
			c.keep = a.logits
		}
	}
	return c
}

// trainingForward is the forward's peak: at the loss on the last stage,
// else at the last layer.
func (st *stage) trainingForward(a stageActs, c trainTerms) Phase {
	sh := st.sh
	var lg, lossTmpFwd, fwdTmp int64
	if st.last {
		lg = a.logits
		lossTmpFwd = sh.lossForwardTemp()
	} else {
		rows, ffn := sh.mlpTokens()
		fwdTmp = rows * ffn * sh.act / sh.t // one MLP intermediate being produced
	}
	return Phase{Name: Forward, At: ifStr(st.last, "loss", "last layer"), Terms: st.persist(
		term("gradients", c.g0, "kept across micro-batches (grad accumulation or pipeline)"),
		term("autocast_weight_cache", c.cacheAll, "%s", c.cacheF),
		term("unsharded_params", c.unsharded, "current + prefetched layer gathered (ZeRO-3/FSDP)"),
		term("activations", c.saved, "%s", c.actF),
		term("logits", lg, "%s", c.logitsF),
		term("loss", c.lossFwd, "%s", sh.lossSavedFormula()),
		term("temporaries", lossTmpFwd+fwdTmp, "%s", sh.lossForwardTempFormula()),
	)}
}

// backwardPeak is the highest point of backward before its end: the loss
// at its start (last stage), then each layer from the last to the first.
func (st *stage) backwardPeak(a stageActs, c trainTerms) Phase {
	s, sh, m := st.s, st.sh, st.m
	L := st.L
	var headTs []tensor
	for _, t := range st.otherTs {
		if t.headGrad {
			headTs = append(headTs, t)
		}
	}
	headGrad := tensorBytes(headTs, 1, sh.gb, st.shardG) // the embedding's gradient comes at the end
	layerGrad := tensorBytes(st.layerTs, 1, sh.gb, st.shardG)
	if s.Offload == OffloadParams {
		headGrad, layerGrad = 0, 0 // sharded gradients go to the host
	}
	if s.DDPBucketView {
		headGrad, layerGrad = 0, 0 // each gradient is copied into its bucket and becomes a view of it
	}
	var best Phase
	other := a.layersTotal - int64(L)*a.perLayer // other micro-batches in flight
	if st.last {
		best = sumPhase(Phase{Name: Backward, At: "loss", Terms: st.persist(
			term("gradients", c.g0, "present at the start of backward"),
			term("autocast_weight_cache", c.cacheAll-boolMul(c.full, int64(L)*c.cacheLayer), "%s", c.cacheF),
			term("unsharded_params", c.unsharded, "gathered layers (ZeRO-3/FSDP)"),
			term("activations", c.saved, "%s", c.actF),
			term("logits", c.keep, "held by the caller: %s", c.logitsF),
			term("loss", c.lossFwd, "%s", sh.lossSavedFormula()),
			term("temporaries", sh.lossBackwardTemp(), "%s", sh.lossBackwardTempFormula()),
		)})
	}
	rows, ffn := sh.mlpTokens()
	tmpBwd := rows*ffn*2*sh.act/sh.t + 2*sh.tokens*int64(m.Hidden)*sh.res/sh.seqShard
	var maxMat int64
	for _, t := range st.layerTs {
		maxMat = max(maxMat, t.numel)
	}
	if sh.amp {
		tmpBwd += maxMat * sh.act // a weight gradient in bf16 before its fp32 cast
	}
	tmpBwdF := fmt.Sprintf("gradients of one layer's MLP intermediates and residual stream: rows·2·ffn·%d/t + 2·tokens·h·%d%s",
		sh.act, sh.res, ifStr(sh.amp, " + one weight gradient in 16-bit before its fp32 cast", ""))
	for j := L - 1; j >= 0; j-- {
		grads := c.g0
		if c.g0 == 0 {
			grads = headGrad + int64(L-1-j)*layerGrad
		}
		// the output projection's copy went with its backward; the layers not yet
		// differentiated keep theirs (with full recompute only the recomputed layer's)
		cache := c.cacheLayer
		if !c.full {
			cache += int64(j) * c.cacheLayer
		}
		rec := int64(0)
		if c.full {
			rec = a.perLayerFull
		}
		p := sumPhase(Phase{Name: Backward, At: fmt.Sprintf("layer %d of %d", j+1, L), Terms: st.persist(
			term("gradients", grads, "gradients so far (layer %d of %d)", j+1, L),
			term("autocast_weight_cache", cache, "weight copies of layers not yet differentiated"),
			term("unsharded_params", c.unsharded+c.unshardedGrad, "gathered layers and one unsharded layer gradient (ZeRO-3/FSDP)"),
			term("activations", other+int64(j+1)*a.perLayer+a.embTotal+rec, "saved activations of layers 1..%d (+ other micro-batches, + the recomputed layer)", j+1),
			term("logits", c.keep, "held by the caller: %s", c.logitsF),
			term("temporaries", tmpBwd, "%s", tmpBwdF),
		)})
		if p.Bytes > best.Bytes {
			best = p
		}
	}
	return best
}

// backwardEnd is the end of backward: all gradients plus the embedding's
// gradient before its accumulation.
func (st *stage) backwardEnd(c trainTerms) Phase {
	s, sh, m := st.s, st.sh, st.m
	embTmp, embF := int64(0), "none"
	if st.first {
		vs := int64(1)
		if s.TPPlan == TPPlanMegatron {
			vs = sh.t
		}
		embTmp = round512(int64(m.Vocab) * int64(m.Hidden) * sh.gb / vs)
		embF = fmt.Sprintf("the embedding's gradient (vocab·h·%d/%d)", sh.gb, vs)
		if m.TiedEmbeddings && !sh.amp {
			// fp32: the tied weight's first gradient is the output projection's matmul
			// gradient, and the embedding's is added out of place (old + new + sum live at
			// once); under autocast it arrives through the fp32 cast and is added in place.
			// Seen in the H100 allocator history (docs/validation.md).
			embTmp *= 2
			embF = fmt.Sprintf("the embedding's gradient and its sum with the tied output projection's (2·vocab·h·%d/%d)", sh.gb, vs)
		}
	}
	return sumPhase(Phase{Name: Backward, At: "end", Terms: st.persist(
		term("gradients", st.G, "all gradients"),
		term("unsharded_params", c.unsharded+c.unshardedGrad, "gathered layers (ZeRO-3/FSDP)"),
		term("logits", c.keep, "held by the caller: %s", c.logitsF),
		term("temporaries", embTmp, "%s", embF),
	)})
}
