package perf

import (
	"cmp"
	"slices"
)

// Edge types of the critical path graph (HTA's CPEdgeType).
const (
	cpeOperator     uint8 = iota // an operator's or kernel's time, or a gap inside an operator
	cpeDependency                // zero weight: consecutive top-level ops, the runtime lock
	cpeLaunch                    // launch start -> kernel start, the stream's queue empty
	cpeKernelKernel              // a kernel's end -> the next kernel's start on its stream
	cpeSync                      // zero weight: GPU -> CPU and GPU -> GPU synchronisation
)

// cpGraph is one step's critical path graph. Node 2k is the start of
// event evs[k], node 2k+1 its end.
type cpGraph struct {
	p     *cpPrep
	evs   []int32
	local []int32 // event -> k, -1 (a worker's scratch, reset after the step)
	ts    []int64 // by node
	// edges
	src, dst []int32
	w        []int64
	typ      []uint8
	attr     []int32 // the event an edge's time is attributed to (-1: none)
	// the host call stacks (threadEdges), by local event
	tree struct{ parent, first, next, last []int32 }
}

func (c *cpGraph) add(e int32) {
	if c.local[e] >= 0 {
		return
	}
	c.local[e] = int32(len(c.evs))
	c.evs = append(c.evs, e)
	ev := c.p.g.ev
	c.ts = append(c.ts, ev.TS[e], ev.End(int(e)))
}

func (c *cpGraph) startOf(e int32) int32 {
	if k := c.local[e]; k >= 0 {
		return 2 * k
	}
	return -1
}

func (c *cpGraph) endOf(e int32) int32 {
	if k := c.local[e]; k >= 0 {
		return 2*k + 1
	}
	return -1
}

func isStart(n int32) bool { return n&1 == 0 }

// edge adds an edge; its weight is the time between its nodes, except for
// dependency and synchronisation edges and zero-weight ones. HTA treats a
// weight of -1 us or less (a child ending after its parent in ns traces)
// as 0.
func (c *cpGraph) edge(s, d int32, typ uint8, zero bool) int {
	var w int64
	if typ != cpeDependency && typ != cpeSync && !zero {
		w = c.ts[d] - c.ts[s]
		if w <= -1000 {
			w = 0
		}
	}
	c.src, c.dst, c.w, c.typ, c.attr = append(c.src, s), append(c.dst, d), append(c.w, w), append(c.typ, typ), append(c.attr, -1)
	return len(c.src) - 1
}

// attribute gives an operator or kernel-kernel edge's time to an event
// (HTA's _attribute_edge): a kernel gap to the kernel before it; an edge
// from a start to its own start's event; an edge into an end to that end's
// event; an edge between siblings (an end to a start) to their parent.
func (c *cpGraph) attribute(e int, parent int32) {
	t := c.typ[e]
	if t != cpeOperator && t != cpeKernelKernel {
		return
	}
	s, d := c.src[e], c.dst[e]
	switch {
	case t == cpeKernelKernel || isStart(s):
		c.attr[e] = c.evs[s/2]
	case !isStart(d):
		c.attr[e] = c.evs[d/2]
	default:
		c.attr[e] = parent
	}
}

// step builds and solves the graph of one step.
func (p *cpPrep) step(st stepSpan) StepCriticalPath {
	g, ev := p.g, p.g.ev
	local := p.scratch()
	c := &cpGraph{p: p, local: local}
	defer func() {
		for _, e := range c.evs {
			local[e] = -1
		}
		p.free <- local
	}()
	S, E := st.hostS, st.hostE
	host := inRange(p.host, func(i int32) int64 { return ev.TS[i] }, S, E)
	for _, e := range host {
		c.add(e)
	}
	gpu := inRange(p.gpu, func(i int32) int64 { return ev.TS[g.launch[i]] }, S, E)
	for _, e := range gpu {
		c.add(e)
	}
	type node struct {
		ts, seq int64
		n       int32
	}
	nodes := make([]node, 2*len(c.evs))
	for i := range nodes {
		nodes[i] = node{c.ts[i], g.seqOf(c.evs[i/2]), int32(i)}
	}
	slices.SortFunc(nodes, func(a, b node) int {
		return cmp.Or(cmp.Compare(a.ts, b.ts), cmp.Compare(a.seq, b.seq), cmp.Compare(a.n, b.n))
	})
	order := make([]int32, len(nodes))
	for i, x := range nodes {
		order[i] = x.n
	}
	c.lockEdges(order)
	c.stackEdges(host, S, E)
	c.kernelEdges(gpu, S, E)
	out := StepCriticalPath{Step: st.name, Nodes: len(order), Edges: len(c.src), Items: []CriticalItem{}, Path: []CriticalSegment{}}
	c.solve(&out)
	return out
}

