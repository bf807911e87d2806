package snapgen

import (
	"io"
	"math/rand/v2"
	"slices"
)

// GPT-2 small trained at batch 8 x 512 tokens, fp32, AdamW (foreach),
// zero_grad(set_to_none=True), recorded from before the model is built (as
// scripts/gpu/snapshot_scenarios.py big records it). The op sequence of a
// step is the one transformers' GPT2LMHeadModel allocates on an H100 (read
// off the committed GPT-2 small fixture, batch 4, and scaled to batch 8):
// per layer 28 allocations in forward (20 kept for backward, two of them
// the key/value cache) and 45 in backward (12 of them the layer's
// gradients), logits and three more logits-sized tensors for the loss, the
// tied embedding's gradient, and one foreach temporary per parameter in the
// optimizer: 1,053 allocations, 3,159 entries a step. Blocks are placed by a
// small model of the caching allocator (best fit within a pool; 2 MiB
// segments for blocks up to 1 MiB, 20 MiB for up to 10 MiB, larger ones
// their own segment rounded to 2 MiB; never released), so that the trace's
// segment_alloc entries and the final segments agree with the blocks.
const (
	gBatch  = 8
	gSeq    = 512
	gEmbd   = 768
	gVocab  = 50257
	gPos    = 1024
	gLayers = 12
	gHeads  = 12
)

const (
	opAlloc uint8 = iota
	opFree
	opSegment
)

type gop struct {
	kind  uint8
	id    int32 // block, or segment for opSegment
	stack int32 // the entry's frames (alloc or free)
}

type gblock struct {
	addr, size int64
	stack      int32
	seg        int32
	live       bool
}

type span struct{ off, size int64 }

type gseg struct {
	base, size int64
	small      bool
	free       []span // by offset, coalesced
}

// gplan is the trace before it is written: the allocator model places
// every block so that the final segments can be written first.
type gplan struct {
	limit  int
	n      int // entries planned
	ops    []gop
	blocks []gblock
	segs   []gseg
	next   int64 // address of the next segment
	done   bool
}

func (p *gplan) room(entries int) bool {
	if p.n+entries > p.limit {
		p.done = true
	}
	return !p.done
}

// place finds the best-fitting free span of the block's pool, or maps a
// new segment.
func (p *gplan) place(size int64) (seg int, off int64, ok bool) {
	small := size <= 1<<20
	best, bestSpan := -1, -1
	for i := range p.segs {
		g := &p.segs[i]
		if g.small != small {
			continue
		}
		for k, sp := range g.free {
			if sp.size >= size && (best < 0 || sp.size < p.segs[best].free[bestSpan].size) {
				best, bestSpan = i, k
			}
		}
	}
	if best < 0 {
		if !p.room(2) {
			return 0, 0, false
		}
		var total int64
		switch {
		case small:
			total = 2 << 20
		case size < 10<<20:
			total = 20 << 20
		default:
			total = (size + 2<<20 - 1) / (2 << 20) * (2 << 20)
		}
		p.segs = append(p.segs, gseg{base: p.next, size: total, small: small, free: []span{{0, total}}})
		p.next += (total + 64<<20 - 1) / (64 << 20) * (64 << 20) // leave gaps between mappings
		p.ops = append(p.ops, gop{kind: opSegment, id: int32(len(p.segs) - 1)})
		p.n++
		best, bestSpan = len(p.segs)-1, 0
	}
	g := &p.segs[best]
	sp := &g.free[bestSpan]
	off = sp.off
	sp.off += size
	sp.size -= size
	if sp.size == 0 {
		g.free = slices.Delete(g.free, bestSpan, bestSpan+1)
	}
	return best, off, true
}

