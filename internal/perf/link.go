package perf

import (
	"cmp"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/ptscope/ptscope/internal/kineto"
)

// graph links the events of one trace: CPU op -> runtime/driver call (External
// id, else time nesting on the thread), runtime/driver -> GPU event
// (correlation, cuda_runtime and cuda_driver alike), and host events to their
// enclosing op on the same thread.
type graph struct {
	t      *kineto.Trace
	ev     *kineto.Events
	launch []int32         // GPU event -> its runtime/driver launch, -1
	owner  []int32         // GPU or runtime event -> the op that issued it, -1
	parent []int32         // host event -> innermost enclosing op on its thread, -1
	order  []int32         // op events, parents before children
	gpu    []int32         // GPU events (kernel, memcpy, memset) sorted by start
	steps  []int32         // ProfilerStep#N host events, sorted by start
	autogr map[int64]bool  // (pid<<32|tid) of autograd engine threads
	names  []nameClass     // by string id: the classes of ops' and GPU events' names (names.go)
	bwdOp  []bool          // the backward ends of fwdOf's links, by event
	fwdOf  map[int32]int32 // backward op -> forward op (fwdbwd flows, else Sequence number)

	// the part of the trace analysed (window.go)
	own   []bool  // events counted (nil: all)
	seq   []int64 // each event's index in the whole trace (nil: its own)
	links linkMode
	win   *window
}

// linkMode says how backward ops are paired with forward ops.
type linkMode uint8

const (
	linkAuto  linkMode = iota // fwdbwd flows, else (none paired) Sequence numbers
	linkFlows                 // fwdbwd flows only (the whole trace has them)
	linkSeq                   // Sequence numbers only (it has none)
)

// isTC reports whether the kernel named by string id name uses tensor cores.
func (g *graph) isTC(name uint32) bool {
	if c := g.names[name]; c&ncGPU != 0 {
		return c&ncTC != 0
	}
	return IsTensorCoreKernel(g.t.Strings[name])
}

func threadKey(pid, tid int32) int64 { return int64(pid)<<32 | int64(uint32(tid)) }

func isOp(k kineto.Kind) bool { return k == kineto.KindCPUOp || k == kineto.KindUserAnnotation }

func newGraph(t *kineto.Trace) *graph { return newPartGraph(t, nil, nil, linkAuto) }

// newPartGraph links the events of a window's trace (window.go). The GPU
// side (GPU events, their launches) is linked while the host side nests.
func newPartGraph(t *kineto.Trace, own []bool, seq []int64, links linkMode) *graph {
	ev := &t.Events
	n := ev.Len()
	g := &graph{t: t, ev: ev, autogr: map[int64]bool{}, own: own, seq: seq, links: links}
	gpuSide := start(g.linkLaunches)
	extOp, byThread := g.indexHost()
	g.nestThreads(byThread)
	g.linkFwdBwd(byThread)
	g.bwdOp = make([]bool, n)
	for o := range g.fwdOf {
		g.bwdOp[o] = true
	}
	g.ownLaunches(extOp)
	gpuSide.wait()
	g.ownGPU(extOp)
	sort.Slice(g.steps, func(a, b int) bool { return ev.TS[g.steps[a]] < ev.TS[g.steps[b]] })
	return g
}

// indexHost classifies the op names, lists the step annotations, marks
// the autograd threads, and returns the ops by External id and the host
// events (ops and launches) of each thread, in trace order.
func (g *graph) indexHost() (extOp *idIndex, byThread map[int64][]int32) {
	t, ev := g.t, g.ev
	n := ev.Len()
	// sized in advance: growing tables of a million entries costs more
	// than a pass over the kinds
	var nOps int
	var exts idRange
	for i, k := range ev.Kind {
		if isOp(k) {
			nOps++
			if x := ev.Ext[i]; x > 0 {
				exts.add(x)
			}
		}
	}
	g.order = make([]int32, 0, nOps)
	extOp = newIDIndex(exts) // External id -> cpu_op / user_annotation event (the first)
	byThread = map[int64][]int32{}
	lastKey, last := int64(math.MinInt64), []int32(nil) // the thread of the previous host event
	g.names = make([]nameClass, len(t.Strings))
	for i := 0; i < n; i++ {
		k := ev.Kind[i]
		switch {
		case isOp(k):
			if x := ev.Ext[i]; x > 0 {
				extOp.set(x, int32(i), true)
			}
			id := ev.Name[i]
			if g.names[id]&ncOp == 0 {
				g.names[id] |= opClass(t.Strings[id])
			}
			if g.names[id]&ncStep != 0 {
				g.steps = append(g.steps, int32(i))
			}
		case k.IsLaunch():
		default:
			continue
		}
		if tk := threadKey(ev.PID[i], ev.TID[i]); tk != lastKey {
			if last != nil {
				byThread[lastKey] = last
			}
			lastKey, last = tk, byThread[tk]
		}
		last = append(last, int32(i))
	}
	if last != nil {
		byThread[lastKey] = last
	}
	for _, th := range t.Threads {
		if strings.Contains(th.Name, "pt_autograd") {
			g.autogr[threadKey(th.PID, th.TID)] = true
		}
	}
	return extOp, byThread
}