// lockEdges chains the calls that take the CUDA runtime lock in the order
// they end (HTA's _construct_graph_from_cuda_runtime_events).
func (c *cpGraph) lockEdges(order []int32) {
	g := c.p.g
	var stack []int32
	last := int32(-1)
	for _, n := range order {
		e := c.evs[n/2]
		if !g.ev.Kind[e].IsLaunch() || c.p.names.of(g.ev.Name[e])&cpLock == 0 {
			continue
		}
		if isStart(n) {
			stack = append(stack, n)
		} else {
			for len(stack) > 0 {
				prev := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				if prev/2 == n/2 {
					c.attribute(c.edge(prev, n, cpeOperator, false), e)
				} else {
					c.edge(prev, n, cpeDependency, false)
				}
			}
			if last >= 0 && !isStart(last) {
				c.edge(last, n, cpeDependency, false)
			}
		}
		last = n
	}
}

// locked reports whether node n's event takes the runtime lock.
func (c *cpGraph) locked(n int32) bool {
	e := c.evs[n/2]
	return c.p.g.ev.Kind[e].IsLaunch() && c.p.names.of(c.p.g.ev.Name[e])&cpLock != 0
}

// sharesLock: two consecutive nodes of runtime-lock calls that are not the
// end of one and the start of the next (those edges are the lock path's).
func (c *cpGraph) sharesLock(a, b int32) bool {
	return c.locked(a) && c.locked(b) && (isStart(a) || !isStart(b))
}

// stackEdges links the host calls of each thread as HTA's call stacks do:
// nested calls by the gaps between them, consecutive top-level calls by
// zero-weight edges. A backward thread (the one thread with "autograd"
// ops) joins the forward thread (the one with "forward" ops).
func (c *cpGraph) stackEdges(host []int32, S, E int64) {
	ev := c.p.g.ev
	type thread struct{ pid, tid int32 }
	remapFrom, remapTo := thread{}, thread{}
	remap := false
	{
		var fwd, bwd []thread
		for _, m := range inRange(c.p.marks, func(i int32) int64 { return ev.TS[i] }, S, E) {
			t := thread{ev.PID[m], ev.TID[m]}
			cl := c.p.names.of(ev.Name[m])
			if cl&cpForward != 0 && !slices.Contains(fwd, t) {
				fwd = append(fwd, t)
			}
			if cl&cpAutograd != 0 && !slices.Contains(bwd, t) {
				bwd = append(bwd, t)
			}
		}
		// HTA remaps by tid alone
		if len(fwd) == 1 && len(bwd) == 1 && fwd[0].tid != bwd[0].tid {
			remap, remapFrom, remapTo = true, bwd[0], fwd[0]
		}
	}
	by := map[thread][]int32{}
	var keys []thread
	for _, e := range host {
		t := thread{ev.PID[e], ev.TID[e]}
		if remap && t.tid == remapFrom.tid {
			t.tid = remapTo.tid
		}
		if _, ok := by[t]; !ok {
			keys = append(keys, t)
		}
		by[t] = append(by[t], e)
	}
	n := len(c.evs)
	c.tree.parent, c.tree.first, c.tree.next, c.tree.last = make([]int32, n), make([]int32, n), make([]int32, n), make([]int32, n)
	for _, t := range keys {
		c.threadEdges(by[t])
	}
}

