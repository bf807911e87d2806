package perf

import (
	"cmp"
	"slices"
	"strconv"
	"strings"

	"github.com/ptscope/ptscope/internal/kineto"
)

// KernelSequence is a sequence of GPU work (kernels, copies, memsets, in
// start order) that one operator or module launches, with how often it
// recurs: HTA's frequent CUDA kernel sequences (get_frequent_cuda_kernel_sequences),
// the candidates for fusing into one kernel. By default the launching
// operator of a sequence is the innermost operator or nn.Module call that
// launches at least minSequenceKernels; with Options.SequenceOp, HTA's
// rule: the shallowest events whose names contain it and launch at least
// that many. An operator that spans the start of a step is no launching
// operator (so that a trace analysed in windows of steps gives the same
// sequences).
type KernelSequence struct {
	Operator string   `json:"operator"`
	Kernels  []string `json:"kernels"`
	Count    int      `json:"count"`
	// GPUNS is the sequences' GPU time summed over the occurrences; CPUNS
	// the launching operator's host time.
	GPUNS int64 `json:"gpu_ns"`
	CPUNS int64 `json:"cpu_ns"`
}

// minSequenceKernels is HTA's min_pattern_len.
const minSequenceKernels = 3

// kernelSequences finds the owned sequences of g's trace; mt is the module
// tree (nil without modules), op Options.SequenceOp, starts the host starts
// of the steps (sorted) an owned event may span.
func kernelSequences(g *graph, mt *moduleTree, op string, starts []int64) map[string]*KernelSequence {
	c := seqChain{g, mt}
	count, counted := c.gpuCounts()
	var roots map[int32]bool
	if op == "" {
		roots = c.innermostRoots(count, counted)
	} else {
		roots = c.shallowestRoots(op, count)
	}
	return c.sequences(roots, starts)
}

// seqChain is the launching chain kernel sequences follow: an event's
// enclosing op, or module when there is a module tree (mt).
type seqChain struct {
	g  *graph
	mt *moduleTree
}

// up is e's enclosing op or module, -1 for none.
func (c seqChain) up(e int32) int32 {
	if c.mt != nil {
		return c.mt.upOf(c.g, e)
	}
	return c.g.parent[e]
}

// gpuCounts is the GPU events under each op or module, by event, and the
// events with a count, each once.
func (c seqChain) gpuCounts() (count, counted []int32) {
	g := c.g
	count = make([]int32, g.ev.Len())
	for _, i := range g.gpu {
		for o := g.owner[i]; o >= 0; o = c.up(o) {
			if count[o] == 0 {
				counted = append(counted, o)
			}
			count[o]++
		}
	}
	return count, counted
}

// innermostRoots is the default launching events: operators or Python
// functions launching at least minSequenceKernels with no child in the
// chain launching as many.
func (c seqChain) innermostRoots(count, counted []int32) map[int32]bool {
	g, ev := c.g, c.g.ev
	roots := map[int32]bool{}
	for _, o := range counted {
		if count[o] < minSequenceKernels || !isOperator(g, o) && ev.Kind[o] != kineto.KindPythonFunction {
			continue
		}
		roots[o] = true
	}
	for o := range roots {
		for u := c.up(o); u >= 0; u = c.up(u) {
			delete(roots, u) // an ancestor launches at least as many
		}
	}
	return roots
}

// shallowestRoots is HTA's rule for Options.SequenceOp: the shallowest
// ops or Python functions whose names contain op and launch at least
// minSequenceKernels.
func (c seqChain) shallowestRoots(op string, count []int32) map[int32]bool {
	g, ev := c.g, c.g.ev
	depth := func(e int32) int {
		d := 0
		for u := c.up(e); u >= 0; u = c.up(u) {
			d++
		}
		return d
	}
	best := -1
	matches := map[uint32]bool{}
	var cands []int32
	for i, k := range ev.Kind {
		if !isOp(k) && k != kineto.KindPythonFunction {
			continue
		}
		id := ev.Name[i]
		m, ok := matches[id]
		if !ok {
			m = strings.Contains(g.t.Strings[id], op)
			matches[id] = m
		}
		if m {
			cands = append(cands, int32(i))
			if d := depth(int32(i)); best < 0 || d < best {
				best = d
			}
		}
	}
	roots := map[int32]bool{}
	for _, e := range cands {
		if depth(e) == best && count[e] >= minSequenceKernels {
			roots[e] = true
		}
	}
	return roots
}

// sequences groups the GPU events under each root (its nearest in the
// chain) into sequences by names, leaving out roots the trace does not own,
// that are no op or Python function, or that span a step start (starts,
// sorted).
func (c seqChain) sequences(roots map[int32]bool, starts []int64) map[string]*KernelSequence {
	g, ev := c.g, c.g.ev
	spansStep := func(e int32) bool {
		k, _ := slices.BinarySearch(starts, ev.TS[e]+1)
		return k < len(starts) && starts[k] < ev.End(int(e))
	}
	candidate := func(e int32) bool { return isOp(ev.Kind[e]) || ev.Kind[e] == kineto.KindPythonFunction }
	per := map[int32][]int32{} // root -> its GPU events, by start
	for _, i := range g.gpu {
		for o := g.owner[i]; o >= 0; o = c.up(o) {
			if roots[o] {
				per[o] = append(per[o], i)
				break
			}
		}
	}
	out := map[string]*KernelSequence{}
	var key []byte
	for r, list := range per {
		if !g.owned(r) || !candidate(r) || spansStep(r) {
			continue
		}
		key = strconv.AppendUint(key[:0], uint64(ev.Name[r]), 10)
		var gpu int64
		for _, i := range list {
			key = strconv.AppendUint(append(key, ','), uint64(ev.Name[i]), 10)
			gpu += ev.Dur[i]
		}
		a := out[string(key)]
		if a == nil {
			a = &KernelSequence{Operator: strings.TrimPrefix(g.t.Name(int(r)), modulePrefix), Kernels: make([]string, len(list))}
			for k, i := range list {
				a.Kernels[k] = g.t.Name(int(i))
			}
			out[string(key)] = a
		}
		a.Count++
		a.GPUNS += gpu
		a.CPUNS += ev.Dur[r]
	}
	return out
}

// addSequences merges a window's sequences into dst. Keys are string ids,
// which the windows of a trace share.
func addSequences(dst, src map[string]*KernelSequence) {
	for k, s := range src {
		if x := dst[k]; x != nil {
			x.Count += s.Count
			x.GPUNS += s.GPUNS
			x.CPUNS += s.CPUNS
		} else {
			dst[k] = s
		}
	}
}

// finishSequences lists the sequences by GPU time, then count.
func finishSequences(seqs map[string]*KernelSequence) []KernelSequence {
	out := make([]KernelSequence, 0, len(seqs))
	for _, s := range seqs {
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, b KernelSequence) int {
		return cmp.Or(cmp.Compare(b.GPUNS, a.GPUNS), cmp.Compare(b.Count, a.Count), cmp.Compare(a.Operator, b.Operator),
			slices.Compare(a.Kernels, b.Kernels))
	})
	return out
}
