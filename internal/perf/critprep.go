package perf

import (
	"cmp"
	"runtime"
	"slices"

	"github.com/ptscope/ptscope/internal/kineto"
)

// streamKey is a GPU stream of a device.
type streamKey struct{ dev, stream int32 }

// cpLaunchRec is a runtime launch (HTA's runtime launch events) with the
// GPU event it launched.
type cpLaunchRec struct {
	ts       int64
	launch   int32 // the runtime/driver event
	gpu      int32 // its GPU event
	pid, tid int32
	key      streamKey
}

// cpPrep is what every step's graph needs from the whole trace (or
// window): host node candidates and GPU events by start, the launches, the
// queue lengths and the synchronisations.
type cpPrep struct {
	g     *graph
	names cpNames
	// host events that get nodes (cpu_op, runtime and driver calls with a
	// duration), by start
	host []int32
	// host ops and annotations whose names hold "forward" or "autograd",
	// by start (HTA moves the backward thread into the forward one)
	marks []int32
	// GPU events with a launch of nonzero duration, by the launch's start
	gpu []int32
	// queue lengths after each launch's +1 and each GPU event's -1, by GPU
	// event (-1: not counted, the launch is not a launch call)
	qLaunch, qGPU []int32
	// each stream's queue length from each change on (HTA's series)
	series map[streamKey]*queueSeries
	// synchronisations (cuda_sync events with a runtime call)
	syncRT     map[int32]int32 // sync event -> its runtime call
	syncs      []int32         // Event Sync / Context Sync, by start
	streamSync []int32         // Stream Sync, by its runtime call's start
	waitPairs  map[int32]int32 // dest GPU event -> src GPU event (cudaStreamWaitEvent)
	eventSrc   map[int32]int32 // Event Sync -> the GPU event its CUDA event waits for
	hasSync    bool
	free       chan []int32 // scratch for the steps' graphs (event -> node), one per worker
	inDL       []bool       // host events inside a DataLoader annotation (nil: none)
}

// scratch returns an event-indexed table of -1 for one step's graph; the
// step gives it back, reset, on p.free.
func (p *cpPrep) scratch() []int32 {
	select {
	case s := <-p.free:
		return s
	default:
	}
	s := make([]int32, p.g.ev.Len())
	for i := range s {
		s[i] = -1
	}
	return s
}

// newCPPrep indexes g for the critical path.
func newCPPrep(g *graph) *cpPrep {
	n := g.ev.Len()
	p := &cpPrep{g: g, names: cpNames{t: g.t}, qLaunch: make([]int32, n), qGPU: make([]int32, n),
		series: map[streamKey]*queueSeries{}, syncRT: map[int32]int32{}, waitPairs: map[int32]int32{},
		eventSrc: map[int32]int32{}, free: make(chan []int32, runtime.GOMAXPROCS(0)+1)}
	p.names.fill()
	for i := range p.qLaunch {
		p.qLaunch[i], p.qGPU[i] = -1, -1
	}
	syncEv := p.hostEvents()
	p.markDataLoader()
	launches := p.gpuLaunches()
	p.queues(launches)
	if len(syncEv) == 0 {
		return p
	}
	corrRT, records := p.syncCalls(syncEv)
	p.syncLinks(syncEv, corrRT, records, launches)
	return p
}

// hostEvents fills p.host and p.marks, each by start, and p.hasSync, and
// returns the synchronisations with a correlation id.
func (p *cpPrep) hostEvents() (syncEv []int32) {
	ev := p.g.ev
	n := ev.Len()
	var nHost int
	for _, k := range ev.Kind {
		if k == kineto.KindCPUOp || k.IsLaunch() {
			nHost++
		}
	}
	p.host = make([]int32, 0, nHost)
	for i := 0; i < n; i++ {
		k := ev.Kind[i]
		switch {
		case k == kineto.KindCPUOp || k.IsLaunch():
			if ev.Dur[i] > 0 {
				p.host = append(p.host, int32(i))
			}
			if k == kineto.KindCPUOp && ev.Dur[i] > 0 && p.names.of(ev.Name[i])&(cpForward|cpAutograd) != 0 {
				p.marks = append(p.marks, int32(i))
			}
		case k == kineto.KindUserAnnotation:
			if ev.Dur[i] > 0 && p.names.of(ev.Name[i])&(cpForward|cpAutograd) != 0 {
				p.marks = append(p.marks, int32(i))
			}
		case k == kineto.KindSync:
			p.hasSync = true
			if ev.Corr[i] >= 0 {
				syncEv = append(syncEv, int32(i))
			}
		}
	}
	byTS := func(list []int32) {
		sortRuns(list, func(a, b int32) int { return cmp.Compare(ev.TS[a], ev.TS[b]) }, slices.SortStableFunc)
	}
	byTS(p.host)
	byTS(p.marks)
	return syncEv
}

