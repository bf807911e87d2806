package perf

import (
	"math"
	"slices"
	"strings"

	"github.com/ptscope/ptscope/internal/kineto"
)

// Facts are what analysing a part of a trace needs to know about all of
// it, from one scan over its events in file order (FactScanner): the whole
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
	fwdBwdFlows                     bool // some fwdbwd flow finishes
	markers                         bool // some ProfilerStep#N annotation
	memPoints                       map[memKey]int
	devices                         map[int]bool // of GPU events
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

// FactScanner collects the Facts of a trace from its events, given in file
// order in one or more batches (kineto.Stream's; string ids must be those
// of one table, as Stream's are).
type FactScanner struct {
	f   Facts
	cls []uint8 // per string id
}

// NewFactScanner returns an empty scanner.
func NewFactScanner() *FactScanner {
	return &FactScanner{f: Facts{spanS: math.MaxInt64, spanE: math.MinInt64, memPoints: map[memKey]int{}, devices: map[int]bool{}}}
}

func (s *FactScanner) class(t *kineto.Trace, id uint32) uint8 {
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

// Add scans the events of b, the next batch of the trace.
func (s *FactScanner) Add(b *kineto.Trace) {
	f := &s.f
	ev := &b.Events
	f.events += ev.Len() + len(b.Memory) + len(b.Flows)
	if ev.Len() > 0 && !f.hasFirst {
		f.firstTS, f.hasFirst = ev.TS[0], true
	}
	for i := 0; i < ev.Len(); i++ {
		k := ev.Kind[i]
		switch {
		case isOp(k):
			c := s.class(b, ev.Name[i])
			f.dataParallel = f.dataParallel || c&nameDP != 0
			f.ddp = f.ddp || c&nameDDP != 0
			f.gloo = f.gloo || c&nameGloo != 0
			f.ownOpt = f.ownOpt || c&nameOwnOpt != 0
			f.markers = f.markers || c&nameMarker != 0
		case k == kineto.KindPythonFunction:
			f.pythonFunctions++
		}
		if k.IsGPU() && ev.Aux[i] >= 0 {
			f.devices[int(b.GPU[ev.Aux[i]].Device)] = true
		}
		if isOp(k) || k.IsLaunch() || k.IsGPU() {
			f.spanS = min(f.spanS, ev.TS[i])
			f.spanE = max(f.spanE, ev.End(i))
		}
	}
	for _, m := range b.Memory {
		if (m.DeviceType == 0 || m.DeviceType == 1) && m.TotalAllocated >= 0 {
			f.memPoints[memKey{m.DeviceType, m.DeviceID}]++
		}
	}
	for _, fl := range b.Flows {
		if fl.Kind == kineto.FlowFwdBwd && fl.Finish {
			f.fwdBwdFlows = true
		}
	}
}

// Facts returns the facts, given the trace's header (what kineto.Stream
// returns, or the whole trace): its metadata, path, size and damage.
func (s *FactScanner) Facts(header *kineto.Trace) *Facts {
	f := s.f
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

// HasStepMarkers reports whether the trace has ProfilerStep#N annotations,
// which the streaming analysis needs.
func (f *Facts) HasStepMarkers() bool { return f.markers }

func scanFacts(t *kineto.Trace) *Facts {
	s := NewFactScanner()
	s.Add(t)
	return s.Facts(t)
}