// alloc plans an allocation of size bytes from stack st; -1 once the
// entries are used up.
func (p *gplan) alloc(size int64, st int32) int32 {
	size = (size + 511) / 512 * 512
	if !p.room(1) {
		return -1
	}
	seg, off, ok := p.place(size)
	if !ok || !p.room(1) {
		return -1
	}
	p.blocks = append(p.blocks, gblock{addr: p.segs[seg].base + off, size: size, stack: st, seg: int32(seg), live: true})
	id := int32(len(p.blocks) - 1)
	p.ops = append(p.ops, gop{kind: opAlloc, id: id, stack: st})
	p.n++
	return id
}

// free plans a free (free_requested and free_completed) from stack st.
func (p *gplan) free(id, st int32) {
	if id < 0 || !p.blocks[id].live || !p.room(2) {
		return
	}
	b := &p.blocks[id]
	b.live = false
	g := &p.segs[b.seg]
	off := b.addr - g.base
	k, _ := slices.BinarySearchFunc(g.free, off, func(s span, o int64) int { return int(s.off - o) })
	g.free = slices.Insert(g.free, k, span{off, b.size})
	if k+1 < len(g.free) && g.free[k].off+g.free[k].size == g.free[k+1].off {
		g.free[k].size += g.free[k+1].size
		g.free = slices.Delete(g.free, k+1, k+2)
	}
	if k > 0 && g.free[k-1].off+g.free[k-1].size == g.free[k].off {
		g.free[k-1].size += g.free[k].size
		g.free = slices.Delete(g.free, k, k+1)
	}
	p.ops = append(p.ops, gop{kind: opFree, id: id, stack: st})
	p.n += 2
}

// gpt2Stacks are the Python stacks of the ops, as frame indices.
type gpt2Stacks struct {
	frames []frame
	index  map[frame]int
	stacks [][]int
}

func (s *gpt2Stacks) add(fr ...frame) int32 {
	st := make([]int, len(fr))
	for i, f := range fr {
		k, ok := s.index[f]
		if !ok {
			k = len(s.frames)
			s.frames = append(s.frames, f)
			s.index[f] = k
		}
		st[i] = k
	}
	s.stacks = append(s.stacks, st)
	return int32(len(s.stacks) - 1)
}

// the stacks of one model's ops
type gpt2Ops struct {
	param, input, optState, optim, zeroGrad, stepEnd, backward                                          int32
	emb, ln, qkv, cache, sdpa, attnProj, dropout, residual, fc, gelu, proj, lnf, lmHead, lossPrep, loss int32
}

