package perf

import (
	"cmp"
	"math"
	"slices"

	"github.com/ptscope/ptscope/internal/kineto"
)

// A window is the part of a trace one analysis covers: Analyze covers the
// whole trace in one window; the streaming path (AnalyzeWindow) splits a
// trace too large to hold into windows of consecutive steps, analysed one
// at a time and merged (windowMerger). A window's trace holds the events it
// owns and, as context, every event that overlaps its time, so that each
// event's relations (enclosing ops, launches, the work of its steps) are
// whole; only owned events are counted, so that the merge counts each
// event once. What an event adds to an op that other windows add to too
// (the host self time of an op that spans windows) is merged by the op's
// index in the whole trace.
type window struct {
	// steps are the steps the window answers for, bounds final (over the
	// whole trace's GPU work).
	steps []stepSpan
	// hostTo is where the next window's host events start: an owned op
	// that ends at or after it has children there.
	hostTo int64
	// [from, to) is the time the window answers for in sums over time
	// (utilisation timeline, communication overlap); to is also the end of
	// its context: GPU events starting after it may be missing.
	from, to    int64
	lastSlotEnd int64           // the end of the whole trace's last step
	next        map[int]NextGPU // per device, the first GPU event starting after to
	timeline    timelineSpec    // the utilisation timeline's buckets, over all steps
	devices     []int           // the devices of the whole trace's GPU events
	kernels     bool            // the whole trace has kernels
	hta         htaWindow       // HTA's window over the whole trace
}

// NextGPU is the first GPU event of a device that starts after a window's
// context: the event that ends an idle gap at the window's end.
type NextGPU struct {
	TS       int64
	Seq      int64 // its index in the whole trace (ties)
	Launched bool
	LaunchTS int64
}

// timelineSpec is the utilisation timeline's range and bucket.
type timelineSpec struct {
	s, e, bucket int64
}

func newTimelineSpec(steps []stepSpan) timelineSpec {
	if len(steps) == 0 {
		return timelineSpec{}
	}
	s, e := steps[0].start, steps[len(steps)-1].end
	bucket := int64(1000)
	for e > s && (e-s)/bucket > 100 {
		bucket *= 10
	}
	return timelineSpec{s, e, bucket}
}

func wholeWindow(steps []stepSpan, f *Facts) *window {
	w := &window{steps: steps, hostTo: math.MaxInt64, from: math.MinInt64, to: math.MaxInt64,
		lastSlotEnd: math.MaxInt64, timeline: newTimelineSpec(steps), devices: f.deviceList(), kernels: f.kernels,
		hta: f.htaWindow()}
	if sl := stepSlots(steps); len(sl) > 0 {
		w.lastSlotEnd = sl[len(sl)-1].E
	}
	return w
}

// owned reports whether event i is counted in this window.
func (g *graph) owned(i int32) bool { return g.own == nil || g.own[i] }

// seqOf is event i's index in the whole trace.
func (g *graph) seqOf(i int32) int64 {
	if g.seq == nil {
		return int64(i)
	}
	return g.seq[i]
}

// partial is what one window adds to a rank's result (windowMerger sums them).
type partial struct {
	steps      []stepPart
	ops        map[rowKey]*Operator
	shapeOps   map[rowKey]*Operator // by (name, shapes), nil when ops already are
	ranges     map[rowKey]*Operator
	opSpans    map[int64]*spanOp // ops whose host self time other windows add to, by index
	shapeSpans map[int64]*spanOp
	rangeSpans map[int64]*spanOp
	rangeDev   map[string]int64 // device time launched while a user range was open, by name
	kernels    map[string]*kernelAcc
	kernelOps  map[kernelOpKey]*kernelOpAcc
	tcAll      int64 // kernel time with an owning op
	tcYes      int64 // ... of which tensor-core eligible
	launch     launchAcc
	copies     map[string]*Copy
	syncs      map[string]*Sync
	devs       map[int]*devPart
	slotTotal  int64
	util       map[int][]int64 // per device, compute time per timeline bucket
	comm       commPart
	hta        htaPart
	hostTo     int64                // the window's hostTo: later windows' GPU events start after it
	mem        []kineto.MemoryEvent // owned, by time
	links      int
	deep       deepPart // the deeper analyses (deep.go)
}

// stepPart is one step with the per-device compute time its utilisation
// is taken from once the primary device is known.
type stepPart struct {
	Step
	compute map[int]int64
}

type rowKey struct{ name, shape string }

// spanOp is what one window adds to the host self time of an op that
// spans windows: its duration (the window that owns it) minus the
// durations of the children the window owns.
type spanOp struct {
	hostSelf int64
	row      *rowKey // set by the owner
}