// markDataLoader fills p.inDL: the events inside a DataLoader annotation
// and the launches they make (nil: none).
func (p *cpPrep) markDataLoader() {
	g, ev := p.g, p.g.ev
	for _, o := range g.order { // parents first
		if dl := g.class(o)&ncDataLoader != 0; dl || p.inDL != nil && g.parent[o] >= 0 && p.inDL[g.parent[o]] {
			if p.inDL == nil {
				p.inDL = make([]bool, ev.Len())
			}
			p.inDL[o] = true
		}
	}
	if p.inDL != nil {
		for _, i := range p.host {
			if ev.Kind[i].IsLaunch() && g.parent[i] >= 0 && p.inDL[g.parent[i]] {
				p.inDL[i] = true
			}
		}
	}
}

// gpuLaunches fills p.gpu (GPU events whose launch has a duration, by the
// launch's start) and returns the launches (HTA's runtime launch events
// with a GPU event), by start.
func (p *cpPrep) gpuLaunches() []cpLaunchRec {
	g, ev := p.g, p.g.ev
	launches := make([]cpLaunchRec, 0, len(g.gpu))
	p.gpu = make([]int32, 0, len(g.gpu))
	for _, i := range g.gpu {
		l := g.launch[i]
		if l < 0 {
			continue
		}
		if ev.Dur[l] > 0 {
			p.gpu = append(p.gpu, i)
		}
		if p.names.of(ev.Name[l])&cpLaunch == 0 {
			continue
		}
		info := g.t.GPU[ev.Aux[i]]
		launches = append(launches, cpLaunchRec{ts: ev.TS[l], launch: l, gpu: i, pid: ev.PID[l], tid: ev.TID[l],
			key: streamKey{info.Device, info.Stream}})
	}
	sortRuns(p.gpu, func(a, b int32) int { return cmp.Compare(ev.TS[g.launch[a]], ev.TS[g.launch[b]]) }, slices.SortStableFunc)
	sortRuns(launches, func(a, b cpLaunchRec) int {
		return cmp.Or(cmp.Compare(a.ts, b.ts), cmp.Compare(a.launch, b.launch))
	}, slices.SortStableFunc)
	return launches
}

// syncCalls finds the runtime calls of the synchronisations syncEv
// (corrRT: correlation -> runtime/driver call, -1 when none) and those
// recording the CUDA events they wait on (records, by correlation).
func (p *cpPrep) syncCalls(syncEv []int32) (corrRT, records map[int64]int32) {
	g, ev := p.g, p.g.ev
	corrRT = map[int64]int32{}
	for _, s := range syncEv {
		corrRT[ev.Corr[s]] = -1
	}
	records = map[int64]int32{}
	waitCorr := map[int64]bool{}
	for _, s := range syncEv {
		if w := g.t.GPU[ev.Aux[s]].WaitCorr; w >= 0 {
			waitCorr[w] = true
		}
	}
	for i, n := 0, ev.Len(); i < n; i++ {
		if !ev.Kind[i].IsLaunch() {
			continue
		}
		c := ev.Corr[i]
		if _, ok := corrRT[c]; ok {
			corrRT[c] = int32(i)
		}
		if waitCorr[c] && p.names.of(ev.Name[i])&cpRecord != 0 {
			records[c] = int32(i)
		}
	}
	return corrRT, records
}

// queueSeries is a stream's queue length: q[i] from t[i] on.
type queueSeries struct {
	t []int64
	q []int32
}

// queues computes HTA's queue length per stream (trace_counters.py): +1 at
// each launch call with a GPU event, -1 at that event's start, summed in
// time order (launches in start order, then GPU events: each stream's
// list is two sorted runs).
func (p *cpPrep) queues(launches []cpLaunchRec) {
	ev := p.g.ev
	type qev struct {
		ts    int64
		gpu   int32
		delta int32
	}
	perStream := map[streamKey]int{}
	for _, l := range launches {
		perStream[l.key]++
	}
	by := make(map[streamKey][]qev, len(perStream))
	for k, c := range perStream {
		by[k] = make([]qev, 0, 2*c)
	}
	for _, l := range launches {
		by[l.key] = append(by[l.key], qev{l.ts, l.gpu, 1})
	}
	for _, l := range p.g.gpu { // by start
		if q, ok := by[streamOf(p.g, l)]; ok && p.g.launch[l] >= 0 && p.names.of(ev.Name[p.g.launch[l]])&cpLaunch != 0 {
			by[streamOf(p.g, l)] = append(q, qev{ev.TS[l], l, -1})
		}
	}
	for key, list := range by {
		sortRuns(list, func(a, b qev) int { return cmp.Compare(a.ts, b.ts) }, slices.SortStableFunc)
		s := &queueSeries{t: make([]int64, len(list)), q: make([]int32, len(list))}
		var q int32
		for i, e := range list {
			q += e.delta
			if e.delta > 0 {
				p.qLaunch[e.gpu] = q
			} else {
				p.qGPU[e.gpu] = q
			}
			s.t[i], s.q[i] = e.ts, q
		}
		p.series[key] = s
	}
}

