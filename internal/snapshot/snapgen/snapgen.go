// Package snapgen writes realistic synthetic allocator snapshots for
// benchmarks and speed comparisons: the shape of a GPT-2 training run recorded
// with stacks="python" (memoized keys, shared frame dicts, one frames list per
// allocation shared by its two frees, persistent blocks that predate
// recording), at any number of trace entries. The trace is a sequence of
// training steps of 2,435-3,450 entries, as in a real GPT-2 small run
// (memory's TestGeneratedSnapshotShape holds it to that):
// activations allocated in forward from module stacks and freed in reverse
// by backward, gradient temporaries from autograd stacks, and a short AdamW
// burst from optimizer stacks.
package snapgen

import (
	"io"
	"math"
	"math/rand/v2"
)

func mathFloat64bits(f float64) uint64 { return math.Float64bits(f) }

// Options size the snapshot.
type Options struct {
	Entries int // trace entries (about; a multiple of 3)
	Devices int // devices the entries are spread over (default 1)
	// SegmentEvery adds a segment_alloc or segment_free entry (empty frames
	// list, action strings first seen mid-trace) every that many entries.
	SegmentEvery int
	Seed         uint64
	Frames       int // unique frames (default 120)
	Stacks       int // unique stacks (default 60)
	// StrSizeEvery writes the size of every that many entries as a str
	// (a malformed snapshot, for the reader's invalid-entry counts).
	StrSizeEvery int
	// Model is the training the trace records (default: ModelSynthetic).
	Model Model
}

// Model is the shape of the generated training.
type Model int

const (
	// ModelSynthetic is a training step of random sizes: activations of at
	// most 1 MiB and temporaries of at most 512 KiB over 400 persistent blocks
	// that predate the recording.
	ModelSynthetic Model = iota
	// ModelGPT2Small is GPT-2 small (124M parameters, fp32, AdamW) trained
	// at batch 8 x 512 tokens and recorded from before the model is built,
	// op by op as transformers' GPT2LMHeadModel allocates (see gpt2.go).
	ModelGPT2Small
)

type frame struct {
	file, name string
	line       int
}

// Write writes one snapshot pickle to w.
func Write(w io.Writer, o Options) error {
	if o.Model == ModelGPT2Small {
		return writeGPT2(w, o)
	}
	if o.Frames <= 0 {
		o.Frames = 120
	}
	if o.Stacks <= 0 {
		o.Stacks = 60
	}
	rng := rand.New(rand.NewPCG(o.Seed, 7))
	frames, stacks := phaseStacks(rng, o.Frames, o.Stacks)
	g := newGen(w, frames, rng, o.StrSizeEvery)

	// Persistent blocks (parameters, optimizer state) that predate recording.
	const segBase = int64(0x7f0000000000)
	var persistent []segBlock
	addr := segBase
	for i := 0; i < 400; i++ {
		sz := int64(512 * (1 + rng.IntN(1<<13)))
		persistent = append(persistent, segBlock{size: sz, stack: stacks[stForward][rng.IntN(len(stacks[stForward]))]})
		addr += sz
	}
	persistentEnd := addr
	workBase := (persistentEnd/(2<<20) + 1) * (2 << 20)

	g.begin()
	// segments come first in the real writer, but we need the trace first to
	// know the final state; the real file order is kept by writing segments
	// from the persistent set (the trace frees everything it allocates).
	segSize := ((persistentEnd-segBase)/(2<<20) + 1) * (2 << 20)
	g.segment(segBase, segSize, persistent)
	g.segment(workBase, 1<<30, nil)
	g.endSegments()

	type live struct {
		addr, size int64
		frames     int // memo of the frames list
	}
	segment := func() {
		if o.SegmentEvery <= 0 || g.n%o.SegmentEvery != o.SegmentEvery-1 || g.n >= o.Entries {
			return
		}
		act := "segment_alloc"
		if rng.IntN(2) == 0 {
			act = "segment_free"
		}
		g.entry(act, workBase, 2<<20, -2, nil)
	}
	pick := func(k int) []int { return stacks[k][rng.IntN(len(stacks[k]))] }
	// alloc and free write one allocation's entries while entries remain.
	alloc := func(a, sz int64, k int) live {
		if g.n >= o.Entries {
			return live{}
		}
		segment()
		return live{a, sz, g.entry("alloc", a, sz, -1, pick(k))}
	}
	free := func(l live, k int) {
		if g.n >= o.Entries || l.size == 0 {
			return
		}
		m := g.entry("free_requested", l.addr, l.size, -1, pick(k))
		if g.n < o.Entries {
			g.entry("free_completed", l.addr, l.size, m, nil)
		}
	}
	const tempBase = 640 << 20 // temporaries above the activations, in the 1 GiB segment
	writeTrace := func() {
		for g.n < o.Entries {
			// Forward: activations kept for backward, some temporaries.
			var acts []live
			a, tmp := workBase, workBase+tempBase
			for i, k := 0, 500+rng.IntN(200); i < k && g.n < o.Entries; i++ {
				sz := int64(512 * (1 + rng.IntN(1<<11)))
				acts = append(acts, alloc(a, sz, stForward))
				a += (sz + 511) / 512 * 512
				if i%4 == 3 {
					free(alloc(tmp, int64(512*(1+rng.IntN(1<<10))), stForward), stForward)
				}
			}
			// Backward: a gradient temporary per layer, activations freed
			// in reverse.
			for i := len(acts) - 1; i >= 0 && g.n < o.Entries; i-- {
				if i%3 == 0 {
					free(alloc(tmp, int64(512*(1+rng.IntN(1<<10))), stBackward), stBackward)
				}
				free(acts[i], stBackward)
			}
			// Optimizer: AdamW's multi-tensor temporaries.
			var opt []live
			for i, k := 0, 20+rng.IntN(20); i < k && g.n < o.Entries; i++ {
				sz := int64(512 * (1 + rng.IntN(1<<9)))
				opt = append(opt, alloc(tmp, sz, stOptimizer))
				tmp += (sz + 511) / 512 * 512
			}
			for i := len(opt) - 1; i >= 0; i-- {
				free(opt[i], stOptimizer)
			}
		}
	}
	g.beginTraces()
	devices := max(o.Devices, 1)
	total := o.Entries
	for dev := 0; dev < devices; dev++ {
		g.beginDevice()
		o.Entries = total / devices
		if dev < total%devices {
			o.Entries++
		}
		writeTrace()
		g.endDevice()
	}
	return g.finish()
}

