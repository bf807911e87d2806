package estimate

import (
	"fmt"

	"github.com/ptscope/ptscope/internal/envelope"
)

// FragmentationRatio is the allowance for caching-allocator fragmentation on top of the
// non-persistent (activation and temporary) part of the peak; see docs/estimate.md.
const FragmentationRatio = 0.20

// ExpandableRatio is what expandable segments reserve beyond the allocated peak, as a share
// of its non-persistent part (0.23% measured on an H100; docs/estimate.md).
const ExpandableRatio = 0.0025

// Estimate computes the memory of every distinct rank (one per pipeline
// stage), the verdict for dev and the findings.
func Estimate(m Model, s Setup, dev Device) (*Result, error) {
	m, err := m.normalize()
	if err != nil {
		return nil, err
	}
	s, err = s.normalize(m)
	if err != nil {
		return nil, err
	}
	res := &Result{Header: envelope.NewHeader("estimate"), Model: m, Setup: s, Device: dev,
		Params: m.Params(), ActiveParams: m.ActiveParams()}
	for k := 0; k < s.PP; k++ {
		res.Ranks = append(res.Ranks, newStage(m, s, dev, k).build())
	}
	for i, r := range res.Ranks {
		if r.DeviceTotalBytes > res.Ranks[res.TopRank].DeviceTotalBytes {
			res.TopRank = i
		}
	}
	res.Summary = summarize(res.Ranks, res.TopRank, dev)
	res.Findings = findings(res)
	return res, nil
}

// summarize is the most loaded rank's outcome and the verdict.
func summarize(ranks []Rank, top int, dev Device) Summary {
	t := ranks[top]
	sum := Summary{TopRank: top, PeakAllocatedBytes: t.PeakAllocatedBytes, PeakReservedBytes: t.PeakReservedBytes,
		DeviceTotalBytes: t.DeviceTotalBytes, HostBytes: t.HostBytes, PeakPhase: t.PeakPhase}
	if dev.MemoryBytes <= 0 {
		return sum
	}
	head := dev.MemoryBytes - t.DeviceTotalBytes
	sum.HeadroomBytes = &head
	switch {
	case head < 0:
		sum.Verdict = DoesNotFit
	case head < termBytes(t.Terms, "fragmentation_allowance"):
		// measured fragmentation ranged from about 0 to 3x the allowance
		sum.Verdict = Tight
	default:
		sum.Verdict = Fits
	}
	return sum
}

func termBytes(ts []Term, name string) int64 {
	for _, t := range ts {
		if t.Name == name {
			return t.Bytes
		}
	}
	return 0
}

// stage builds the estimate of one pipeline stage's rank.
type stage struct {
	m     Model
	s     Setup
	dev   Device
	sh    shape
	k     int
	first bool // holds the embeddings
	last  bool // holds the final norm, the output projection and the loss

	layerTs, otherTs []tensor
	L                int   // layers on this stage
	shardP           int64 // ranks sharing the parameters, gradients, optimizer state
	shardG, shardO   int64

	// model states (allocator blocks) and the optimizer step's temporaries
	W, G, master, gradCopy, optState, optTemp, ddp, ws int64
	vocabG                                             int64 // the part of G beyond the shards: the megatron plan's whole-vocabulary embedding gradient
	host                                               []Term

	detail []Term // every term with its full formula, by first appearance
}

func newStage(m Model, s Setup, dev Device, k int) *stage {
	st := &stage{m: m, s: s, dev: dev, sh: newShape(m, s), k: k, first: k == 0, last: k == s.PP-1,
		shardP: 1, shardG: 1, shardO: 1}
	st.layerTs, st.otherTs, st.L = stageTensors(m, s, k)
	n := int64(s.DP * s.CP) // ZeRO/FSDP shard group
	if s.Zero >= 1 {
		st.shardO = n
	}
	if s.Zero >= 2 {
		st.shardG = n
	}
	if s.Zero >= 3 {
		st.shardP = n
	}
	return st
}