// threadEdges builds one thread's call stack (HTA's CallStackGraph: start
// and end points sorted by compare_events, a start pushed under the top of
// the stack, an end popping the top) and walks it depth first.
func (c *cpGraph) threadEdges(list []int32) {
	c.walkTree(c.buildTree(c.threadPoints(list)))
}

// cpPoint is the start or the end of a host event of one thread.
type cpPoint struct {
	t, dur, seq int64
	k           int32 // local event
	start       bool
}

// threadPoints is the starts and ends of the events in list, ordered as
// HTA's compare_events orders them.
func (c *cpGraph) threadPoints(list []int32) []cpPoint {
	ev := c.p.g.ev
	pts := make([]cpPoint, 0, 2*len(list))
	for _, e := range list {
		k := c.local[e]
		sq := c.p.g.seqOf(e)
		pts = append(pts, cpPoint{ev.TS[e], ev.Dur[e], sq, k, true}, cpPoint{ev.End(int(e)), ev.Dur[e], sq, k, false})
	}
	slices.SortFunc(pts, func(x, y cpPoint) int {
		if x.k == y.k {
			if x.start {
				return -1
			}
			return 1
		}
		if x.t != y.t {
			return cmp.Compare(x.t, y.t)
		}
		if x.start == y.start {
			if x.dur == y.dur {
				if x.start {
					return cmp.Compare(x.seq, y.seq)
				}
				return cmp.Compare(y.seq, x.seq)
			}
			if x.start {
				return cmp.Compare(y.dur, x.dur)
			}
			return cmp.Compare(x.dur, y.dur)
		}
		if x.start { // durations are positive: ends first
			return 1
		}
		return -1
	})
	return pts
}

// buildTree turns the ordered points into the call tree in c.tree (a
// start pushed under the top of the stack, an end popping the top) and
// returns its roots.
func (c *cpGraph) buildTree(pts []cpPoint) []int32 {
	// the tree: children in start order (first child, next sibling)
	parent, first, next, lastChild := c.tree.parent, c.tree.first, c.tree.next, c.tree.last
	var roots []int32
	var stack []int32
	for _, pt := range pts {
		if pt.start {
			k := pt.k
			parent[k], first[k], next[k], lastChild[k] = -1, -1, -1, -1
			if len(stack) > 0 {
				p := stack[len(stack)-1]
				parent[k] = p
				if lastChild[p] < 0 {
					first[p] = k
				} else {
					next[lastChild[p]] = k
				}
				lastChild[p] = k
			} else {
				roots = append(roots, k)
			}
			stack = append(stack, pt.k)
		} else if len(stack) > 0 {
			stack = stack[:len(stack)-1]
		}
	}
	return roots
}

// walkTree walks the call trees from roots depth first, adding an edge
// from each start or end to the next (dependency edges between top-level
// events), except between events that share the runtime lock.
func (c *cpGraph) walkTree(roots []int32) {
	ev := c.p.g.ev
	parent, first, next := c.tree.parent, c.tree.first, c.tree.next
	last := int32(-1)
	lastParent := int32(-1) // an event, -1 for none
	depth := 0
	evOf := func(k int32) int32 {
		if k < 0 {
			return -1
		}
		return c.evs[k]
	}
	enter := func(k int32) {
		s := 2 * k
		if last >= 0 && !c.sharesLock(last, s) {
			t := cpeOperator
			if depth == 0 {
				t = cpeDependency
			}
			c.attribute(c.edge(last, s, t, false), lastParent)
		}
		last, lastParent = s, evOf(parent[k])
		depth++
	}
	exit := func(k int32) {
		e := 2*k + 1
		if last >= 0 && !c.sharesLock(last, e) {
			blocking := c.p.names.of(ev.Name[c.evs[k]])&cpBlocking != 0
			c.attribute(c.edge(last, e, cpeOperator, blocking), lastParent)
		}
		last, lastParent = e, evOf(parent[k])
		depth--
	}
	// iterative depth-first walk: fs holds the path, each frame the next
	// child to enter
	type frame struct{ k, child int32 }
	var fs []frame
	for _, r := range roots {
		enter(r)
		fs = append(fs[:0], frame{r, first[r]})
		for len(fs) > 0 {
			f := &fs[len(fs)-1]
			if k := f.child; k >= 0 {
				f.child = next[k]
				enter(k)
				fs = append(fs, frame{k, first[k]})
				continue
			}
			exit(f.k)
			fs = fs[:len(fs)-1]
		}
	}
}

