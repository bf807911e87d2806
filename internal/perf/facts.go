package perf

import (
	"math"
	"slices"
	"strings"

	"github.com/ptscope/ptscope/internal/kineto"
)

// Facts are what analysing a part of a trace needs to know about all of
// it, from one scan over its events in file order (factScanner): the whole
// trace at once in Analyze, batch by batch while the streaming path reads
// a trace too large to hold.
type Facts struct {
	meta   kineto.Meta
	path   string
	bytes  int64
	damage kineto.Damage
	rank   int // distributedInfo.rank, -1 if absent

	events          int   // complete events, memory events and flows
	firstTS         int64 // the first complete event's start (file order)
	hasFirst        bool
	spanS, spanE    int64 // the span of ops, launches and GPU events
	pythonFunctions int
	// names the findings look for, and ptscope run's optimizer annotation
	dataParallel, ddp, gloo, ownOpt bool
	fwdBwdFlows                     bool // some fwdbwd flow links two ops (flowLinker)
	markers                         bool // some ProfilerStep#N annotation
	memPoints                       map[memKey]int
	devices                         map[int]bool // of GPU events
	kernels                         bool         // some kernel event
	pid                             int32        // the first op's process (a string pid: none)
	hasPID                          bool
	mtia                            int // MTIA device events (mtia_ccp_events), not analysed
	cpuOps, launches                int // cpu_op events, runtime/driver calls
	htaSteps                        map[string]bool
	htaLastStep                     int64 // HTA's window (hta.go): step names, the last one's start
	minTS                           int64 // the earliest complete or memory event
}

type memKey struct {
	typ int8
	id  int32
}

// name classes, cached per string id
const (
	nameSeen uint8 = 1 << iota
	nameDP
	nameDDP
	nameGloo
	nameOwnOpt
	nameMarker
)

// factScanner collects the Facts of a trace from its events, given in file
// order in one or more batches (kineto.Stream's; string ids must be those
// of one table, as Stream's are).
type factScanner struct {
	f   Facts
	cls []uint8 // per string id
	lk  flowLinker
	// noLinks skips the flow linker: the whole-trace analysis pairs
	// forward and backward ops itself (linkAuto) and never reads
	// Facts.fwdBwdFlows, only the streaming path does.
	noLinks bool
	catMTIA []uint8 // per category string id: 0 unknown, 1 not MTIA, 2 mtia_ccp_events
	lastDev int     // the device of the last GPU event, in devices
	hasDev  bool
}

// flowLinker decides whether the trace's forward and backward ops are
// linked by fwdbwd flows, as the whole-trace analysis does (linkFwdBwd):
// whether a flow id has a start and a finish that each sit at the start of
// an op of their thread. It remembers the ops' starts and the flows until
// the first such pair, which a trace with flows has in its first step.
// Past maxLinkOps ops without one it stops remembering and decides by
// whether a fwdbwd flow finishes: a damaged trace then may link
// differently than in memory, but memory stays bounded.
type flowLinker struct {
	done     bool
	capped   bool // decided by finishing flows alone
	ops      map[opKey]struct{}
	pending  []flowEnd
	starts   map[int64]struct{} // flow ids with a start at an op
	finishes map[int64]struct{} // and with a finish at an op
	finished bool               // some fwdbwd flow finishes
}

const maxLinkOps = 1 << 20

type opKey struct {
	pid, tid int32
	ts       int64
}

type flowEnd struct {
	id     int64
	at     opKey
	finish bool
}

// add scans a batch; ops and flows of later batches may complete it.
func (l *flowLinker) add(b *kineto.Trace) {
	if l.capped {
		for _, f := range b.Flows {
			l.finished = l.finished || f.Kind == kineto.FlowFwdBwd && f.Finish
		}
		return
	}
	if l.done {
		return
	}
	if l.ops == nil {
		l.ops, l.starts, l.finishes = map[opKey]struct{}{}, map[int64]struct{}{}, map[int64]struct{}{}
	}
	ev := &b.Events
	for i := 0; i < ev.Len(); i++ {
		if isOp(ev.Kind[i]) {
			l.ops[opKey{ev.PID[i], ev.TID[i], ev.TS[i]}] = struct{}{}
		}
	}
	n := len(l.pending)
	for _, f := range b.Flows {
		if f.Kind == kineto.FlowFwdBwd {
			l.pending = append(l.pending, flowEnd{f.ID, opKey{f.PID, f.TID, f.TS}, f.Finish})
			l.finished = l.finished || f.Finish
		}
	}
	// the batch's flows now; older ones wait for the end (resolve)
	l.pending = append(l.pending[:n], l.match(l.pending[n:])...)
	if !l.done && len(l.ops) > maxLinkOps {
		l.done, l.capped, l.ops, l.pending, l.starts, l.finishes = true, true, nil, nil, nil, nil
	}
}

// match records the flow ends at an op and returns the others; it
// decides when a flow id has both.
func (l *flowLinker) match(fs []flowEnd) (rest []flowEnd) {
	for _, f := range fs {
		if _, ok := l.ops[f.at]; !ok {
			rest = append(rest, f)
			continue
		}
		mine, other := l.starts, l.finishes
		if f.finish {
			mine, other = other, mine
		}
		mine[f.id] = struct{}{}
		if _, ok := other[f.id]; ok {
			l.done, l.finished = true, true
			l.ops, l.pending, l.starts, l.finishes = nil, nil, nil, nil
			return nil
		}
	}
	return rest
}

