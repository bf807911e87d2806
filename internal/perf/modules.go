package perf

import (
	"cmp"
	"slices"
	"strings"

	"github.com/ptscope/ptscope/internal/kineto"
)

// Module is one nn.Module in the module hierarchy of the TensorBoard
// plugin's module view (module_op.py), from the "nn.Module: Name_N"
// python_function events that with_stack=True (or with_modules) traces
// hold: each module call's operators, the runtime calls and the GPU work
// they launched. A module is identified by its path from the outermost
// module; every call at that path is summed.
type Module struct {
	Name  string `json:"name"` // "Linear_0" (the event's name without "nn.Module: ")
	Path  string `json:"path"` // the names from the outermost module, "/"-joined
	Depth int    `json:"depth"`
	Calls int    `json:"calls"`
	// Operators counts the operators called directly (not in a child
	// module or operator).
	Operators int `json:"operators"`
	// HostNS is the calls' duration; HostSelfNS without their direct
	// children (modules, operators, runtime calls); DeviceNS the GPU
	// time of everything they launched; DeviceSelfNS without what child
	// modules launched.
	HostNS       int64 `json:"host_ns"`
	HostSelfNS   int64 `json:"host_self_ns"`
	DeviceNS     int64 `json:"device_ns"`
	DeviceSelfNS int64 `json:"device_self_ns"`
}

const modulePrefix = "nn.Module: "

// moduleTree nests the module events with the host ops of their threads:
// up[e] is the innermost module or op that encloses module or op e (-1:
// none; -2: e's thread has no module events), and a runtime call's is its
// op's (g.parent).
type moduleTree struct {
	mods []int32 // module events
	up   []int32
}

// upOf is the enclosing module or op of an op, module or runtime call.
func (mt *moduleTree) upOf(g *graph, e int32) int32 {
	if u := mt.up[e]; u != -2 {
		return u
	}
	return g.parent[e]
}

// buildModuleTree nests the module events of g's trace (nil without any):
// per thread, the modules (by start, longer first) merged with the ops in
// the graph's order (the same), the innermost open one enclosing each.
func buildModuleTree(g *graph) *moduleTree {
	ev := g.ev
	byThread := map[int64][]int32{}
	modName := map[uint32]bool{}
	var mods []int32
	for i, k := range ev.Kind {
		if k != kineto.KindPythonFunction {
			continue
		}
		id := ev.Name[i]
		is, ok := modName[id]
		if !ok {
			is = strings.HasPrefix(g.t.Strings[id], modulePrefix)
			modName[id] = is
		}
		if is {
			mods = append(mods, int32(i))
			tk := threadKey(ev.PID[i], ev.TID[i])
			byThread[tk] = append(byThread[tk], int32(i))
		}
	}
	if len(mods) == 0 {
		return nil
	}
	mt := &moduleTree{mods: mods, up: make([]int32, ev.Len())}
	for i := range mt.up {
		mt.up[i] = -2
	}
	before := func(a, b int32) int { // by start, longer first
		return cmp.Or(cmp.Compare(ev.TS[a], ev.TS[b]), cmp.Compare(ev.Dur[b], ev.Dur[a]))
	}
	for _, list := range byThread {
		slices.SortStableFunc(list, before)
	}
	var stack []int32
	place := func(e int32) {
		end := ev.End(int(e))
		for len(stack) > 0 && ev.End(int(stack[len(stack)-1])) < end {
			stack = stack[:len(stack)-1]
		}
		mt.up[e] = -1
		if len(stack) > 0 {
			mt.up[e] = stack[len(stack)-1]
		}
		stack = append(stack, e)
	}
	// g.order holds each thread's ops in a run
	for i := 0; i < len(g.order); {
		o := g.order[i]
		tk := threadKey(ev.PID[o], ev.TID[o])
		j := i
		for j < len(g.order) && threadKey(ev.PID[g.order[j]], ev.TID[g.order[j]]) == tk {
			j++
		}
		ms := byThread[tk]
		delete(byThread, tk)
		if len(ms) > 0 {
			stack = stack[:0]
			m := 0
			for _, o := range g.order[i:j] {
				for ; m < len(ms) && before(ms[m], o) <= 0; m++ { // a module first at a tie
					place(ms[m])
				}
				place(o)
			}
			for ; m < len(ms); m++ {
				place(ms[m])
			}
		}
		i = j
	}
	for _, ms := range byThread { // threads with modules and no op
		stack = stack[:0]
		for _, m := range ms {
			place(m)
		}
	}
	return mt
}