func newGPT2Stacks() (*gpt2Stacks, *gpt2Ops) {
	const site = "/opt/venv/lib/python3.12/site-packages/"
	const gpt2 = site + "transformers/models/gpt2/modeling_gpt2.py"
	s := &gpt2Stacks{index: map[frame]int{}}
	main := frame{"train.py", "main", 120}
	step := func(line int) []frame { return []frame{{"train.py", "train_step", line}, main} }
	call := func(f frame) []frame {
		return []frame{f, {site + "torch/nn/modules/module.py", "_call_impl", 1784}, {site + "torch/nn/modules/module.py", "_wrapped_call_impl", 1773}}
	}
	// fwd stacks an op's frames over module forwards, outermost last
	fwd := func(op []frame, modules ...frame) int32 {
		fr := append([]frame(nil), op...)
		for _, m := range modules {
			fr = append(fr, call(m)...)
		}
		fr = append(fr, call(frame{gpt2, "forward", 1102})...) // GPT2LMHeadModel
		return s.add(append(fr, step(86)...)...)
	}
	model := frame{gpt2, "forward", 922} // GPT2Model
	block := func(line int) []frame { return []frame{{gpt2, "forward", line}, model} }
	attn := func(line int) []frame { return append([]frame{{gpt2, "forward", line}}, block(391)...) }
	mlp := func(line int) []frame { return append([]frame{{gpt2, "forward", line}}, block(404)...) }
	conv := []frame{{site + "transformers/pytorch_utils.py", "forward", 119}}
	layerNorm := []frame{{site + "torch/nn/functional.py", "layer_norm", 2910}, {site + "torch/nn/modules/normalization.py", "forward", 229}}
	o := &gpt2Ops{}
	o.param = s.add(frame{site + "torch/nn/modules/module.py", "convert", 1341}, frame{site + "torch/nn/modules/module.py", "_apply", 915},
		frame{site + "torch/nn/modules/module.py", "_apply", 942}, frame{site + "torch/nn/modules/module.py", "cuda", 1055}, frame{"train.py", "main", 110})
	o.input = s.add(frame{"train.py", "main", 114})
	optim := []frame{{site + "torch/optim/adamw.py", "step", 232}, {site + "torch/optim/optimizer.py", "wrapper", 485}}
	o.optState = s.add(append([]frame{{site + "torch/optim/adamw.py", "_init_group", 120}}, append(optim, step(88)...)...)...)
	o.optim = s.add(append([]frame{{site + "torch/optim/adamw.py", "_multi_tensor_adamw", 514}, {site + "torch/optim/adamw.py", "adamw", 389}},
		append(optim, step(88)...)...)...)
	o.zeroGrad = s.add(append([]frame{{site + "torch/optim/optimizer.py", "zero_grad", 966}}, step(89)...)...)
	o.stepEnd = s.add(step(86)...)
	o.backward = s.add(append([]frame{{site + "torch/autograd/graph.py", "_engine_run_backward", 829}, {site + "torch/autograd/__init__.py", "backward", 356},
		{site + "torch/_tensor.py", "backward", 648}}, step(87)...)...)
	o.emb = fwd([]frame{{site + "torch/nn/functional.py", "embedding", 2551}}, frame{site + "torch/nn/modules/sparse.py", "forward", 192}, model)
	o.ln = fwd(layerNorm, block(390)...)
	o.qkv = fwd(conv, attn(273)...)
	o.cache = fwd([]frame{{site + "transformers/cache_utils.py", "update", 146}}, attn(293)...)
	o.sdpa = fwd([]frame{{site + "transformers/integrations/sdpa_attention.py", "sdpa_attention_forward", 158}}, attn(304)...)
	o.attnProj = fwd(conv, attn(312)...)
	o.dropout = fwd([]frame{{site + "torch/nn/functional.py", "dropout", 1425}, {site + "torch/nn/modules/dropout.py", "forward", 70}}, attn(313)...)
	o.residual = fwd(nil, block(398)...)
	o.fc = fwd(conv, mlp(339)...)
	o.gelu = fwd([]frame{{site + "transformers/activations.py", "forward", 66}}, mlp(340)...)
	o.proj = fwd(conv, mlp(341)...)
	o.lnf = fwd(layerNorm, model)
	o.lmHead = fwd([]frame{{site + "torch/nn/modules/linear.py", "forward", 134}})
	o.lossPrep = s.add(append([]frame{{site + "transformers/loss/loss_utils.py", "ForCausalLMLoss", 58}, {gpt2, "forward", 1131}}, step(86)...)...)
	o.loss = s.add(append([]frame{{site + "torch/nn/functional.py", "cross_entropy", 3504}, {site + "transformers/loss/loss_utils.py", "fixed_cross_entropy", 40},
		{site + "transformers/loss/loss_utils.py", "ForCausalLMLoss", 70}, {gpt2, "forward", 1131}}, step(86)...)...)
	return s, o
}

// gpt2Params are the parameter sizes in the model's order: wte, wpe, per
// layer ln_1, attn.c_attn, attn.c_proj, ln_2, mlp.c_fc, mlp.c_proj (weight,
// bias each), ln_f.
func gpt2Params() []int64 {
	ln := int64(gEmbd * 4)
	out := []int64{gVocab * gEmbd * 4, gPos * gEmbd * 4}
	for l := 0; l < gLayers; l++ {
		out = append(out, ln, ln, gEmbd*3*gEmbd*4, 3*gEmbd*4, gEmbd*gEmbd*4, ln, ln, ln, gEmbd*4*gEmbd*4, 4*gEmbd*4, 4*gEmbd*gEmbd*4, ln)
	}
	return append(out, ln, ln)
}