// devPart is one device's share of a window.
type devPart struct {
	kernel, tc int64 // compute-kernel time in the steps, and its tensor-core part
	occW       wsum  // occupancy (%) × time
	occDur     int64 // time with an occupancy
	sm         wsum  // ∫ min(blocks per SM, 1) over the steps
	inSlots    int64 // |compute ∩ steps|
	idle       Idle  // gaps other than head and tail classified
	head, tail gapPiece
	streams    map[int32]bool
}

type launchAcc struct {
	kernels, tiny, short int
	delays               []int64
	runtime              int64
}

type commPart struct {
	kernels   int
	kernelNS  int64
	rows      map[string]*Collective
	events    []commEvent
	rpc       int
	overlapNS int64 // |comm kernels ∩ compute| over the window's time
	commNS    int64 // |comm kernels| over the window's time
}

// analyzeWindow analyses the part of g's trace that w covers; host is
// the trace's hostRoles (buildHostRoles). Its parts run as concurrent
// tasks over the read-only graph, each writing its own results, so the
// result does not depend on their timing.
func analyzeWindow(g *graph, w *window, opt Options, host func() *hostRoles) *partial {
	p := &partial{}
	tables := start(func() {
		st := computeOpStats(g)
		p.ops, p.opSpans = operators(g, st, opt.GroupByShape, opt.Annotations)
		if !opt.GroupByShape && g.t.Meta.RecordShapes {
			p.shapeOps, p.shapeSpans = operators(g, st, true, opt.Annotations)
		}
		p.ranges, p.rangeSpans, p.rangeDev = userRanges(g, st)
	})
	gpuTables := start(func() {
		p.kernels = kernels(g)
		p.kernelOps = kernelOps(g)
		p.hta, p.hostTo = htaPartOf(g, w.hta), w.hostTo
		p.tcAll, p.tcYes = tcEligible(g)
		p.launch = launchStats(g)
		p.copies = copies(g)
		p.syncs = syncs(g)
		p.mem = append(p.mem, g.t.Memory...)
		sortRuns(p.mem, func(a, b kineto.MemoryEvent) int { return cmp.Compare(a.TS, b.TS) }, slices.SortStableFunc)
		for o := range g.fwdOf {
			if g.owned(o) {
				p.links++
			}
		}
	})
	phases := async(func() [3]spans {
		opt, bwd, fwd := phaseSpans(g)
		return [3]spans{opt, bwd, fwd}
	})
	steps := w.steps
	slots := stepSlots(steps)
	ro := buildRoles(g, host())
	devs := async(func() map[int]*devWork {
		devs := deviceWork(g, ro, slots)
		p.devs, p.slotTotal = gpuParts(g, devs, slots)
		p.util = utilParts(devs, w)
		return devs
	})
	comm := start(func() { p.comm = commStats(g, ro) })
	deep := start(func() { p.deep = deepAnalyses(g, w, opt) })
	bd, dataloader := attribute(ro, steps)
	ov := commOverlap(ro, steps, w.kernels)
	ph := attributePhases(phases(), steps, dataloader)
	base := g.t.Meta.BaseTimeNS
	p.steps = make([]stepPart, 0, len(steps))
	for i, st := range steps {
		p.steps = append(p.steps, stepPart{Step: Step{Name: st.name, Number: st.num, StartTimeNS: base + st.start, DurationNS: st.end - st.start,
			HostStartTimeNS: base + st.hostS, HostDurationNS: st.hostE - st.hostS, GPUEvents: st.gpuCount, Breakdown: bd[i], Phases: ph[i],
			HostDataLoaderNS: ro.dataloader.overlap(st.hostS, st.hostE), StartAllocatedBytes: st.startAlloc, Overlap: ov[i]},
			compute: map[int]int64{}})
	}
	for d, a := range devs() {
		for i, st := range steps {
			p.steps[i].compute[d] = a.compute.overlap(st.start, st.end)
		}
	}
	comm.wait()
	deep.wait()
	gpuTables.wait()
	tables.wait()
	return p
}

// stepSlots is the union of the steps' spans.
func stepSlots(steps []stepSpan) spans {
	slots := make(spans, 0, len(steps))
	for _, st := range steps {
		slots = append(slots, span{st.start, st.end})
	}
	return union(slots)
}

// utilParts is the compute time of each device in each timeline bucket,
// within the window's time.
func utilParts(devs map[int]*devWork, w *window) map[int][]int64 {
	tl := w.timeline
	out := map[int][]int64{}
	if tl.e <= tl.s {
		return out
	}
	n := int((tl.e - tl.s + tl.bucket - 1) / tl.bucket)
	for d, a := range devs {
		if len(a.compute) == 0 {
			continue
		}
		v := make([]int64, n)
		for b := 0; b < n; b++ {
			t := tl.s + int64(b)*tl.bucket
			te := min(t+tl.bucket, tl.e)
			if s, e := max(t, w.from), min(te, w.to); s < e {
				v[b] = a.compute.overlap(s, e)
			}
		}
		out[d] = v
	}
	return out
}
