package estimate

import (
	"fmt"
	"math"
)

// FragmentationRatio is the allowance for caching-allocator fragmentation on top of the
// non-persistent (activation and temporary) part of the peak; see docs/validation.md.
const FragmentationRatio = 0.20

// Estimate computes the memory of every distinct rank.
func Estimate(m Model, s Setup, dev Device) (*Result, error) {
	m, err := m.normalize()
	if err != nil {
		return nil, err
	}
	s, err = s.normalize(m)
	if err != nil {
		return nil, err
	}
	res := &Result{Model: m, Setup: s, Device: dev, Params: m.Params()}
	for k := 0; k < s.PP; k++ {
		res.Ranks = append(res.Ranks, estimateStage(m, s, dev, k))
	}
	for i, r := range res.Ranks {
		if r.DeviceTotalBytes > res.Ranks[res.Top].DeviceTotalBytes {
			res.Top = i
		}
	}
	return res, nil
}

// stageTensors lists the parameter tensors of pipeline stage k, already split by TP and EP.
func stageTensors(m Model, s Setup, k int) (layer, other []tensor, layers int) {
	split := func(ts []tensor) []tensor {
		out := make([]tensor, 0, len(ts))
		for _, t := range ts {
			if t.expert && s.EP > 1 && t.expertIdx >= m.Experts/s.EP {
				continue // expert parallelism keeps experts/ep experts on each rank
			}
			if t.tpSplit && s.TP > 1 {
				t.numel /= int64(s.TP)
				t.rows /= int64(s.TP)
			}
			if t.expert {
				t.ep = int64(s.EP)
			}
			out = append(out, t)
		}
		return out
	}
	layer = split(m.layerTensors())
	if k == 0 {
		other = append(other, split(m.embeddingTensors())...)
	}
	if k == s.PP-1 {
		other = append(other, split(m.headTensors())...)
		if s.PP > 1 && m.TiedEmbeddings {
			other = append(other, split(m.embeddingTensors()[:1])...) // copy of the tied embedding
		}
	}
	return layer, other, m.Layers / s.PP
}