// planGPT2 plans the trace of o.Entries entries (about).
func planGPT2(o Options, ops *gpt2Ops) *gplan {
	p := &gplan{limit: o.Entries, next: 0x7f0000000000}
	const (
		H    = gBatch * gSeq * gEmbd * 4 // a hidden state
		Q    = H / 4
		sT   = gBatch * gSeq * 4          // a float per token
		sLSE = gBatch * gHeads * gSeq * 4 // attention's logsumexp
		tiny = 512
		L    = gBatch * gSeq * gVocab * 4 // logits
	)
	params := gpt2Params()
	a := func(size int64, st int32) int32 { return p.alloc(size, st) }
	f := p.free
	for _, sz := range params {
		a(sz, ops.param)
	}
	a(gBatch*gSeq*8, ops.input)
	// per layer: the forward's blocks by template position, and the
	// gradients in the parameters' order
	type layer struct {
		r     [28]int32
		grads [12]int32
	}
	for stepNo := 0; !p.done; stepNo++ {
		var ly [gLayers]layer
		// embeddings, and the first layer norm's output (P.r27 of layer 0)
		e0 := a(H, ops.emb)
		e1 := a(tiny, ops.emb)
		e2 := a(tiny, ops.emb)
		f(e1, ops.emb)
		e3 := a(Q, ops.ln)
		e4 := a(H, ops.ln)
		e5 := a(Q, ops.ln)
		e6 := a(H, ops.ln)
		f(e4, ops.ln)
		prev := e6
		for l := range ly {
			r := &ly[l].r
			for i, c := range []struct {
				size int64
				st   int32
			}{{H, ops.qkv}, {sT, ops.qkv}, {sT, ops.qkv}, {3 * H, ops.qkv}, {H, ops.cache}, {H, ops.cache}, {H, ops.sdpa},
				{sLSE, ops.sdpa}, {H, ops.attnProj}, {Q, ops.dropout}, {H, ops.residual}} {
				r[i] = a(c.size, c.st)
			}
			f(r[8], ops.attnProj)
			r[11] = a(H, ops.ln)
			r[12] = a(H, ops.ln)
			r[13] = a(sT, ops.ln)
			r[14] = a(sT, ops.ln)
			r[15] = a(4*H, ops.fc)
			r[16] = a(4*H, ops.gelu)
			r[17] = a(4*H, ops.gelu)
			r[18] = a(4*H, ops.gelu)
			f(r[17], ops.gelu)
			r[19] = a(4*H, ops.gelu)
			f(r[18], ops.gelu)
			r[20] = a(4*H, ops.gelu)
			f(r[19], ops.gelu)
			r[21] = a(4*H, ops.gelu)
			f(r[20], ops.gelu)
			r[22] = a(4*H, ops.gelu)
			r[23] = a(4*H, ops.proj)
			r[24] = a(H, ops.dropout)
			r[25] = a(Q, ops.ln)
			r[26] = a(H, ops.ln)
			f(r[24], ops.dropout)
			r[27] = a(H, ops.residual)
			f(r[10], ops.residual)
			f(r[26], ops.ln)
		}
		// final layer norm and the loss
		f0 := a(H, ops.lnf)
		f1 := a(sT, ops.lnf)
		f2 := a(sT, ops.lnf)
		f(e0, ops.stepEnd)
		f(e3, ops.stepEnd)
		lg := a(L, ops.lmHead)
		t1 := a(2*sT, ops.lossPrep)
		t2 := a(2*sT, ops.lossPrep)
		l2 := a(L, ops.lossPrep)
		t3 := a(tiny, ops.lossPrep)
		t4 := a(tiny, ops.lossPrep)
		f(t1, ops.lossPrep)
		t5 := a(tiny, ops.loss)
		l3 := a(L, ops.loss)
		f(t2, ops.loss)
		f(t4, ops.loss)
		l4 := a(L, ops.loss)
		f(l3, ops.loss)
		f(l2, ops.loss)
		// backward: the lm head (the tied embedding's gradient), ln_f
		bw := ops.backward
		wg := a(params[0], bw)
		h0 := a(H, bw)
		f(l4, bw)
		f(f0, bw)
		h1 := a(H, bw)
		lnfW := a(params[len(params)-2], bw)
		lnfB := a(params[len(params)-1], bw)
		f(h0, bw)
		f(ly[gLayers-1].r[27], bw)
		f(f1, bw)
		f(f2, bw)
		for l := gLayers - 1; l >= 0; l-- {
			r, gr := &ly[l].r, &ly[l].grads
			pr := prev
			if l > 0 {
				pr = ly[l-1].r[27]
			}
			pp := params[2+12*l:]
			var g [45]int32
			g[0] = a(H, bw)
			f(r[25], bw)
			g[1] = a(4*H, bw)
			gr[10] = a(pp[10], bw) // mlp.c_proj
			gr[11] = a(pp[11], bw)
			g[4] = a(2*H, bw)
			g[5] = a(tiny, bw)
			f(g[5], bw)
			f(g[4], bw)
			f(g[0], bw)
			f(r[23], bw)
			g[6] = a(4*H, bw)
			g[7] = a(4*H, bw)
			f(g[1], bw)
			f(r[22], bw)
			f(r[16], bw)
			g[8] = a(4*H, bw)
			f(g[6], bw)
			f(r[21], bw)
			g[9] = a(4*H, bw)
			f(g[8], bw)
			for i := 10; i < 14; i++ {
				g[i] = a(4*H, bw)
			}
			f(g[12], bw)
			f(g[11], bw)
			f(g[10], bw)
			f(r[15], bw)
			f(g[13], bw)
			g[14] = a(4*H, bw)
			f(g[7], bw)
			f(g[14], bw)
			g[15] = a(H, bw)
			gr[8] = a(pp[8], bw) // mlp.c_fc
			gr[9] = a(pp[9], bw)
			g[18] = a(8*H, bw)
			g[19] = a(tiny, bw)
			f(g[19], bw)
			f(g[18], bw)
			f(g[9], bw)
			f(r[12], bw)
			g[20] = a(H, bw)
			gr[6] = a(pp[6], bw) // ln_2
			gr[7] = a(pp[7], bw)
			f(g[15], bw)
			f(r[11], bw)
			f(r[13], bw)
			f(r[14], bw)
			f(g[20], bw)
			g[23] = a(H, bw)
			f(r[9], bw)
			g[24] = a(H, bw)
			gr[4] = a(pp[4], bw) // attn.c_proj
			gr[5] = a(pp[5], bw)
			g[27] = a(2*H, bw)
			g[28] = a(tiny, bw)
			f(g[28], bw)
			f(g[27], bw)
			f(g[23], bw)
			for i := 29; i < 33; i++ {
				g[i] = a(H, bw)
			}
			g[33] = a(sLSE, bw)
			g[34] = a(sLSE, bw)
			f(g[33], bw)
			f(g[32], bw)
			g[35] = a(H+2*sT, bw)
			f(g[34], bw)
			f(g[35], bw)
			f(g[24], bw)
			f(r[3], bw)
			f(r[7], bw)
			f(r[6], bw)
			g[36] = a(3*H, bw)
			f(g[29], bw)
			f(g[30], bw)
			f(g[31], bw)
			g[37] = a(H, bw)
			gr[2] = a(pp[2], bw) // attn.c_attn
			gr[3] = a(pp[3], bw)
			g[40] = a(6*H, bw)
			g[41] = a(tiny, bw)
			f(g[41], bw)
			f(g[40], bw)
			f(g[36], bw)
			f(r[0], bw)
			g[42] = a(H, bw)
			gr[0] = a(pp[0], bw) // ln_1
			gr[1] = a(pp[1], bw)
			f(g[37], bw)
			f(pr, bw)
			f(r[1], bw)
			f(r[2], bw)
			f(g[42], bw)
		}
		// the embeddings' backward
		g0 := a(H, bw)
		f(h1, bw)
		f(e5, bw)
		t := a(Q, bw)
		wpeG := a(params[1], bw)
		f(t, bw)
		f(e2, bw)
		x1 := a(params[0], bw)
		f(g0, bw)
		wteG := a(params[0], bw)
		f(wg, bw)
		f(x1, bw)
		f(t5, bw)
		// AdamW: its state on the first step, then one foreach temporary
		// per parameter, freed in reverse
		if stepNo == 0 {
			for _, sz := range params {
				a(sz, ops.optState) // exp_avg
				a(sz, ops.optState) // exp_avg_sq
			}
		}
		tmp := make([]int32, len(params))
		for i, sz := range params {
			tmp[i] = a(sz, ops.optim)
		}
		for i := len(tmp) - 1; i >= 0; i-- {
			f(tmp[i], ops.optim)
		}
		// zero_grad(set_to_none=True), in the parameters' order
		f(wteG, ops.zeroGrad)
		f(wpeG, ops.zeroGrad)
		for l := range ly {
			for _, gid := range ly[l].grads {
				f(gid, ops.zeroGrad)
			}
		}
		f(lnfW, ops.zeroGrad)
		f(lnfB, ops.zeroGrad)
		// the step's outputs go: logits, the key/value cache
		f(lg, ops.stepEnd)
		for l := range ly {
			f(ly[l].r[4], ops.stepEnd)
			f(ly[l].r[5], ops.stepEnd)
		}
		f(t3, ops.stepEnd)
	}
	return p
}