// kernelEdges adds the GPU side (HTA's _construct_graph_from_kernels): a
// kernel's duration; a launch edge when the stream's queue was empty at
// the launch and at the kernel's start, after the previous kernel ended
// and after what it waits for; else a kernel-kernel edge from the previous
// kernel on the stream when the gap is under 1.5 ms; and the
// synchronisations.
func (c *cpGraph) kernelEdges(gpu []int32, S, E int64) {
	p, g, ev := c.p, c.p.g, c.p.g.ev
	type item struct {
		e    int32
		key  int64
		sync bool
	}
	items := make([]item, 0, len(gpu))
	for _, e := range gpu {
		items = append(items, item{e, ev.TS[e], false})
	}
	for _, s := range inRange(p.streamSync, func(i int32) int64 { return ev.TS[p.syncRT[i]] }, S, E) {
		if ev.Dur[p.syncRT[s]] > 0 {
			items = append(items, item{s, ev.End(int(s)), true})
		}
	}
	for _, s := range inRange(p.syncs, func(i int32) int64 { return ev.TS[i] }, S, E) {
		if ev.Dur[s] > 0 {
			items = append(items, item{s, ev.End(int(s)), true})
		}
	}
	slices.SortStableFunc(items, func(a, b item) int {
		return cmp.Or(cmp.Compare(a.key, b.key), cmp.Compare(g.seqOf(a.e), g.seqOf(b.e)))
	})
	last := map[streamKey]int32{}
	var lastKeys []streamKey // in first-use order, for context syncs
	for _, it := range items {
		e := it.e
		info := g.t.GPU[ev.Aux[e]]
		if it.sync {
			rtEnd := c.endOf(p.syncRT[e])
			if rtEnd < 0 {
				continue
			}
			cl := p.names.of(ev.Name[e])
			switch {
			case cl&cpEventSync != 0:
				if src, ok := p.eventSrc[e]; ok {
					if n := c.endOf(src); n >= 0 {
						c.edge(n, rtEnd, cpeSync, false)
					}
				}
			case cl&cpContextSync != 0:
				for _, k := range lastKeys {
					c.edge(last[k], rtEnd, cpeSync, false)
				}
			default: // stream sync
				if n, ok := last[streamKey{info.Device, info.Stream}]; ok {
					c.edge(n, rtEnd, cpeSync, false)
				}
			}
			continue
		}
		key := streamKey{info.Device, info.Stream}
		s, en := c.startOf(e), c.endOf(e)
		c.attribute(c.edge(s, en, cpeOperator, false), -1)
		ksEnd := int32(-1)
		if src, ok := p.waitPairs[e]; len(p.waitPairs) > 0 && ok {
			if n := c.endOf(src); n >= 0 {
				ksEnd = n
				c.edge(n, s, cpeSync, false)
			}
		}
		l := g.launch[e]
		prev, hasPrev := last[key]
		qr, qk := p.qLaunch[e], p.qGPU[e]
		okr, okk := qr >= 0, qk >= 0
		switch {
		case okr && okk && qr == 1 && qk == 0 && (!hasPrev || c.ts[prev] < ev.TS[l]) && (ksEnd < 0 || c.ts[ksEnd] < ev.TS[l]):
			if rs := c.startOf(l); rs >= 0 {
				c.edge(rs, s, cpeLaunch, false)
			}
		case hasPrev && c.ts[s]-c.ts[prev] < criticalKKMaxGapNS && (ksEnd < 0 || c.ts[ksEnd] < c.ts[prev]):
			c.attribute(c.edge(prev, s, cpeKernelKernel, false), -1)
		}
		if !hasPrev {
			lastKeys = append(lastKeys, key)
		}
		last[key] = en
	}
}