// nestThreads nests each thread's events (g.parent), threads in parallel,
// and puts their ops in g.order thread by thread.
func (g *graph) nestThreads(byThread map[int64][]int32) {
	n := g.ev.Len()
	g.parent = make([]int32, n)
	for i := range g.parent {
		g.parent[i] = -1
	}
	keys := make([]int64, 0, len(byThread))
	for k := range byThread {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	orders := make([][]int32, len(keys))
	parallel(len(keys), func(j int) {
		orders[j] = g.nest(byThread[keys[j]])
	})
	for _, o := range orders {
		g.order = append(g.order, o...)
	}
}

// ownLaunches sets each runtime launch's owner op: the op of its External
// id, else its parent (-1 for other events).
func (g *graph) ownLaunches(extOp *idIndex) {
	ev := g.ev
	n := ev.Len()
	g.owner = make([]int32, n)
	for i := 0; i < n; i++ {
		g.owner[i] = -1
		if ev.Kind[i].IsLaunch() {
			if o, ok := extOp.get(ev.Ext[i]); ok && ev.Ext[i] > 0 {
				g.owner[i] = o
			} else {
				g.owner[i] = g.parent[i]
			}
		}
	}
}

// ownGPU sets each GPU event's owner op and classifies the GPU names.
// The launch decides; a GPU event's own External id is used only without
// one (2022 traces set it to the correlation id, kineto#782).
func (g *graph) ownGPU(extOp *idIndex) {
	t, ev := g.t, g.ev
	for _, i := range g.gpu {
		if l := g.launch[i]; l >= 0 && g.owner[l] >= 0 {
			g.owner[i] = g.owner[l]
		} else if o, ok := extOp.get(ev.Ext[i]); ok && ev.Ext[i] > 0 {
			g.owner[i] = o
		}
		if id := ev.Name[i]; g.names[id]&ncGPU == 0 {
			g.names[id] |= gpuClass(t.Strings[id])
		}
	}
}

// linkLaunches lists the GPU events (g.gpu, sorted by start) and links
// each to its runtime/driver launch by correlation id (g.launch).
func (g *graph) linkLaunches() {
	ev := g.ev
	n := ev.Len()
	var nGPU int
	var corrs idRange
	for i, k := range ev.Kind {
		switch {
		case k.IsLaunch():
			if c := ev.Corr[i]; c >= 0 {
				corrs.add(c)
			}
		case k.IsGPU():
			nGPU++
		}
	}
	launchByCorr := newIDIndex(corrs) // correlation id -> runtime/driver event (the last)
	gpu := make([]int32, 0, nGPU)
	for i, k := range ev.Kind {
		switch {
		case k.IsLaunch():
			if c := ev.Corr[i]; c >= 0 {
				launchByCorr.set(c, int32(i), false)
			}
		case k.IsGPU():
			gpu = append(gpu, int32(i))
		}
	}
	launch := make([]int32, n)
	for i := range launch {
		launch[i] = -1
	}
	for _, i := range gpu {
		if c := ev.Corr[i]; c >= 0 {
			if l, ok := launchByCorr.get(c); ok {
				launch[i] = l
			}
		}
	}
	slices.SortFunc(gpu, func(a, b int32) int {
		if c := cmp.Compare(ev.TS[a], ev.TS[b]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	g.gpu, g.launch = gpu, launch
}

// nest sorts the host events of one thread (list, sorted in place) and sets
// each one's parent, the innermost op that encloses it; it returns the
// thread's ops in that order, parents before children.
func (g *graph) nest(list []int32) (order []int32) {
	ev := g.ev
	sortRuns(list, func(x, y int32) int {
		if c := cmp.Compare(ev.TS[x], ev.TS[y]); c != 0 {
			return c
		}
		if c := cmp.Compare(ev.Dur[y], ev.Dur[x]); c != 0 {
			return c
		}
		// ops enclose runtime calls that start and end with them
		xo, yo := isOp(ev.Kind[x]), isOp(ev.Kind[y])
		switch {
		case xo && !yo:
			return -1
		case yo && !xo:
			return 1
		}
		return cmp.Compare(x, y)
	}, slices.SortFunc)
	var stack []int32
	for _, i := range list {
		end := ev.End(int(i))
		for len(stack) > 0 && ev.End(int(stack[len(stack)-1])) < end {
			stack = stack[:len(stack)-1]
		}
		if len(stack) > 0 {
			g.parent[i] = stack[len(stack)-1]
		}
		if isOp(ev.Kind[i]) {
			stack = append(stack, i)
			order = append(order, i)
		}
	}
	return order
}

// isAutograd reports whether event i runs on an autograd engine thread.
func (g *graph) isAutograd(i int) bool {
	return g.autogr[threadKey(g.ev.PID[i], g.ev.TID[i])]
}

// linkFwdBwd pairs backward ops with their forward ops: a fwdbwd flow starts
// on the forward op and finishes on the backward op (same pid, tid and ts);
// without flows, ops that share a Sequence number are paired.
func (g *graph) linkFwdBwd(byThread map[int64][]int32) {
	ev := g.ev
	g.fwdOf = map[int32]int32{}
	lastKey, list := int64(math.MinInt64), []int32(nil) // cached: consecutive flows are mostly of one thread
	at := func(pid, tid int32, ts int64) int32 {
		if k := threadKey(pid, tid); k != lastKey {
			lastKey, list = k, byThread[k]
		}
		k := sort.Search(len(list), func(i int) bool { return ev.TS[list[i]] >= ts })
		for ; k < len(list) && ev.TS[list[k]] == ts; k++ {
			if isOp(ev.Kind[list[k]]) {
				return list[k]
			}
		}
		return -1
	}
	if g.links == linkSeq {
		g.linkSeq()
		return
	}
	var nStart, nFinish int
	for _, f := range g.t.Flows {
		if f.Kind == kineto.FlowFwdBwd {
			if f.Finish {
				nFinish++
			} else {
				nStart++
			}
		}
	}
	starts := make(map[int64]int32, nStart)
	g.fwdOf = make(map[int32]int32, nFinish)
	for _, f := range g.t.Flows {
		if f.Kind == kineto.FlowFwdBwd && !f.Finish {
			if o := at(f.PID, f.TID, f.TS); o >= 0 {
				starts[f.ID] = o
			}
		}
	}
	for _, f := range g.t.Flows {
		if f.Kind == kineto.FlowFwdBwd && f.Finish {
			if s, ok := starts[f.ID]; ok {
				if o := at(f.PID, f.TID, f.TS); o >= 0 {
					g.fwdOf[o] = s
				}
			}
		}
	}
	if len(g.fwdOf) == 0 && g.links == linkAuto {
		g.linkSeq()
	}
}

// linkSeq pairs ops that share a Sequence number: backward ops (by name or
// thread) with the first forward op.
func (g *graph) linkSeq() {
	ev := g.ev
	fwdSeq := map[int64]int32{}
	var bwd []int32
	for _, i := range g.order {
		a := ev.Aux[i]
		if a < 0 || g.t.Ops[a].Seq < 0 || ev.Kind[i] != kineto.KindCPUOp {
			continue
		}
		if g.class(i)&ncBackward != 0 || g.isAutograd(int(i)) {
			bwd = append(bwd, i)
		} else if _, ok := fwdSeq[g.t.Ops[a].Seq]; !ok {
			fwdSeq[g.t.Ops[a].Seq] = i
		}
	}
	for _, i := range bwd {
		if f, ok := fwdSeq[g.t.Ops[ev.Aux[i]].Seq]; ok {
			g.fwdOf[i] = f
		}
	}
}

func isBackwardName(name string) bool {
	return strings.HasPrefix(name, "autograd::engine::evaluate_function") || strings.HasSuffix(name, "Backward0") ||
		strings.HasSuffix(name, "Backward1") || strings.HasSuffix(name, "Backward")
}
