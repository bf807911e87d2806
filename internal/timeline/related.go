package timeline

import (
	"sort"
	"sync"

	"github.com/ptscope/ptscope/internal/kineto"
)

// Related are the events the trace timeline's details panel shows beside a
// clicked one.
type Related struct {
	// Stack: the events enclosing it on its thread or stream, outermost
	// first (python_function frames of with_stack traces, the operators
	// and annotations it runs in).
	Stack []int32
	// Linked: for a host event, the GPU work launched inside it (through
	// its runtime calls' correlation ids); for GPU work, the runtime call
	// that launched it and the operator that call ran in. At most
	// MaxLinked, the first by start.
	Linked []int32
	// LinkedTotal is how many linked events there are in all.
	LinkedTotal int
}

// MaxLinked bounds Related.Linked.
const MaxLinked = 100

// corrIndex maps correlation ids to events: GPU work, and the runtime
// calls that launched it. Built on first use.
type corrIndex struct {
	once    sync.Once
	gpu     map[int64][]int32
	runtime map[int64]int32
}

func (tr *Trace) corr() *corrIndex {
	c := &tr.corrs
	c.once.Do(func() {
		ev := &tr.T.Events
		c.gpu, c.runtime = map[int64][]int32{}, map[int64]int32{}
		for i := 0; i < ev.Len(); i++ {
			if ev.Corr[i] == kineto.None {
				continue
			}
			switch k := ev.Kind[i]; {
			case k.IsGPU():
				c.gpu[ev.Corr[i]] = append(c.gpu[ev.Corr[i]], int32(i))
			case k.IsLaunch():
				c.runtime[ev.Corr[i]] = int32(i)
			}
		}
	})
	return c
}

// place finds event i's lane and depth (-1, -1 for an event not on the
// timeline: the trace span).
func (tr *Trace) place(i int) (lane, depth int) {
	ev := &tr.T.Events
	for l := range tr.Lanes {
		ln := &tr.Lanes[l]
		if ln.PID != ev.PID[i] || ln.TID != ev.TID[i] {
			continue
		}
		for d, es := range ln.depths {
			k := sort.Search(len(es), func(k int) bool { return ev.TS[es[k]] >= ev.TS[i] })
			for ; k < len(es) && ev.TS[es[k]] == ev.TS[i]; k++ {
				if int(es[k]) == i {
					return l, d
				}
			}
		}
		return l, -1
	}
	return -1, -1
}

// Related returns the events around event i (an index into the trace's
// events).
func (tr *Trace) Related(i int) (r Related) {
	ev := &tr.T.Events
	l, d := tr.place(i)
	if l < 0 || d < 0 {
		return r
	}
	ln := &tr.Lanes[l]
	// the enclosing event at each shallower depth: the last starting at
	// or before it (events of one depth do not overlap)
	for p := 0; p < d; p++ {
		es := ln.depths[p]
		k := sort.Search(len(es), func(k int) bool { return ev.TS[es[k]] > ev.TS[i] }) - 1
		if k >= 0 && ev.End(int(es[k])) >= ev.End(i) {
			r.Stack = append(r.Stack, es[k])
		}
	}
	c := tr.corr()
	add := func(j int32) { r.Linked = append(r.Linked, j) }
	defer func() { // the first MaxLinked (sorted below)
		r.LinkedTotal = len(r.Linked)
		r.Linked = r.Linked[:min(len(r.Linked), MaxLinked)]
	}()
	if ev.Kind[i].IsGPU() {
		if rt, ok := c.runtime[ev.Corr[i]]; ok && ev.Corr[i] != kineto.None {
			add(rt)
			// the operator the launch ran in: the innermost enclosing cpu_op
			st := tr.Related(int(rt)).Stack
			for k := len(st) - 1; k >= 0; k-- {
				if ev.Kind[st[k]] == kineto.KindCPUOp {
					add(st[k])
					break
				}
			}
		}
		return r
	}
	// host work: the GPU work of the runtime calls at its depth and deeper
	for p := d; p < len(ln.depths); p++ {
		es := ln.depths[p]
		k := sort.Search(len(es), func(k int) bool { return ev.TS[es[k]] >= ev.TS[i] })
		for ; k < len(es) && ev.TS[es[k]] < ev.End(i) || k < len(es) && int(es[k]) == i; k++ {
			j := es[k]
			if ev.End(int(j)) > ev.End(i) || !ev.Kind[j].IsLaunch() || ev.Corr[j] == kineto.None {
				continue
			}
			for _, g := range c.gpu[ev.Corr[j]] {
				add(g)
			}
		}
	}
	sort.Slice(r.Linked, func(a, b int) bool { return ev.TS[r.Linked[a]] < ev.TS[r.Linked[b]] })
	return r
}