// linked resolves the flows still waiting and says whether the flows link.
func (l *flowLinker) linked() bool {
	if !l.done {
		l.match(l.pending)
		if !l.done {
			l.finished = false
		}
		l.done, l.ops, l.pending, l.starts, l.finishes = true, nil, nil, nil, nil
	}
	return l.finished
}

// newFactScanner returns an empty scanner.
func newFactScanner() *factScanner {
	return &factScanner{f: Facts{spanS: math.MaxInt64, spanE: math.MinInt64, memPoints: map[memKey]int{}, devices: map[int]bool{},
		htaLastStep: math.MinInt64, minTS: math.MaxInt64}}
}

func (s *factScanner) class(t *kineto.Trace, id uint32) uint8 {
	if int(id) >= len(s.cls) {
		s.cls = append(s.cls, make([]uint8, len(t.Strings)-len(s.cls))...)
	}
	c := s.cls[id]
	if c == 0 {
		c = nameSeen
		switch n := t.Strings[id]; {
		case n == "DataParallel.forward":
			c |= nameDP
		case n == "DistributedDataParallel.forward":
			c |= nameDDP
		case strings.HasPrefix(n, "gloo:"):
			c |= nameGloo
		case n == "ptscope:optimizer":
			c |= nameOwnOpt
		case strings.HasPrefix(n, "ProfilerStep#"):
			c |= nameMarker
		}
		s.cls[id] = c
	}
	return c
}

// isMTIA reports whether category id cat is MTIA's device events.
func (s *factScanner) isMTIA(t *kineto.Trace, cat uint32) bool {
	if int(cat) >= len(s.catMTIA) {
		s.catMTIA = append(s.catMTIA, make([]uint8, len(t.Strings)-len(s.catMTIA))...)
	}
	if s.catMTIA[cat] == 0 {
		s.catMTIA[cat] = 1
		if t.Strings[cat] == "mtia_ccp_events" {
			s.catMTIA[cat] = 2
		}
	}
	return s.catMTIA[cat] == 2
}

// Add scans the events of b, the next batch of the trace.
func (s *factScanner) Add(b *kineto.Trace) {
	f := &s.f
	ev := &b.Events
	f.events += ev.Len() + len(b.Memory) + len(b.Flows)
	if ev.Len() > 0 && !f.hasFirst {
		f.firstTS, f.hasFirst = ev.TS[0], true
	}
	for _, ts := range ev.TS {
		f.minTS = min(f.minTS, ts)
	}
	for _, m := range b.Memory {
		f.minTS = min(f.minTS, m.TS)
	}
	for i := 0; i < ev.Len(); i++ {
		k := ev.Kind[i]
		switch {
		case k.IsLaunch():
			f.launches++
		case isOp(k):
			if k == kineto.KindCPUOp {
				f.cpuOps++
			}
			if !f.hasPID && ev.PID[i] > kineto.StringPIDBase {
				f.pid, f.hasPID = ev.PID[i], true
			}
			c := s.class(b, ev.Name[i])
			f.dataParallel = f.dataParallel || c&nameDP != 0
			f.ddp = f.ddp || c&nameDDP != 0
			f.gloo = f.gloo || c&nameGloo != 0
			f.ownOpt = f.ownOpt || c&nameOwnOpt != 0
			f.markers = f.markers || c&nameMarker != 0
			s.htaMarks(b, i)
		case k == kineto.KindGPUUserAnnotation:
			s.htaMarks(b, i)
		case k == kineto.KindPythonFunction:
			f.pythonFunctions++
		case k == kineto.KindOther:
			if s.isMTIA(b, ev.Cat[i]) {
				f.mtia++
			}
		}
		if k == kineto.KindKernel {
			f.kernels = true
		}
		if k.IsGPU() && ev.Aux[i] >= 0 {
			// most GPU events run on the device of the one before
			if d := int(b.GPU[ev.Aux[i]].Device); !s.hasDev || d != s.lastDev {
				f.devices[d] = true
				s.lastDev, s.hasDev = d, true
			}
		}
		if isOp(k) || k.IsLaunch() || k.IsGPU() {
			f.spanS = min(f.spanS, ev.TS[i])
			f.spanE = max(f.spanE, ev.End(i))
		}
	}
	// counted per run of events of one device, not hashed per event
	var run memKey
	n := 0
	for _, m := range b.Memory {
		if (m.DeviceType == 0 || m.DeviceType == 1) && m.TotalAllocated >= 0 {
			if k := (memKey{m.DeviceType, m.DeviceID}); k != run || n == 0 {
				if n > 0 {
					f.memPoints[run] += n
				}
				run, n = k, 0
			}
			n++
		}
	}
	if n > 0 {
		f.memPoints[run] += n
	}
	if !s.noLinks {
		s.lk.add(b)
	}
}

// Facts returns the facts, given the trace's header (what kineto.Stream
// returns, or the whole trace): its metadata, path, size and damage.
func (s *factScanner) Facts(header *kineto.Trace) *Facts {
	f := s.f
	if !s.noLinks {
		f.fwdBwdFlows = s.lk.linked()
	}
	f.meta, f.path, f.bytes, f.damage, f.rank = header.Meta, header.Path, header.Bytes, header.Damage, header.Rank()
	return &f
}

// deviceList is the devices of GPU events, in order.
func (f *Facts) deviceList() []int {
	out := make([]int, 0, len(f.devices))
	for d := range f.devices {
		out = append(out, d)
	}
	slices.Sort(out)
	return out
}

// scanFacts scans a whole trace for Analyze (without fwdBwdFlows).
func scanFacts(t *kineto.Trace) *Facts {
	s := newFactScanner()
	s.noLinks = true
	s.Add(t)
	return s.Facts(t)
}