// stageTensors lists the parameter tensors of pipeline stage k, already split by TP and EP.
func stageTensors(m Model, s Setup, k int) (layer, other []tensor, layers int) {
	split := func(ts []tensor) []tensor {
		out := make([]tensor, 0, len(ts))
		for _, t := range ts {
			if t.expert && s.EP > 1 && t.expertIdx >= m.Experts/s.EP {
				continue // expert parallelism keeps experts/ep experts on each rank
			}
			if t.tpSplit && s.TP > 1 && (!t.vocab || s.TPPlan == TPPlanMegatron) {
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
	last := k == s.PP-1
	if k == 0 {
		for _, t := range split(m.embeddingTensors()) {
			t.headGrad = last && m.TiedEmbeddings && t.name == "wte" // the output projection's gradient lands in it
			other = append(other, t)
		}
	}
	if last {
		var head []tensor
		head = append(head, split(m.headTensors())...)
		if s.PP > 1 && m.TiedEmbeddings {
			head = append(head, split(m.embeddingTensors()[:1])...) // copy of the tied embedding
		}
		for _, t := range head {
			t.headGrad = true
			other = append(other, t)
		}
	}
	return layer, other, m.Layers / s.PP
}

// all is the allocator blocks of every tensor of the stage in elem-byte
// elements, each split over shard ranks.
func (st *stage) all(elem, shard int64) int64 {
	return tensorBytes(st.layerTs, st.L, elem, shard) + tensorBytes(st.otherTs, 1, elem, shard)
}

func (st *stage) raw(elem, shard int64) int64 {
	return rawBytes(st.layerTs, st.L, elem, shard) + rawBytes(st.otherTs, 1, elem, shard)
}

func (st *stage) params() int64 {
	n := int64(st.L) * sumNumel(st.layerTs)
	for _, t := range st.otherTs {
		n += t.numel
	}
	return n
}

// note records a term with its full formula (the phases carry short ones).
func (st *stage) note(name string, where Where, b int64, f string, a ...any) int64 {
	st.detail = append(st.detail, Term{Name: name, Bytes: b, Where: where, Formula: fmt.Sprintf(f, a...)})
	return b
}

func (st *stage) build() Rank {
	s := st.s
	r := Rank{Name: fmt.Sprintf("pp_stage_%d", st.k), Stage: st.k, Params: st.params()}
	if s.PP == 1 {
		r.Name = "rank"
	}
	st.modelStates()
	r.ModelStates = ModelStates{ParametersBytes: st.W, GradientsBytes: st.G, MasterWeightsBytes: st.master,
		FP32GradCopyBytes: st.gradCopy, OptimizerStateBytes: st.optState, DDPBucketsBytes: st.ddp}
	if s.ForwardOnly {
		r.ModelStates = ModelStates{ParametersBytes: st.W}
	}
	r.AllocatorRoundingBytes = st.rounding()
	act, acts := st.activations()
	r.Activations = act
	r.Phases = st.phases(acts)
	peak := r.Phases[0]
	for _, p := range r.Phases[1:] {
		if p.Bytes > peak.Bytes {
			peak = p
		}
	}
	r.PeakPhase, r.PeakAllocatedBytes = peak.Name, peak.Bytes
	// the breakdown is the peak phase's terms (they sum to the peak) with
	// their full formulas, then the terms beyond the allocated memory
	for _, t := range peak.Terms {
		for _, d := range st.detail {
			if d.Name == t.Name && d.Bytes == t.Bytes {
				t.Formula = d.Formula
				break
			}
		}
		if t.Bytes != 0 || t.Name == "activations" {
			r.Terms = append(r.Terms, t)
		}
	}
	persistent := st.W + st.master + st.gradCopy + st.optState + st.ws + st.ddp
	dyn := r.PeakAllocatedBytes - persistent
	seg := segmentOverhead(st.layerTs, st.otherTs, st.L, st.sh, s, st.shardP, st.shardG, st.shardO, st.master > 0, st.optState > 0)
	frag := int64(float64(max(dyn, 0)) * FragmentationRatio)
	segF := "split-off remainders of 2 MiB-rounded segments of persistent tensors, 20 MiB segments for 1-10 MiB ones"
	fragF := fmt.Sprintf("%.0f%% of the non-persistent peak (%d B): split, cached blocks the allocator cannot reuse", FragmentationRatio*100, dyn)
	if s.ExpandableSegments {
		seg, segF = 0, "expandable segments: one mapped range per stream and pool, grown in 2 MiB pages"
		frag = int64(float64(max(dyn, 0)) * ExpandableRatio)
		fragF = fmt.Sprintf("expandable segments: %.2f%% of the non-persistent peak (%d B), the pages' rounding", ExpandableRatio*100, dyn)
	}
	nccl := ncclBytes(s)
	r.Terms = append(r.Terms,
		Term{"allocator_segments", seg, Reserved, segF},
		Term{"fragmentation_allowance", frag, Reserved, fragF},
		Term{"cuda_context", st.dev.CUDAContextBytes, OnDevice, fmt.Sprintf("CUDA context, kernels and library handles (%s)", st.dev.Arch)},
		Term{"nccl_buffers", nccl, OnDevice, ncclFormula(s)})
	r.PeakReservedBytes = roundUp(r.PeakAllocatedBytes+seg+frag, 2<<20)
	r.DeviceTotalBytes = r.PeakReservedBytes + st.dev.CUDAContextBytes + nccl
	for _, h := range st.host {
		r.Terms = append(r.Terms, h)
		r.HostBytes += h.Bytes
	}
	return r
}

// rounding is how much of the model states is allocator rounding.
func (st *stage) rounding() int64 {
	s, sh := st.s, st.sh
	n := st.W
	if s.Offload != OffloadParams {
		n -= st.raw(sh.pb, st.shardP)
	}
	if s.ForwardOnly {
		return n
	}
	if st.G > 0 {
		n += st.G - st.vocabG - st.raw(sh.gb, st.shardG)
	}
	if st.master > 0 {
		n += st.master - st.raw(4, st.shardO)
	}
	if st.gradCopy > 0 {
		n += st.gradCopy - st.raw(4, st.shardO)
	}
	switch {
	case st.optState == 0:
	case s.Optimizer == AdamW || s.Optimizer == Adam || s.Optimizer == AdamWFused:
		n += st.optState - 2*st.raw(sh.stateBytes, st.shardO)
	case s.Optimizer == SGD:
		n += st.optState - st.raw(sh.stateBytes, st.shardO)
	}
	return n
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

func shardNote(n int64, what string) string {
	if n <= 1 {
		return ""
	}
	return fmt.Sprintf(" / %d (%s sharded over dp·cp)", n, what)
}