// moduleRows computes the module view's rows from the owned module calls
// and the owned launches (the GPU time each launched).
func moduleRows(g *graph, mt *moduleTree) map[string]*Module {
	rows := map[string]*Module{}
	if mt == nil {
		return rows
	}
	ev := g.ev
	isMod := func(i int32) bool { return ev.Kind[i] == kineto.KindPythonFunction }
	path := map[int32]string{} // module event -> its path
	var pathOf func(m int32) string
	pathOf = func(m int32) string {
		if p, ok := path[m]; ok {
			return p
		}
		p := strings.TrimPrefix(g.t.Name(int(m)), modulePrefix)
		for u := mt.upOf(g, m); u >= 0; u = mt.upOf(g, u) {
			if isMod(u) {
				p = pathOf(u) + "/" + p
				break
			}
		}
		path[m] = p
		return p
	}
	rowOf := map[int32]*Module{} // by module event
	row := func(m int32) *Module {
		if r := rowOf[m]; r != nil {
			return r
		}
		p := pathOf(m)
		r := rows[p]
		if r == nil {
			r = &Module{Name: strings.TrimPrefix(g.t.Name(int(m)), modulePrefix), Path: p, Depth: strings.Count(p, "/")}
			rows[p] = r
		}
		rowOf[m] = r
		return r
	}
	for _, m := range mt.mods {
		if g.owned(m) {
			r := row(m)
			r.Calls++
			r.HostNS += ev.Dur[m]
			r.HostSelfNS += ev.Dur[m]
		}
	}
	// direct children: their time is not the module's own
	for e, u := range mt.up {
		if u < 0 || !isMod(u) || !g.owned(int32(e)) {
			continue
		}
		r := row(u)
		r.HostSelfNS -= ev.Dur[e]
		if isOperator(g, int32(e)) {
			r.Operators++
		}
	}
	// the GPU time each launch's work took goes to its modules
	for _, i := range g.gpu {
		l := g.launch[i]
		if l < 0 || !g.owned(i) {
			continue
		}
		d := ev.Dur[i]
		first := true
		for u := mt.upOf(g, l); u >= 0; u = mt.upOf(g, u) {
			if !isMod(u) {
				continue
			}
			r := row(u)
			r.DeviceNS += d
			if first {
				r.DeviceSelfNS += d
				first = false
			}
		}
	}
	return rows
}

// addModuleRows merges a window's rows into dst.
func addModuleRows(dst, src map[string]*Module) {
	for p, r := range src {
		x := dst[p]
		if x == nil {
			dst[p] = r
			continue
		}
		x.Calls += r.Calls
		x.Operators += r.Operators
		x.HostNS += r.HostNS
		x.HostSelfNS += r.HostSelfNS
		x.DeviceNS += r.DeviceNS
		x.DeviceSelfNS += r.DeviceSelfNS
	}
}

// finishModules lists the modules depth first, children by name.
func finishModules(rows map[string]*Module) []Module {
	out := make([]Module, 0, len(rows))
	for _, r := range rows {
		if r.Calls > 0 {
			out = append(out, *r)
		}
	}
	slices.SortFunc(out, func(a, b Module) int {
		return slices.Compare(strings.Split(a.Path, "/"), strings.Split(b.Path, "/"))
	})
	return out
}