// writeGPT2 writes the ModelGPT2Small snapshot: one device, Options.Entries
// entries at most (it stops before an operation that would not fit).
func writeGPT2(w io.Writer, o Options) error {
	st, ops := newGPT2Stacks()
	p := planGPT2(o, ops)
	g := newGen(w, st.frames, rand.New(rand.NewPCG(o.Seed, 7)), o.StrSizeEvery)
	// the final segments: live blocks and free spans by address
	bySeg := make([][]int32, len(p.segs))
	for id, b := range p.blocks {
		if b.live {
			bySeg[b.seg] = append(bySeg[b.seg], int32(id))
		}
	}
	g.begin()
	for s, seg := range p.segs {
		ids := bySeg[s]
		slices.SortFunc(ids, func(x, y int32) int { return int(p.blocks[x].addr - p.blocks[y].addr) })
		var pieces []segBlock
		at := seg.base
		for _, id := range ids {
			b := &p.blocks[id]
			if b.addr > at {
				pieces = append(pieces, segBlock{size: b.addr - at, inactive: true})
			}
			pieces = append(pieces, segBlock{size: b.size, stack: st.stacks[b.stack]})
			at = b.addr + b.size
		}
		g.segment(seg.base, seg.size, pieces)
	}
	g.endSegments()
	g.beginTraces()
	g.beginDevice()
	for _, op := range p.ops {
		switch op.kind {
		case opSegment:
			s := &p.segs[op.id]
			g.entry("segment_alloc", s.base, s.size, -2, nil)
		case opAlloc:
			b := &p.blocks[op.id]
			g.entry("alloc", b.addr, b.size, -1, st.stacks[op.stack])
		case opFree:
			b := &p.blocks[op.id]
			m := g.entry("free_requested", b.addr, b.size, -1, st.stacks[op.stack])
			g.entry("free_completed", b.addr, b.size, m, nil)
		}
	}
	g.endDevice()
	return g.finish()
}