// streamOf is GPU event i's device and stream.
func streamOf(g *graph, i int32) streamKey {
	info := g.t.GPU[g.ev.Aux[i]]
	return streamKey{info.Device, info.Stream}
}

// syncLinks resolves what each synchronisation waits for: an Event Sync
// the GPU event launched last on the recorded stream before its
// cudaEventRecord; a Stream Wait Event makes the next GPU event launched
// from its thread on its stream wait for that GPU event.
func (p *cpPrep) syncLinks(syncEv []int32, corrRT map[int64]int32, records map[int64]int32, launches []cpLaunchRec) {
	g, ev := p.g, p.g.ev
	byStream := map[streamKey][]int{} // launch indices, by start
	type threadStream struct {
		pid, tid int32
		key      streamKey
	}
	byThread := map[threadStream][]int{}
	for k, l := range launches {
		byStream[l.key] = append(byStream[l.key], k)
		ts := threadStream{l.pid, l.tid, l.key}
		byThread[ts] = append(byThread[ts], k)
	}
	// the GPU event of the last launch on key at or before ts
	prev := func(key streamKey, ts int64) int32 {
		list := byStream[key]
		j, _ := slices.BinarySearchFunc(list, ts, func(k int, t int64) int {
			if launches[k].ts <= t {
				return -1
			}
			return 1
		})
		if j == 0 {
			return -1
		}
		return launches[list[j-1]].gpu
	}
	next := func(pid, tid int32, key streamKey, ts int64) int32 {
		list := byThread[threadStream{pid, tid, key}]
		j, _ := slices.BinarySearchFunc(list, ts, func(k int, t int64) int {
			if launches[k].ts < t {
				return -1
			}
			return 1
		})
		if j == len(list) {
			return -1
		}
		return launches[list[j]].gpu
	}
	for _, s := range syncEv {
		rt := corrRT[ev.Corr[s]]
		if rt < 0 {
			continue
		}
		p.syncRT[s] = rt
		info := g.t.GPU[ev.Aux[s]]
		c := p.names.of(ev.Name[s])
		src := int32(-1)
		if info.WaitStream >= 0 && info.WaitCorr >= 0 {
			if rec, ok := records[info.WaitCorr]; ok {
				src = prev(streamKey{info.Device, info.WaitStream}, ev.TS[rec])
			}
		}
		switch {
		case c&cpStreamWait != 0:
			if src >= 0 && info.Stream >= 0 {
				if dst := next(ev.PID[rt], ev.TID[rt], streamKey{info.Device, info.Stream}, ev.TS[rt]); dst >= 0 {
					p.waitPairs[dst] = src
				}
			}
		case c&(cpEventSync|cpContextSync) != 0 && info.Stream < 0:
			p.syncs = append(p.syncs, s)
			if c&cpEventSync != 0 && src >= 0 {
				p.eventSrc[s] = src
			}
		case c&cpStreamSync != 0 && info.Stream >= 0:
			p.streamSync = append(p.streamSync, s)
		}
	}
	slices.SortStableFunc(p.syncs, func(a, b int32) int { return cmp.Compare(ev.TS[a], ev.TS[b]) })
	slices.SortStableFunc(p.streamSync, func(a, b int32) int {
		return cmp.Compare(ev.TS[p.syncRT[a]], ev.TS[p.syncRT[b]])
	})
}

// inRange returns the part of list (sorted by key) with key in [s, e].
func inRange(list []int32, key func(int32) int64, s, e int64) []int32 {
	lo, _ := slices.BinarySearchFunc(list, s, func(i int32, t int64) int { return cmp.Compare(key(i), t) })
	hi, _ := slices.BinarySearchFunc(list, e+1, func(i int32, t int64) int { return cmp.Compare(key(i), t) })
	return list[lo:hi]
}