func estimateStage(m Model, s Setup, dev Device, k int) Rank {
	sh := newShape(m, s)
	layerTs, otherTs, L := stageTensors(m, s, k)
	first, last := k == 0, k == s.PP-1
	N := int64(s.DP * s.CP) // ZeRO/FSDP shard group
	shardP, shardG, shardO := int64(1), int64(1), int64(1)
	if s.Zero >= 1 {
		shardO = N
	}
	if s.Zero >= 2 {
		shardG = N
	}
	if s.Zero >= 3 {
		shardP = N
	}
	var params int64
	for _, t := range otherTs {
		params += t.numel
	}
	params += int64(L) * sumNumel(layerTs)
	r := Rank{Name: fmt.Sprintf("pp_stage_%d", k), Stage: k, Params: params}
	if s.PP == 1 {
		r.Name = "rank"
	}
	all := func(elem, shard int64) int64 {
		return tensorBytes(layerTs, L, elem, shard) + tensorBytes(otherTs, 1, elem, shard)
	}
	pdesc := fmt.Sprintf("%d params on this rank", params)

	// --- persistent model states
	var terms []Term
	addT := func(name, where string, b int64, f string, a ...any) int64 {
		terms = append(terms, Term{Name: name, Bytes: b, Formula: fmt.Sprintf(f, a...), Where: where})
		return b
	}
	W := all(sh.pb, shardP)
	if s.Offload == "params" {
		W = 0
	}
	addT("parameters", "allocated", W, "%s · %d B%s", pdesc, sh.pb, shardNote(shardP, "params"))
	G := all(sh.gb, shardG)
	var master, gradCopy, optState, optTemp int64
	if !s.ForwardOnly {
		addT("gradients", "allocated", G, "%s · %d B (%s)%s", pdesc, sh.gb, s.GradDType, shardNote(shardG, "grads"))
		if s.MasterWeights {
			master = all(4, shardO)
			if sh.gb < 4 {
				gradCopy = all(4, shardO)
			}
		}
		sb := sh.stateBytes
		switch s.Optimizer {
		case "adamw", "adam":
			optState = 2 * all(sb, shardO)
			optTemp = all(sb, shardO) // foreach: sqrt(exp_avg_sq) for every parameter at once
		case "sgd":
			optState = all(sb, shardO)
		case "adamw8bit":
			optState = 2 * all(1, shardO)
		case "adafactor":
			var big int64
			fact := func(ts []tensor) (n int64) {
				for _, t := range ts {
					f := t.numel
					if t.rows > 0 {
						f = t.rows + t.cols
					}
					n += round512(ceilDiv(f, t.shardOver(shardO)) * sb)
					big = max(big, t.numel)
				}
				return n
			}
			optState = int64(L)*fact(layerTs) + fact(otherTs) // factored second moments
			optTemp = round512(ceilDiv(big, shardO) * sb)
		}
		if s.Offload == "optimizer" || s.Offload == "params" {
			master, gradCopy, optState, optTemp = 0, 0, 0, 0
		}
		addT("master_weights", "allocated", master, "fp32 copy of 16-bit params: %s · 4 B%s", pdesc, shardNote(shardO, "optimizer"))
		if gradCopy > 0 {
			addT("fp32_grad_copy", "allocated", gradCopy, "fp32 gradients for the optimizer: %s · 4 B%s", pdesc, shardNote(shardO, "optimizer"))
		}
		addT("optimizer_state", "allocated", optState, "%s: %s%s", s.Optimizer, optStateFormula(s.Optimizer, sh.stateBytes), shardNote(shardO, "optimizer"))
	}
	ws := dev.CublasWorkspaceBytes
	addT("cublas_workspace", "allocated", ws, "cuBLAS + cuBLASLt workspaces allocated through the caching allocator (%s)", dev.Arch)

	// --- activations
	selective := s.Recompute == "selective"
	full := s.Recompute == "full"
	layerIts := sh.layerSaved(selective)
	perLayerFull := sumItems(layerIts)
	perLayer := perLayerFull
	if full {
		perLayer = sumItems(sh.layerCheckpointed())
	}
	inflight := 1.0
	if s.PP > 1 && !s.ForwardOnly {
		inflight = float64(min(s.PP-k, s.MicroBatches))
		if s.VPP > 1 {
			inflight *= 1 + float64(s.PP-1)/float64(s.PP*s.VPP)
		}
	}
	var embIts, headIts []ActItem
	if first {
		embIts = sh.embeddingSaved()
	}
	if last {
		headIts = sh.headSaved()
	}
	logits := sh.logitsBytes()
	lossSaved := sh.lossSaved()
	layersTotal := int64(math.Round(inflight * float64(int64(L)*perLayer)))
	embTotal := int64(math.Round(inflight * float64(sumItems(embIts))))
	act := Activations{PerLayer: layerIts, PerLayerBytes: perLayer, Layers: L, InFlight: inflight,
		AttentionBytes: groupBytes(layerIts, "attention"), MLPBytes: groupBytes(layerIts, "mlp"), NormBytes: groupBytes(layerIts, "norm"),
		LayersTotalBytes: layersTotal, Embedding: embIts, Head: headIts,
		ResidualTensor:    sh.tokens * int64(m.Hidden) * sh.res / sh.seqShard,
		ResidualTensorHow: fmt.Sprintf("micro_batch·seq/cp·hidden·%s/%d = %d·%d·%d·%d/%d", dname(sh.res), sh.seqShard, s.MicroBatch, sh.seqLocal, m.Hidden, sh.res, sh.seqShard)}
	if full {
		act.RecomputedLayer = perLayerFull
	}
	if last {
		act.LogitsBytes = logits
		if !s.ForwardOnly {
			act.LossBytes = lossSaved
		}
	}
	headTotal := sumItems(headIts)
	act.TotalBytes = layersTotal + embTotal + headTotal
	if !s.ForwardOnly {
		act.TotalBytes += act.LogitsBytes + act.LossBytes
	}
	if s.ForwardOnly { // nothing is saved for backward; transients are counted in the phase
		act = Activations{Layers: L, ResidualTensor: act.ResidualTensor, ResidualTensorHow: act.ResidualTensorHow, LogitsBytes: act.LogitsBytes}
		if m.HFUseCache {
			act.TotalBytes = int64(L) * sh.tokens * 2 * int64(m.KVHeads) * int64(m.HeadDim) * sh.act / sh.t
		}
	}
	r.Activations = act

	// autocast weight cache: low-precision copies of matmul weights, held until autocast exits
	// and, in training, saved by autograd until each layer's backward.
	var cacheLayer, cacheOther int64
	if s.AMP {
		for _, t := range layerTs {
			if t.matmul {
				cacheLayer += round512(t.numel * sh.act)
			}
		}
		for _, t := range otherTs {
			if t.matmul {
				cacheOther += round512(t.numel * sh.act)
			}
		}
	}
	cacheAll := int64(L)*cacheLayer + cacheOther

	// FSDP / ZeRO-3: unsharded parameters of the current and the prefetched layer
	var unsharded, unshardedGrad int64
	switch {
	case s.FSDP:
		// FSDP2 gathers even on one rank; the root group (embeddings, final norm, output
		// projection) stays gathered from forward through backward, and one layer is gathered
		// at a time (its prefetch overlaps the previous layer's reshard).
		unsharded = tensorBytes(otherTs, 1, sh.pb, 1) + tensorBytes(layerTs, 1, sh.pb, 1)
		unshardedGrad = tensorBytes(layerTs, 1, sh.gb, 1)
	case s.Zero >= 3 && N > 1:
		unsharded = 2 * tensorBytes(layerTs, 1, sh.pb, 1) // current + prefetched layer
		unshardedGrad = tensorBytes(layerTs, 1, sh.gb, 1)
	}
	var ddpBuckets int64
	if !s.ForwardOnly && s.DP > 1 && s.Zero == 0 && s.TP == 1 && s.PP == 1 {
		ddpBuckets = G // torch DDP bucket copies (gradient_as_bucket_view=False)
		addT("ddp_buckets", "allocated", ddpBuckets, "DistributedDataParallel gradient buckets: a flat copy of the gradients")
	}
	persistent := W + master + gradCopy + optState + ws + ddpBuckets
	raw := func(elem, shard int64) int64 {
		return rawBytes(layerTs, L, elem, shard) + rawBytes(otherTs, 1, elem, shard)
	}
	r.AllocatorRounding = W - boolMul(s.Offload != "params", raw(sh.pb, shardP))
	if !s.ForwardOnly {
		r.AllocatorRounding += G - raw(sh.gb, shardG)
		if master > 0 {
			r.AllocatorRounding += master - raw(4, shardO)
		}
		if gradCopy > 0 {
			r.AllocatorRounding += gradCopy - raw(4, shardO)
		}
		switch {
		case optState == 0:
		case s.Optimizer == "adamw" || s.Optimizer == "adam":
			r.AllocatorRounding += optState - 2*raw(sh.stateBytes, shardO)
		case s.Optimizer == "sgd":
			r.AllocatorRounding += optState - raw(sh.stateBytes, shardO)
		}
	}
	r.persistentAllocated = persistent
	r.ModelStates = map[string]int64{"parameters": W, "gradients": G, "master_weights": master,
		"fp32_grad_copy": gradCopy, "optimizer_state": optState}
	if s.ForwardOnly {
		r.ModelStates = map[string]int64{"parameters": W}
	}
	h := int64(m.Hidden)
	rows, ffn := sh.mlpTokens()
	persist := func(extra ...Term) []Term {
		ts := []Term{
			{Name: "parameters", Bytes: W, Where: "allocated", Formula: "model parameters on this rank"},
			{Name: "master_weights", Bytes: master, Where: "allocated", Formula: "fp32 master copy"},
			{Name: "fp32_grad_copy", Bytes: gradCopy, Where: "allocated", Formula: "fp32 gradients for the optimizer"},
			{Name: "optimizer_state", Bytes: optState, Where: "allocated", Formula: s.Optimizer + " state"},
			{Name: "ddp_buckets", Bytes: ddpBuckets, Where: "allocated", Formula: "DDP gradient buckets"},
			{Name: "cublas_workspace", Bytes: ws, Where: "allocated", Formula: "cuBLAS/cuBLASLt workspaces"},
		}
		return append(ts, extra...)
	}
	var matmulParams int64
	for _, t := range layerTs {
		if t.matmul {
			matmulParams += int64(L) * t.numel
		}
	}
	for _, t := range otherTs {
		if t.matmul {
			matmulParams += t.numel
		}
	}
	cacheF := fmt.Sprintf("torch.autocast caches a %d-byte copy of each matmul weight: %d params · %d B", sh.act, matmulParams, sh.act)
	logitsF := fmt.Sprintf("tokens·vocab·%d B/t = %d·%d·%d/%d", sh.act, sh.tokens, m.Vocab, sh.act, sh.t)
	actF := fmt.Sprintf("%.2f micro-batches · %d layers · %d B/layer + embedding %d B + head %d B", inflight, L, perLayer, embTotal, headTotal)
	term := func(name string, b int64, f string, a ...any) Term {
		return Term{Name: name, Bytes: b, Where: "allocated", Formula: fmt.Sprintf(f, a...)}
	}

	var phases []Phase
	if s.ForwardOnly {
		kv := int64(0)
		if m.HFUseCache {
			kv = int64(L) * sh.tokens * 2 * int64(m.KVHeads) * int64(m.HeadDim) * sh.act / sh.t
		}
		layerTmp := sh.tokens*h*sh.res/sh.seqShard + rows*ffn*2*sh.act/sh.t + sh.tokens*h*sh.act
		var headTmp, lg int64
		if last {
			headTmp = sh.tokens * h * (2*sh.res + sh.act) / sh.seqShard
			lg = logits
		}
		tmp, tf := layerTmp, fmt.Sprintf("one layer's MLP in flight: tokens·(h·res + 2·ffn·act + h·act) = %d", layerTmp)
		if headTmp+lg > layerTmp {
			tmp, tf = headTmp, "final norm input/output and the matmul input"
		} else {
			lg = 0
		}
		phases = append(phases, Phase{Name: "forward", Terms: persist(
			term("autocast_weight_cache", cacheAll, "%s", cacheF),
			term("activations", kv, "Hugging Face use_cache: layers·tokens·2kv·act"),
			term("unsharded_params", unsharded, "2 layers gathered (ZeRO-3/FSDP)"),
			term("logits", lg, "%s", logitsF),
			term("temporaries", tmp, "%s", tf),
		)})
	} else {
		g0 := int64(0)
		if s.GradAccum > 1 || s.MicroBatches > 1 {
			g0 = G
		}
		saved := layersTotal + embTotal + headTotal
		var lg, lossFwd, lossTmpFwd, keep, lossBwdTmp int64
		if last {
			lg = logits
			lossFwd = lossSaved
			lossTmpFwd = sh.lossForwardTemp()
			if s.KeepLogits {
				keep = logits
			}
			lossBwdTmp = sh.lossBackwardTemp()
		}
		fwdTmp := int64(0)
		if !last {
			fwdTmp = rows * ffn * sh.act / sh.t // one MLP intermediate being produced
		}
		phases = append(phases, Phase{Name: "forward", Terms: persist(
			term("gradients", g0, "kept across micro-batches (grad accumulation or pipeline)"),
			term("autocast_weight_cache", cacheAll, "%s", cacheF),
			term("unsharded_params", unsharded, "current + prefetched layer gathered (ZeRO-3/FSDP)"),
			term("activations", saved, "%s", actF),
			term("logits", lg, "%s", logitsF),
			term("loss", lossFwd, "%s", sh.lossSavedFormula()),
			term("temporaries", lossTmpFwd+fwdTmp, "%s", sh.lossForwardTempFormula()),
		)})

		// backward: the loss at its start, then the layers from last to first
		headGrad := tensorBytes(otherTs, 1, sh.gb, shardG)
		layerGrad := tensorBytes(layerTs, 1, sh.gb, shardG)
		var best Phase
		other := layersTotal - int64(L)*perLayer // other micro-batches in flight
		if last {
			best = sumPhase(Phase{Name: "backward", Terms: persist(
				term("gradients", g0, "present at the start of backward"),
				term("autocast_weight_cache", cacheAll-boolMul(full, int64(L)*cacheLayer), "%s (saved for backward)", cacheF),
				term("unsharded_params", unsharded, "gathered layers (ZeRO-3/FSDP)"),
				term("activations", saved, "%s", actF),
				term("logits", keep, "held by the caller: %s", logitsF),
				term("loss", lossFwd, "%s", sh.lossSavedFormula()),
				term("temporaries", lossBwdTmp, "%s", sh.lossBackwardTempFormula()),
			)})
		}
		tmpBwd := rows*ffn*2*sh.act/sh.t + 2*sh.tokens*h*sh.res/sh.seqShard
		var maxMat int64
		for _, t := range layerTs {
			maxMat = max(maxMat, t.numel)
		}
		if sh.amp {
			tmpBwd += maxMat * sh.act // a weight gradient in bf16 before its fp32 cast
		}
		for j := L - 1; j >= 0; j-- {
			grads := g0
			if g0 == 0 {
				grads = headGrad + int64(L-1-j)*layerGrad
			}
			cache := cacheOther + cacheLayer
			if !full {
				cache += int64(j) * cacheLayer
			}
			rec := int64(0)
			if full {
				rec = perLayerFull
			}
			p := sumPhase(Phase{Name: "backward", Terms: persist(
				term("gradients", grads, "gradients so far (layer %d of %d)", j, L),
				term("autocast_weight_cache", cache, "weight copies of layers not yet differentiated"),
				term("unsharded_params", unsharded+unshardedGrad, "gathered layers and one unsharded layer gradient (ZeRO-3/FSDP)"),
				term("activations", other+int64(j+1)*perLayer+embTotal+rec, "saved activations of layers 0..%d (+ other micro-batches, + the recomputed layer)", j),
				term("logits", keep, "held by the caller: %s", logitsF),
				term("temporaries", tmpBwd, "gradients of one layer's MLP intermediates and residual stream: rows·2·ffn·%d/t + 2·tokens·h·%d%s", sh.act, sh.res, ifStr(sh.amp, " + one weight gradient in 16-bit before its fp32 cast", "")),
			)})
			if p.Bytes > best.Bytes {
				best = p
			}
		}
		// end of backward: all gradients plus the embedding's gradient before accumulation
		embTmp, embF := int64(0), ""
		if first {
			embTmp = round512(int64(m.Vocab) * h * sh.gb / sh.t)
			embF = "the embedding's gradient (vocab·h·%d/t)"
			if m.TiedEmbeddings && !sh.amp {
				// fp32: the tied weight's first gradient is the output projection's matmul
				// gradient, and the embedding's is added out of place (old + new + sum live at
				// once); under autocast it arrives through the fp32 cast and is added in place.
				// Seen in the H100 allocator history (docs/validation.md).
				embTmp *= 2
				embF = "the embedding's gradient and its sum with the tied output projection's (2·vocab·h·%d/t)"
			}
		}
		end := sumPhase(Phase{Name: "backward", Terms: persist(
			term("gradients", G, "all gradients"),
			term("unsharded_params", unsharded+unshardedGrad, "gathered layers (ZeRO-3/FSDP)"),
			term("logits", keep, "held by the caller: %s", logitsF),
			term("temporaries", embTmp, embF, sh.gb),
		)})
		if end.Bytes > best.Bytes {
			best = end
		}
		phases = append(phases, best)

		keepStep := int64(0)
		if s.PP == 1 && s.KeepLogits {
			keepStep = logits
		}
		phases = append(phases, Phase{Name: "optimizer_step", Terms: persist(
			term("gradients", G, "all gradients"),
			term("logits", keepStep, "held by the caller until the step returns: %s", logitsF),
			term("temporaries", optTemp, "%s", optTempFormula(s.Optimizer)),
		)})
	}
	for i := range phases {
		phases[i] = sumPhase(phases[i])
	}
	r.Phases = phases
	peak := phases[0]
	for _, p := range phases[1:] {
		if p.Bytes > peak.Bytes {
			peak = p
		}
	}
	r.PeakPhase = peak.Name
	r.PeakAllocatedBytes = peak.Bytes
	// the breakdown is the peak phase's terms (they sum to the peak) plus the terms beyond it
	detail := map[string]Term{}
	for _, t := range terms {
		detail[t.Name] = t
	}
	terms = terms[:0]
	for _, t := range peak.Terms {
		if d, ok := detail[t.Name]; ok && d.Bytes == t.Bytes {
			t.Formula = d.Formula
		}
		if t.Bytes != 0 || t.Name == "activations" {
			terms = append(terms, t)
		}
	}
	dyn := r.PeakAllocatedBytes - persistent
	segPersistent := segmentOverhead(layerTs, otherTs, L, sh, s, shardP, shardG, shardO, master > 0, optState > 0)
	frag := int64(float64(max(dyn, 0)) * FragmentationRatio)
	addT("allocator_segments", "reserved", segPersistent, "split-off remainders of 2 MiB-rounded segments of persistent tensors, 20 MiB segments for 1-10 MiB ones")
	addT("fragmentation_allowance", "reserved", frag, "%.0f%% of the non-persistent peak (%d B): split, cached blocks the allocator cannot reuse", FragmentationRatio*100, dyn)
	r.PeakReservedBytes = roundUp(r.PeakAllocatedBytes+segPersistent+frag, 2<<20)
	nccl := ncclBytes(s)
	addT("cuda_context", "device", dev.CUDAContextBytes, "CUDA context, kernels and library handles (%s)", dev.Arch)
	addT("nccl_buffers", "device", nccl, "%s", ncclFormula(s))
	r.DeviceTotalBytes = r.PeakReservedBytes + dev.CUDAContextBytes + nccl
	r.Terms = terms
	return r
}

