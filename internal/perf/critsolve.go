package perf

import "slices"

// solve finds the longest path (Kahn's order; the first predecessor
// reaching a node's longest distance wins ties), its breakdown, its items
// and what zeroing each of the largest items saves.
func (c *cpGraph) solve(out *StepCriticalPath) {
	nn := len(c.ts)
	if nn == 0 {
		return
	}
	s, ok := c.newSolver()
	if !ok {
		out.Failed = "the graph has a cycle"
		return
	}
	pred := make([]int32, nn)
	for i := range pred {
		pred[i] = -1
	}
	length, end := s.longest(0, pred)
	out.LengthNS = length
	var path []int32 // edges, last first
	for n := end; n >= 0 && pred[n] >= 0; n = c.src[pred[n]] {
		path = append(path, pred[n])
	}
	slices.Reverse(path)
	c.walkPath(out, path, s.code)
	for i := range out.Items[:min(len(out.Items), criticalStepItems)] {
		it := &out.Items[i]
		l, _ := s.longest(it.code, nil)
		it.SavingNS = length - l
	}
}

// cpSolver is a step's graph in CSR form with its nodes in topological
// order and each edge's item, for longest-path queries.
type cpSolver struct {
	c    *cpGraph
	deg  []int32  // node u's out-edges are adj[deg[u]:deg[u+1]]
	adj  []int32  // edges by source node
	topo []int32  // nodes in topological order
	code []uint64 // each edge's item (itemCode; 0: none)
	dist []int64  // longest's scratch, by node
}

// newSolver builds the adjacency in CSR form and orders the nodes
// topologically (Kahn); false when the graph has a cycle.
func (c *cpGraph) newSolver() (cpSolver, bool) {
	nn := len(c.ts)
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
		return cpSolver{}, false
	}
	code := make([]uint64, len(c.src))
	for k := range code {
		code[k] = c.itemCode(k)
	}
	return cpSolver{c: c, deg: deg, adj: adj, topo: topo, code: code, dist: make([]int64, nn)}, true
}

// longest is the longest path's length and end, with the edges of item
// zero (0: none) at zero weight; pred, if given, gets each node's best
// incoming edge.
func (s *cpSolver) longest(zero uint64, pred []int32) (int64, int32) {
	c, dist, adj, deg, code := s.c, s.dist, s.adj, s.deg, s.code
	clear(dist)
	for _, u := range s.topo {
		du := dist[u]
		for _, k := range adj[deg[u]:deg[u+1]] {
			v := c.dst[k]
			w := c.w[k]
			if zero != 0 && code[k] == zero {
				w = 0
			}
			// as networkx: a node takes its best predecessor when that
			// reaches it at 0 or more
			if d := du + w; d > dist[v] || pred != nil && pred[v] < 0 && d >= dist[v] {
				dist[v] = d
				if pred != nil {
					pred[v] = int32(k)
				}
			}
		}
	}
	best, at := int64(0), int32(-1)
	for _, u := range s.topo {
		if at < 0 || dist[u] > best {
			best, at = dist[u], u
		}
	}
	return best, at
}

// walkPath adds the longest path's edges (path, first to last; code, each
// edge's item) to out: its time by bound, its segments, and its items,
// sorted, each with the events it counts.
func (c *cpGraph) walkPath(out *StepCriticalPath, path []int32, code []uint64) {
	items := map[uint64]*CriticalItem{}
	// the items each event was counted for (two at most: a kernel's own
	// time and the gap after it)
	seen := make([][2]uint64, len(c.evs))
	for _, k := range path {
		w := c.w[k]
		id := code[k]
		bound := boundNames[id&0xff]
		c.addBound(&out.BoundBy, bound, w)
		out.Path = c.addSegment(out.Path, int(k), bound)
		if w <= 0 || id == 0 {
			continue
		}
		x := items[id]
		if x == nil {
			key := c.itemKey(id)
			x = &CriticalItem{Name: key.name, BoundBy: key.bound, code: id}
			items[id] = x
		}
		x.CriticalNS += w
		if c.typ[k] == cpeLaunch {
			x.Events++ // each launch edge is its own kernel's
		} else if a := c.attr[k]; a >= 0 {
			if l := c.local[a]; l >= 0 {
				if sl := &seen[l]; sl[0] != id && sl[1] != id {
					sl[1], sl[0] = sl[0], id
					x.Events++
				}
			}
		}
	}
	for _, x := range items {
		out.Items = append(out.Items, *x)
	}
	sortItems(out.Items)
}

// cpItemKey names the work of an item.
type cpItemKey struct{ name, bound string }

// bound codes of itemCode
const (
	cbNone = iota
	cbCPU
	cbDataLoading
	cbCompute
	cbComm
	cbKernelKernel
	cbLaunch
)

var boundNames = [...]string{"", BoundCPU, BoundDataLoading, BoundGPUCompute, BoundGPUComm, BoundKernelKernel, BoundKernelLaunch}

// itemCode identifies edge k's work for the items: the attributed event's
// name id and bound code (name id 0: none; the launch delays and kernel
// gaps are items of their own).
func (c *cpGraph) itemCode(k int) uint64 {
	g := c.p.g
	switch c.typ[k] {
	case cpeLaunch:
		return cbLaunch
	case cpeKernelKernel:
		return cbKernelKernel
	case cpeOperator:
	default:
		return cbNone
	}
	a := c.attr[k]
	if a < 0 {
		return cbCPU
	}
	name := uint64(g.ev.Name[a]) << 8
	if g.ev.Kind[a].IsGPU() {
		if c.p.names.of(g.ev.Name[a])&cpHTAComm != 0 {
			return name | cbComm
		}
		return name | cbCompute
	}
	if c.p.inDL != nil && c.p.inDL[a] {
		return name | cbDataLoading
	}
	return name | cbCPU
}

// itemKey names an item code.
func (c *cpGraph) itemKey(code uint64) cpItemKey {
	b := code & 0xff
	switch b {
	case cbLaunch:
		return cpItemKey{itemLaunchDelays, BoundKernelLaunch}
	case cbKernelKernel:
		return cpItemKey{itemKernelGaps, BoundKernelKernel}
	}
	return cpItemKey{c.p.g.t.Strings[code>>8], boundNames[b]}
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
