package perf

import (
	"math"
	"sort"

	"github.com/ptscope/ptscope/internal/kineto"
)

// windowPlan analyses a trace too large to hold in windows of consecutive steps
// (window.go): it finds the steps' bounds from the whole trace, cuts the
// steps into windows, and says which windows each event goes to; Analyze
// analyses one window's events and a windowMerger merges the windows' results
// into the Rank that Analyze would give for the whole trace. A window's
// memory is that of its events, however large the trace.
//
// AnalyzeStream (streamed.go) uses it in this order:
//  1. newWindowPlan, with the trace's Facts and its ProfilerStep#N markers;
//  2. GPU for every GPU event, Memory for every memory event;
//  3. Cut;
//  4. Context for every GPU event again (and Reach for those owned by
//     the op of their External id);
//  5. each event to its owner (HostOwner, GPUOwner; memory events by
//     HostOwner) and, as context, to the windows Overlaps names (flows
//     there only);
//  6. Analyze each window, and add the results to a windowMerger in window order.
type windowPlan struct {
	f    *Facts
	opt  Options
	pl   *stepPlanner
	wins []planWindow
	// minCtx[w] is the earliest context start of windows w and after
	minCtx []int64
	all    *window // whole-trace figures every window shares
}

type planWindow struct {
	k0, k1           int   // its steps, [k0, k1)
	hostFrom, hostTo int64 // host events it owns start in [hostFrom, hostTo)
	from, to         int64 // the time it answers for; to ends its context
	ctxFrom          int64 // its context starts here (launches of its GPU work)
	next             map[int]NextGPU
}

// newWindowPlan starts a plan from the step markers (in file order). It returns
// nil when there are none: a trace without ProfilerStep#N has no steps to
// cut at.
func newWindowPlan(f *Facts, markers []stepMarker, opt Options) *windowPlan {
	if len(markers) == 0 {
		return nil
	}
	if opt.MemoryPoints == 0 {
		opt.MemoryPoints = 1000
	}
	sortStepMarkers(markers)
	return &windowPlan{f: f, opt: opt, pl: newStepPlanner(markerSteps(markers), StepsProfiler)}
}

// GPU adds a GPU event and its launch (launched: the trace has the
// runtime call of its correlation id, from ls to le) to the steps' bounds.
func (p *windowPlan) GPU(launched bool, ls, le, ts, end int64) { p.pl.gpu(launched, ls, le, ts, end) }

// Memory adds a memory event (in file order) to the steps' start memory.
func (p *windowPlan) Memory(m kineto.MemoryEvent) { p.pl.memory(m) }

// Cut finishes the steps' bounds and groups the steps into windows of at
// most maxWeight (at least one step each); weight(from, to) estimates the
// events a window owning the host time [from, to) holds.
func (p *windowPlan) Cut(maxWeight int64, weight func(from, to int64) int64) {
	steps := p.pl.finish(p.opt.DropLastStep)
	p.pl.steps = steps
	p.all = wholeWindow(steps, p.f)
	// a window may start at step k only if the steps before end before the
	// steps after start (as the device-aware bounds make them, unless
	// markers overlap): the windows' steps then cover disjoint time. The
	// steps' host spans lie within their device-aware ones.
	n := len(steps)
	sufStart := make([]int64, n+1)
	sufStart[n] = math.MaxInt64
	for k := n - 1; k >= 0; k-- {
		sufStart[k] = min(sufStart[k+1], steps[k].start)
	}
	cutOK := make([]bool, n+1)
	prefEnd := int64(math.MinInt64)
	for k := 1; k < n; k++ {
		prefEnd = max(prefEnd, steps[k-1].end, steps[k-1].hostE)
		cutOK[k] = prefEnd <= sufStart[k]
	}
	p.wins = p.wins[:0]
	for k0 := 0; k0 < n; {
		k1 := k0 + 1
		for k1 < n && (!cutOK[k1] || weight(steps[k0].hostS, hostEnd(steps, k1+1)) <= maxWeight) {
			k1++
		}
		p.wins = append(p.wins, planWindow{k0: k0, k1: k1})
		k0 = k1
	}
	for i := range p.wins {
		w := &p.wins[i]
		w.hostFrom, w.from, w.ctxFrom = math.MinInt64, math.MinInt64, math.MinInt64
		if i > 0 {
			w.hostFrom, w.from, w.ctxFrom = steps[w.k0].hostS, sufStart[w.k0], steps[w.k0].hostS
		}
		w.hostTo, w.to = math.MaxInt64, math.MaxInt64
		if w.k1 < n {
			w.hostTo, w.to = steps[w.k1].hostS, sufStart[w.k1]
		}
		w.next = map[int]NextGPU{}
	}
	p.minCtx = make([]int64, len(p.wins))
	p.suffixCtx()
}

// hostEnd is the host start of step k, or the end of time past the last.
func hostEnd(steps []stepSpan, k int) int64 {
	if k < len(steps) {
		return steps[k].hostS
	}
	return math.MaxInt64
}