func ifStr(b bool, t, f string) string {
	if b {
		return t
	}
	return f
}

func boolMul(b bool, v int64) int64 {
	if b {
		return v
	}
	return 0
}

func sumPhase(p Phase) Phase {
	var n int64
	for _, t := range p.Terms {
		n += t.Bytes
	}
	p.Bytes = n
	return p
}

func roundUp(n, m int64) int64 { return (n + m - 1) / m * m }

func shardNote(n int64, what string) string {
	if n <= 1 {
		return ""
	}
	return fmt.Sprintf(" / %d (%s sharded over dp·cp)", n, what)
}

func optStateFormula(o string, sb int64) string {
	switch o {
	case "adamw", "adam":
		return fmt.Sprintf("exp_avg + exp_avg_sq = 2 · %d B/param", sb)
	case "sgd":
		return fmt.Sprintf("momentum buffer = %d B/param", sb)
	case "adamw8bit":
		return "two 8-bit states = 2 B/param"
	case "adafactor":
		return "factored second moment: (rows + cols) · 4 B per matrix"
	}
	return ""
}

func optTempFormula(o string) string {
	switch o {
	case "adamw", "adam":
		return "foreach AdamW: sqrt(exp_avg_sq) for all parameters at once (1 · state bytes/param)"
	case "adafactor":
		return "one update tensor of the largest parameter"
	}
	return "in-place update, no temporaries"
}
