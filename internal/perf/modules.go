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

// moduleTree nests the module events with the host ops and runtime calls
// of their threads: up[e] is the innermost module or op that encloses e
// (-1: none), for the events of threads with module events.
type moduleTree struct {
	mods []int32         // module events
	up   map[int32]int32 // module, op or call -> enclosing module or op
}

// buildModuleTree nests the module events of g's trace (nil without any).
func buildModuleTree(g *graph) *moduleTree {
	ev := g.ev
	mt := &moduleTree{up: map[int32]int32{}}
	threads := map[int64]bool{}
	modName := map[uint32]bool{}
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
			mt.mods = append(mt.mods, int32(i))
			threads[threadKey(ev.PID[i], ev.TID[i])] = true
		}
	}
	if len(mt.mods) == 0 {
		return nil
	}
	var list []int32
	for i, k := range ev.Kind {
		if (isOp(k) || k.IsLaunch() || k == kineto.KindPythonFunction && modName[ev.Name[i]]) && threads[threadKey(ev.PID[i], ev.TID[i])] {
			list = append(list, int32(i))
		}
	}
	// by thread, then as the graph nests: by start, longer first, a module
	// around an op of the same span, ops around calls
	rank := func(i int32) int {
		switch k := ev.Kind[i]; {
		case k == kineto.KindPythonFunction:
			return 0
		case isOp(k):
			return 1
		}
		return 2
	}
	slices.SortFunc(list, func(a, b int32) int {
		return cmp.Or(cmp.Compare(threadKey(ev.PID[a], ev.TID[a]), threadKey(ev.PID[b], ev.TID[b])),
			cmp.Compare(ev.TS[a], ev.TS[b]), cmp.Compare(ev.Dur[b], ev.Dur[a]), cmp.Compare(rank(a), rank(b)), cmp.Compare(a, b))
	})
	var stack []int32
	lastThread := int64(-1)
	for _, i := range list {
		if tk := threadKey(ev.PID[i], ev.TID[i]); tk != lastThread {
			stack, lastThread = stack[:0], tk
		}
		end := ev.End(int(i))
		for len(stack) > 0 && ev.End(int(stack[len(stack)-1])) < end {
			stack = stack[:len(stack)-1]
		}
		up := int32(-1)
		if len(stack) > 0 {
			up = stack[len(stack)-1]
		}
		mt.up[i] = up
		if !ev.Kind[i].IsLaunch() {
			stack = append(stack, i)
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
		for u := mt.up[m]; u >= 0; u = mt.up[u] {
			if isMod(u) {
				p = pathOf(u) + "/" + p
				break
			}
		}
		path[m] = p
		return p
	}
	row := func(m int32) *Module {
		p := pathOf(m)
		r := rows[p]
		if r == nil {
			r = &Module{Name: strings.TrimPrefix(g.t.Name(int(m)), modulePrefix), Path: p, Depth: strings.Count(p, "/")}
			rows[p] = r
		}
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
	dev := map[int32]int64{} // launch -> GPU time
	for _, i := range g.gpu {
		if l := g.launch[i]; l >= 0 && g.owned(i) {
			dev[l] += ev.Dur[i]
		}
	}
	for e, u := range mt.up {
		if u < 0 || !isMod(u) || !g.owned(e) {
			continue
		}
		r := row(u)
		r.HostSelfNS -= ev.Dur[e]
		if isOperator(g, e) {
			r.Operators++
		}
	}
	for l, d := range dev {
		if _, ok := mt.up[l]; !ok {
			continue
		}
		first := true
		for u := mt.up[l]; u >= 0; u = mt.up[u] {
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
