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
	local map[int32]int32 // event -> k
	ts    []int64         // by node
	// edges
	src, dst []int32
	w        []int64
	typ      []uint8
	attr     []int32 // the event an edge's time is attributed to (-1: none)
}

func (c *cpGraph) add(e int32) {
	if _, ok := c.local[e]; ok {
		return
	}
	c.local[e] = int32(len(c.evs))
	c.evs = append(c.evs, e)
	ev := c.p.g.ev
	c.ts = append(c.ts, ev.TS[e], ev.End(int(e)))
}

func (c *cpGraph) startOf(e int32) int32 {
	if k, ok := c.local[e]; ok {
		return 2 * k
	}
	return -1
}

func (c *cpGraph) endOf(e int32) int32 {
	if k, ok := c.local[e]; ok {
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
	c := &cpGraph{p: p, local: map[int32]int32{}}
	S, E := st.hostS, st.hostE
	host := inRange(p.host, func(i int32) int64 { return ev.TS[i] }, S, E)
	for _, e := range host {
		c.add(e)
	}
	gpu := inRange(p.gpu, func(i int32) int64 { return ev.TS[g.launch[i]] }, S, E)
	for _, e := range gpu {
		c.add(e)
	}
	order := make([]int32, 2*len(c.evs))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int {
		return cmp.Or(cmp.Compare(c.ts[a], c.ts[b]), cmp.Compare(g.seqOf(c.evs[a/2]), g.seqOf(c.evs[b/2])), cmp.Compare(a, b))
	})
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
	for _, t := range keys {
		c.threadEdges(by[t])
	}
}