func (p *windowPlan) suffixCtx() {
	m := int64(math.MaxInt64)
	for w := len(p.wins) - 1; w >= 0; w-- {
		m = min(m, p.wins[w].ctxFrom)
		p.minCtx[w] = m
	}
}

// Steps is the number of steps, Windows the number of windows (after Cut).
func (p *windowPlan) Steps() int { return len(p.pl.steps) }

// Windows is the number of windows (after Cut).
func (p *windowPlan) Windows() int { return len(p.wins) }

// first is the first window whose time ends at or after ts.
func (p *windowPlan) first(ts int64) int {
	return sort.Search(len(p.wins), func(w int) bool { return p.wins[w].to >= ts })
}

// Context adds a GPU event again (after Cut), with its device and index in
// the trace: a window's context reaches back to the launches of the GPU
// work that overlaps its time, and the first GPU event of each device
// after a window ends the window's last idle gap.
func (p *windowPlan) Context(device int32, seq int64, launched bool, ls, ts, end int64) {
	j := p.first(ts)
	if launched {
		for w := j; w < len(p.wins) && p.wins[w].from <= end; w++ {
			p.wins[w].ctxFrom = min(p.wins[w].ctxFrom, ls)
		}
	}
	// ts > to of every window before j
	if j > 0 {
		w := &p.wins[j-1]
		n := NextGPU{TS: ts, Seq: seq, Launched: launched, LaunchTS: ls}
		if x, ok := w.next[int(device)]; !ok || ts < x.TS || ts == x.TS && seq < x.Seq {
			w.next[int(device)] = n
		}
	}
}

// Reach extends the context of the windows whose time holds part of
// [ts, end] back to from: a GPU event without a launch in the trace is
// owned by the op of its External id (link.go), which must be there.
func (p *windowPlan) Reach(ts, end, from int64) {
	for w := p.first(ts); w < len(p.wins) && p.wins[w].from <= end; w++ {
		p.wins[w].ctxFrom = min(p.wins[w].ctxFrom, from)
	}
}

// FinishContext completes what Context gathered; call it before routing.
func (p *windowPlan) FinishContext() {
	for w := len(p.wins) - 2; w >= 0; w-- {
		for d, n := range p.wins[w+1].next {
			if x, ok := p.wins[w].next[d]; !ok || n.TS < x.TS || n.TS == x.TS && n.Seq < x.Seq {
				p.wins[w].next[d] = n
			}
		}
	}
	p.suffixCtx()
}

// HostOwner is the window that owns a host event (or memory event)
// starting at ts.
func (p *windowPlan) HostOwner(ts int64) int {
	return sort.Search(len(p.wins), func(w int) bool { return p.wins[w].hostTo > ts })
}

// GPUOwner is the window that owns a GPU event: its launch's, else (no
// launch in the trace) the window of its own start.
func (p *windowPlan) GPUOwner(launched bool, ls, ts int64) int {
	if launched {
		return p.HostOwner(ls)
	}
	return p.HostOwner(ts)
}

// Overlaps calls fn with every window whose context holds part of
// [ts, end] (a flow: ts == end); the owner is among them for host events.
func (p *windowPlan) Overlaps(ts, end int64, fn func(w int)) {
	for w := p.first(ts); w < len(p.wins) && p.minCtx[w] <= end; w++ {
		if p.wins[w].ctxFrom <= end {
			fn(w)
		}
	}
}

// windowPartial is what one window adds to the rank's result.
type windowPartial struct{ p *partial }

// Analyze analyses window w from its trace: the events it owns (own) and
// those of its context, in file order, with each event's index in the
// whole trace (seq); the trace's Memory holds the memory events it owns.
// It never keeps a reference to t.
func (p *windowPlan) Analyze(w int, t *kineto.Trace, own []bool, seq []int64) *windowPartial {
	links := linkSeq
	if p.f.fwdBwdFlows {
		links = linkFlows
	}
	host := async(func() *hostRoles { return buildHostRoles(t) })
	g := newPartGraph(t, own, seq, links)
	pw := &p.wins[w]
	g.win = &window{steps: p.pl.steps[pw.k0:pw.k1], hostTo: pw.hostTo, from: pw.from, to: pw.to,
		lastSlotEnd: p.all.lastSlotEnd, next: pw.next, timeline: p.all.timeline, devices: p.all.devices,
		kernels: p.all.kernels, hta: p.all.hta}
	return &windowPartial{analyzeWindow(g, g.win, p.opt, host)}
}

// windowMerger merges the windows' results in window order.
type windowMerger struct{ m *merger }

// windowMerger returns an empty merger for the plan's windows.
func (p *windowPlan) Merger() *windowMerger {
	return &windowMerger{newMerger(p.f, p.opt, StepsProfiler, p.pl.steps)}
}

// Add merges the next window's result (windows in order).
func (m *windowMerger) Add(p *windowPartial) { m.m.add(p.p) }

// Rank returns the merged result.
func (m *windowMerger) Rank() *Rank { return m.m.rank() }
