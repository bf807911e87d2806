// Package snapgen writes realistic synthetic allocator snapshots for
// benchmarks and speed comparisons: the shape of a GPT-2 training run recorded
// with stacks="python" (memoized keys, shared frame dicts, one frames list per
// allocation shared by its two frees, persistent blocks that predate
// recording), at any number of trace entries.
package snapgen

import (
	"fmt"
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
}

type frame struct {
	file, name string
	line       int
}

// Write writes one snapshot pickle to w.
func Write(w io.Writer, o Options) error {
	if o.Frames <= 0 {
		o.Frames = 120
	}
	if o.Stacks <= 0 {
		o.Stacks = 60
	}
	rng := rand.New(rand.NewPCG(o.Seed, 7))
	files := []string{"torch/nn/functional.py", "torch/nn/modules/module.py", "transformers/models/gpt2/modeling_gpt2.py",
		"torch/nn/modules/linear.py", "torch/optim/adamw.py", "torch/_tensor.py", "train.py", "torch/autograd/__init__.py"}
	names := []string{"linear", "forward", "_call_impl", "_wrapped_call_impl", "gelu", "softmax", "layer_norm", "embedding",
		"_multi_tensor_adamw", "step", "backward", "scaled_dot_product_attention", "main", "train_step"}
	frames := make([]frame, o.Frames)
	for i := range frames {
		frames[i] = frame{"/opt/venv/lib/python3.12/site-packages/" + files[rng.IntN(len(files))], names[rng.IntN(len(names))], 10 + rng.IntN(3000)}
	}
	stacks := make([][]int, o.Stacks)
	for i := range stacks {
		n := 12 + rng.IntN(10)
		for j := 0; j < n; j++ {
			stacks[i] = append(stacks[i], rng.IntN(o.Frames))
		}
	}

	p := newPickler(w)
	key := map[string]int{}
	k := func(s string) {
		if i, ok := key[s]; ok {
			p.get(i)
			return
		}
		key[s] = p.str(s)
	}
	frameMemo := make([]int, o.Frames)
	for i := range frameMemo {
		frameMemo[i] = -1
	}
	writeFrames := func(st []int) int {
		p.emptyList()
		m := p.memoize()
		if len(st) != 1 {
			p.mark() // CPython writes a one-item list as item APPEND
		}
		for _, f := range st {
			if frameMemo[f] >= 0 {
				p.get(frameMemo[f])
				continue
			}
			p.emptyDict()
			frameMemo[f] = p.memoize()
			p.mark()
			k("name")
			p.str(frames[f].name)
			k("filename")
			p.str(frames[f].file)
			k("line")
			p.int(int64(frames[f].line))
			p.setitems()
		}
		if len(st) == 1 {
			p.appendOne()
		} else {
			p.appends()
		}
		return m
	}

	// Persistent blocks (parameters, optimizer state) that predate recording.
	const segBase = int64(0x7f0000000000)
	type blk struct {
		addr, size int64
		stack      int
	}
	var persistent []blk
	addr := segBase
	for i := 0; i < 400; i++ {
		sz := int64(512 * (1 + rng.IntN(1<<13)))
		persistent = append(persistent, blk{addr, sz, rng.IntN(o.Stacks)})
		addr += sz
	}
	persistentEnd := addr
	workBase := (persistentEnd/(2<<20) + 1) * (2 << 20)

	p.emptyDict()
	p.memoize()
	p.mark()
	// segments come first in the real writer, but we need the trace first to
	// know the final state; the real file order is kept by writing segments
	// from the persistent set (the trace frees everything it allocates).
	k("segments")
	p.emptyList()
	p.memoize()
	p.mark()
	segSize := ((persistentEnd-segBase)/(2<<20) + 1) * (2 << 20)
	writeSegment := func(base, total int64, blocks []blk) {
		p.emptyDict()
		p.memoize()
		p.mark()
		var alloc int64
		for _, b := range blocks {
			alloc += b.size
		}
		k("device")
		p.int(0)
		k("address")
		p.int(base)
		k("total_size")
		p.int(total)
		k("allocated_size")
		p.int(alloc)
		k("active_size")
		p.int(alloc)
		k("requested_size")
		p.int(alloc)
		k("stream")
		p.int(0)
		k("segment_type")
		k("large")
		k("segment_pool_id")
		p.int(0)
		p.int(0)
		p.tuple2()
		p.memoize()
		k("is_expandable")
		p.boolean(false)
		k("frames")
		p.emptyList()
		p.memoize()
		k("blocks")
		p.emptyList()
		p.memoize()
		p.mark()
		a := base
		emit := func(size int64, state string, st int) {
			p.emptyDict()
			p.memoize()
			p.mark()
			k("address")
			p.int(a)
			k("size")
			p.int(size)
			k("requested_size")
			p.int(size)
			k("state")
			k(state)
			k("frames")
			if st >= 0 {
				writeFrames(stacks[st])
			} else {
				p.emptyList()
				p.memoize()
			}
			p.setitems()
			a += size
		}
		for _, b := range blocks {
			emit(b.size, "active_allocated", b.stack)
		}
		if rest := base + total - a; rest > 0 {
			emit(rest, "inactive", -1)
		}
		p.appends()
		p.setitems()
	}
	writeSegment(segBase, segSize, persistent)
	writeSegment(workBase, 1<<30, nil)
	p.appends()
	p.boundary()

	k("device_traces")
	p.emptyList()
	p.memoize()
	p.mark()
	t := int64(1795272504665726)
	n := 0
	inBatch := 0
	type live struct {
		addr, size int64
		frames     int // memo of the frames list
	}
	var entry func(action string, a, size int64, framesMemo int, fresh []int) int
	segment := func() {
		if o.SegmentEvery <= 0 || n%o.SegmentEvery != o.SegmentEvery-1 || n >= o.Entries {
			return
		}
		act := "segment_alloc"
		if rng.IntN(2) == 0 {
			act = "segment_free"
		}
		entry(act, workBase, 2<<20, -2, nil)
	}
	entry = func(action string, a, size int64, framesMemo int, fresh []int) int {
		p.emptyDict()
		p.memoize()
		p.mark()
		k("action")
		k(action)
		k("addr")
		p.int(a)
		k("size")
		p.int(size)
		k("stream")
		p.int(0)
		k("time_us")
		p.int(t)
		k("compile_context")
		p.str("N/A")
		k("user_metadata")
		k("")
		k("frames")
		m := framesMemo
		switch {
		case framesMemo >= 0:
			p.get(framesMemo)
		case framesMemo == -2:
			p.emptyList()
			m = p.memoize()
		default:
			m = writeFrames(fresh)
		}
		p.setitems()
		n++
		inBatch++
		if inBatch == 1000 {
			p.appends()
			p.boundary()
			p.mark()
			inBatch = 0
		}
		t += int64(1 + rng.IntN(40))
		return m
	}
	writeTrace := func() {
		for n < o.Entries {
			// One step: allocate activations, free them in reverse (backward).
			var ls []live
			a := workBase
			steps := 30 + rng.IntN(40)
			for i := 0; i < steps && n < o.Entries; i++ {
				sz := int64(512 * (1 + rng.IntN(1<<12)))
				st := rng.IntN(o.Stacks)
				segment()
				m := entry("alloc", a, sz, -1, stacks[st])
				ls = append(ls, live{a, sz, m})
				a += (sz + 511) / 512 * 512
			}
			for i := len(ls) - 1; i >= 0 && n < o.Entries; i-- {
				st := stacks[rng.IntN(o.Stacks)]
				m := entry("free_requested", ls[i].addr, ls[i].size, -1, st)
				if n < o.Entries {
					entry("free_completed", ls[i].addr, ls[i].size, m, nil)
				}
			}
		}
	}
	devices := max(o.Devices, 1)
	total := o.Entries
	for dev := 0; dev < devices; dev++ {
		p.emptyList()
		p.memoize()
		p.mark()
		n, inBatch = 0, 0
		o.Entries = total / devices
		if dev < total%devices {
			o.Entries++
		}
		writeTrace()
		p.appends()
		p.boundary()
	}
	p.appends()
	p.boundary()
	k("allocator_settings")
	p.emptyDict()
	p.memoize()
	p.mark()
	k("PYTORCH_CUDA_ALLOC_CONF")
	k("")
	k("max_split_size")
	p.int(-1)
	k("garbage_collection_threshold")
	p.float(0)
	k("expandable_segments")
	p.boolean(false)
	p.setitems()
	k("external_annotations")
	p.emptyList()
	p.memoize()
	p.setitems()
	if err := p.stop(); err != nil {
		return fmt.Errorf("snapgen: %w", err)
	}
	return nil
}