// Stack groups.
const (
	stForward = iota
	stBackward
	stOptimizer
)

// phaseStacks makes nFrames frames and nStacks stacks (innermost frame
// first, as PyTorch writes them) in three groups that look like a training
// step's: module forward calls, autograd's backward, and AdamW.
func phaseStacks(rng *rand.Rand, nFrames, nStacks int) ([]frame, [3][][]int) {
	const site = "/opt/venv/lib/python3.12/site-packages/"
	kinds := [...]struct {
		files, names []string
	}{
		stForward: {[]string{"torch/nn/functional.py", "torch/nn/modules/module.py", "transformers/models/gpt2/modeling_gpt2.py", "torch/nn/modules/linear.py"},
			[]string{"linear", "forward", "_call_impl", "_wrapped_call_impl", "gelu", "softmax", "layer_norm", "embedding", "scaled_dot_product_attention", "dropout"}},
		stBackward: {[]string{"torch/_tensor.py", "torch/autograd/__init__.py", "torch/autograd/graph.py"},
			[]string{"backward", "_engine_run_backward"}},
		stOptimizer: {[]string{"torch/optim/adamw.py", "torch/optim/optimizer.py"},
			[]string{"_multi_tensor_adamw", "adamw", "step", "wrapper", "_use_grad"}},
	}
	var frames []frame
	top := []int{0, 1} // train.py main < train_step
	frames = append(frames, frame{"train.py", "main", 120}, frame{"train.py", "train_step", 88})
	var pools [3][]int
	for i := 2; i < max(nFrames, 8); i++ {
		g := stForward
		switch i % 10 {
		case 7, 8:
			g = stBackward
		case 9:
			g = stOptimizer
		}
		if i < 5 {
			g = i - 2 // every group has a frame
		}
		k := kinds[g]
		frames = append(frames, frame{site + k.files[rng.IntN(len(k.files))], k.names[rng.IntN(len(k.names))], 10 + rng.IntN(3000)})
		pools[g] = append(pools[g], len(frames)-1)
	}
	// The groups' own frames must classify as their phase: backward stacks
	// carry _tensor.py backward, optimizer stacks adamw.py.
	frames[pools[stBackward][0]] = frame{site + "torch/_tensor.py", "backward", 626}
	frames[pools[stOptimizer][0]] = frame{site + "torch/optim/adamw.py", "_multi_tensor_adamw", 514}
	var stacks [3][][]int
	for i := 0; i < max(nStacks, 3); i++ {
		g := stForward
		switch {
		case i%20 >= 17:
			g = stOptimizer
		case i%20 >= 12:
			g = stBackward
		}
		if i < 3 {
			g = i
		}
		var depth int
		switch g {
		case stForward:
			depth = 10 + rng.IntN(10)
		case stBackward:
			depth = 2 + rng.IntN(3)
		default:
			depth = 3 + rng.IntN(4)
		}
		var st []int
		for j := 0; j < depth; j++ {
			st = append(st, pools[g][rng.IntN(len(pools[g]))])
		}
		if g != stForward {
			st = append(st, pools[g][0])
		}
		stacks[g] = append(stacks[g], append(st, top...))
	}
	return frames, stacks
}