// threadEdges builds one thread's call stack (HTA's CallStackGraph: start
// and end points sorted by compare_events, a start pushed under the top of
// the stack, an end popping the top) and walks it depth first.
func (c *cpGraph) threadEdges(list []int32) {
	ev := c.p.g.ev
	type point struct {
		t, dur int64
		k      int32 // local event
		start  bool
	}
	pts := make([]point, 0, 2*len(list))
	for _, e := range list {
		k := c.local[e]
		pts = append(pts, point{ev.TS[e], ev.Dur[e], k, true}, point{ev.End(int(e)), ev.Dur[e], k, false})
	}
	seq := func(k int32) int64 { return c.p.g.seqOf(c.evs[k]) }
	slices.SortStableFunc(pts, func(x, y point) int {
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
					return cmp.Compare(seq(x.k), seq(y.k))
				}
				return cmp.Compare(seq(y.k), seq(x.k))
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
	// the tree: children in start order
	parent := map[int32]int32{}
	var roots []int32
	children := map[int32][]int32{}
	var stack []int32
	for _, pt := range pts {
		if pt.start {
			if len(stack) > 0 {
				parent[pt.k] = stack[len(stack)-1]
				children[stack[len(stack)-1]] = append(children[stack[len(stack)-1]], pt.k)
			} else {
				parent[pt.k] = -1
				roots = append(roots, pt.k)
			}
			stack = append(stack, pt.k)
		} else if len(stack) > 0 {
			stack = stack[:len(stack)-1]
		}
	}
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
	// iterative depth-first walk
	type frame struct {
		k    int32
		next int
	}
	for _, r := range roots {
		enter(r)
		fs := []frame{{r, 0}}
		for len(fs) > 0 {
			f := &fs[len(fs)-1]
			if ch := children[f.k]; f.next < len(ch) {
				k := ch[f.next]
				f.next++
				enter(k)
				fs = append(fs, frame{k, 0})
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
		if src, ok := p.waitPairs[e]; ok {
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

// solve finds the longest path (Kahn's order; the first predecessor
// reaching a node's longest distance wins ties), its breakdown, its items
// and what zeroing each of the largest items saves.
func (c *cpGraph) solve(out *StepCriticalPath) {
	nn := len(c.ts)
	if nn == 0 {
		return
	}
	// adjacency in CSR form
	deg := make([]int32, nn+1)
	indeg := make([]int32, nn)
	for k := range c.src {
		deg[c.src[k]+1]++
		indeg[c.dst[k]]++
	}
	for i := 1; i <= nn; i++ {
		deg[i] += deg[i-1]
	}
	adj := make([]int32, len(c.src))
	fill := slices.Clone(deg[:nn])
	for k := range c.src {
		adj[fill[c.src[k]]] = int32(k)
		fill[c.src[k]]++
	}
	topo := make([]int32, 0, nn)
	for i := 0; i < nn; i++ {
		if indeg[i] == 0 {
			topo = append(topo, int32(i))
		}
	}
	for h := 0; h < len(topo); h++ {
		u := topo[h]
		for _, k := range adj[deg[u]:deg[u+1]] {
			v := c.dst[k]
			if indeg[v]--; indeg[v] == 0 {
				topo = append(topo, v)
			}
		}
	}
	if len(topo) < nn {
		out.Failed = "the graph has a cycle"
		return
	}
	longest := func(w []int64, pred []int32) (int64, int32) {
		dist := make([]int64, nn)
		for _, u := range topo {
			for _, k := range adj[deg[u]:deg[u+1]] {
				v := c.dst[k]
				// as networkx: a node takes its best predecessor when that
				// reaches it at 0 or more
				if d := dist[u] + w[k]; d > dist[v] || pred != nil && pred[v] < 0 && d >= dist[v] {
					dist[v] = d
					if pred != nil {
						pred[v] = int32(k)
					}
				}
			}
		}
		best, at := int64(0), int32(-1)
		for _, u := range topo {
			if at < 0 || dist[u] > best {
				best, at = dist[u], u
			}
		}
		return best, at
	}
	pred := make([]int32, nn)
	for i := range pred {
		pred[i] = -1
	}
	length, end := longest(c.w, pred)
	out.LengthNS = length
	var path []int32 // edges, last first
	for n := end; n >= 0 && pred[n] >= 0; n = c.src[pred[n]] {
		path = append(path, pred[n])
	}
	slices.Reverse(path)
	items := map[cpItemKey]*CriticalItem{}
	seen := map[cpItemKey]map[int32]bool{}
	itemOf := make([]cpItemKey, len(c.src)) // by edge, for the savings
	for k := range c.src {
		itemOf[k] = c.itemKey(k)
	}
	for _, k := range path {
		w := c.w[k]
		b := itemOf[k].bound
		c.addBound(&out.BoundBy, b, w)
		out.Path = c.addSegment(out.Path, int(k), b)
		if w <= 0 || b == "" {
			continue
		}
		x := items[itemOf[k]]
		if x == nil {
			x = &CriticalItem{Name: itemOf[k].name, BoundBy: b}
			items[itemOf[k]] = x
			seen[itemOf[k]] = map[int32]bool{}
		}
		x.CriticalNS += w
		if a := c.attr[k]; !seen[itemOf[k]][a] {
			seen[itemOf[k]][a] = true
			x.Events++
		}
	}
	for _, x := range items {
		out.Items = append(out.Items, *x)
	}
	sortItems(out.Items)
	w := make([]int64, len(c.w))
	for i := range out.Items[:min(len(out.Items), criticalStepItems)] {
		it := &out.Items[i]
		k0 := cpItemKey{it.Name, it.BoundBy}
		for k := range w {
			w[k] = c.w[k]
			if itemOf[k] == k0 {
				w[k] = 0
			}
		}
		l, _ := longest(w, nil)
		it.SavingNS = length - l
	}
}

// cpItemKey names the work of an item.
type cpItemKey struct{ name, bound string }

// itemKey names edge k's work for the items: the attributed event's name
// and bound, or the launch delays and kernel gaps.
func (c *cpGraph) itemKey(k int) cpItemKey {
	g := c.p.g
	switch c.typ[k] {
	case cpeLaunch:
		return cpItemKey{itemLaunchDelays, BoundKernelLaunch}
	case cpeKernelKernel:
		return cpItemKey{itemKernelGaps, BoundKernelKernel}
	case cpeOperator:
	default:
		return cpItemKey{}
	}
	a := c.attr[k]
	if a < 0 {
		return cpItemKey{"", BoundCPU}
	}
	name := g.t.Name(int(a))
	if g.ev.Kind[a].IsGPU() {
		if c.p.names.of(g.ev.Name[a])&cpHTAComm != 0 {
			return cpItemKey{name, BoundGPUComm}
		}
		return cpItemKey{name, BoundGPUCompute}
	}
	for o, n := a, 0; o >= 0 && n < 256; o, n = g.parent[o], n+1 {
		if isOp(g.ev.Kind[o]) && g.class(o)&ncDataLoader != 0 {
			return cpItemKey{name, BoundDataLoading}
		}
	}
	return cpItemKey{name, BoundCPU}
}

func (c *cpGraph) addBound(b *CriticalBound, bound string, w int64) {
	switch bound {
	case BoundCPU:
		b.CPUNS += w
	case BoundDataLoading:
		b.DataLoadingNS += w
	case BoundGPUCompute:
		b.GPUComputeNS += w
	case BoundGPUComm:
		b.GPUCommunicationNS += w
	case BoundKernelKernel:
		b.KernelKernelNS += w
	case BoundKernelLaunch:
		b.LaunchNS += w
	}
}

// addSegment appends path edge k to the segments, merged with the last one
// when it is of the same kind and follows it without a gap.
func (c *cpGraph) addSegment(segs []CriticalSegment, k int, bound string) []CriticalSegment {
	g := c.p.g
	base := g.t.Meta.BaseTimeNS
	w := c.w[k]
	seg := CriticalSegment{StartNS: base + c.ts[c.src[k]], DurationNS: w, BoundBy: bound, Event: -1, most: w}
	switch c.typ[k] {
	case cpeSync:
		d := c.evs[c.dst[k]/2]
		seg.Kind, seg.Name, seg.Event, seg.StartNS, seg.Events = "sync", g.t.Name(int(d)), g.seqOf(d), base+c.ts[c.dst[k]], 1
		return append(segs, seg)
	case cpeLaunch:
		seg.Kind, seg.Name = "launch_delay", itemLaunchDelays
	case cpeKernelKernel:
		seg.Kind, seg.Name = "kernel_gap", itemKernelGaps
	case cpeOperator:
		a := c.attr[k]
		seg.Kind = "cpu"
		if a >= 0 {
			seg.Name, seg.Event, seg.Events = g.t.Name(int(a)), g.seqOf(a), 1
			if g.ev.Kind[a].IsGPU() {
				seg.Kind = "kernel"
			}
		}
	default:
		return segs
	}
	if w <= 0 {
		return segs
	}
	if n := len(segs); n > 0 {
		l := &segs[n-1]
		if l.Kind == seg.Kind && l.Kind != "kernel" && l.StartNS+l.DurationNS == seg.StartNS && l.BoundBy == seg.BoundBy {
			l.DurationNS += w
			if seg.Event != l.Event {
				l.Events += seg.Events
			}
			if w > l.most {
				l.Name, l.Event, l.most = seg.Name, seg.Event, w
			}
			return segs
		}
		if l.Kind == "kernel" && seg.Kind == "kernel" && l.Event == seg.Event && l.StartNS+l.DurationNS == seg.StartNS {
			l.DurationNS += w
			return segs
		}
	}
	return append(segs, seg)
}
