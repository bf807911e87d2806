package perf

import (
	"cmp"
	"math"
	"regexp"
	"slices"

	"github.com/ptscope/ptscope/internal/kineto"
)

// HTA holds the numbers Holistic Trace Analysis defines differently from
// ptscope, computed HTA's way (HTA 0.6, its defaults, with
// HTA_DISABLE_NS_ROUNDING=1), so that a user moving from HTA finds the
// numbers HTA reports (docs/trace.md, "As HTA").
//
// HTA's window: with two or more ProfilerStep#N it drops the last step, and
// every GPU event not launched by a host call that starts before that step
// (the last ProfilerStep#N, host or GPU-side copy); with fewer it keeps
// every event. Its temporal breakdown runs from the first kept GPU event's
// start to the last one's end (kernel time) and splits that into idle (no
// GPU event), compute (kernels HTA names compute) and non-compute (the
// rest: communication, copies, and cuda_sync events, which HTA counts as
// GPU events when the trace has them). Its idle time breakdown takes each stream
// alone: every gap between consecutive kernels, copies or memsets on the
// stream is host wait when the next one's launch started after the gap
// began, else kernel wait when shorter than 30 us, else other. Its overlap
// is |∪ compute ∩ ∪ communication| / |∪ communication|.
type HTA struct {
	LastStepDropped bool    `json:"last_step_dropped"`
	KernelTimeNS    int64   `json:"kernel_time_ns"`
	IdleNS          int64   `json:"idle_ns"`
	ComputeNS       int64   `json:"compute_ns"`
	NonComputeNS    int64   `json:"non_compute_ns"`
	IdleRatio       float64 `json:"idle_ratio"`
	ComputeRatio    float64 `json:"compute_ratio"`
	NonComputeRatio float64 `json:"non_compute_ratio"`
	// the idle time breakdown, summed over the streams
	HostWaitNS   int64       `json:"host_wait_ns"`
	KernelWaitNS int64       `json:"kernel_wait_ns"`
	OtherWaitNS  int64       `json:"other_wait_ns"`
	Streams      []HTAStream `json:"streams"`
	// CommCompOverlapRatio is HTA's comp_comm_overlap_pctg / 100 (0
	// without communication kernels).
	CommCompOverlapRatio float64 `json:"comm_comp_overlap_ratio"`
}

// HTAStream is one stream's idle time breakdown. HTA groups by stream id
// alone, so two devices' streams of one id are one row.
type HTAStream struct {
	Stream       int32 `json:"stream"`
	HostWaitNS   int64 `json:"host_wait_ns"`
	KernelWaitNS int64 `json:"kernel_wait_ns"`
	OtherWaitNS  int64 `json:"other_wait_ns"`
}

// HTA's kernel classes (hta/common/types.py, get_kernel_type)
var (
	htaComm    = regexp.MustCompile(`(^nccl.*)|(^hip)|(^hccl)|(.*ncclKernel.*)`)
	htaMemory  = regexp.MustCompile(`(^(hip)?Memcpy)|(^(hip)?Memset)|(^dma)`)
	htaNotComp = regexp.MustCompile(`(^nccl)|(.*Memcpy)|(.*Memset)|(.*dma)|(^.*Sync)|(^Stream Wait Event)|(cuda.*LaunchKernel)|(^runFunction)|(^hip)|(^job_exe)|(^packet)|(^pe_exe)|(^cpum_exe_subgraph)|(^hccl)|(^collective_subgraph_execution)`)
)

const (
	htaCompute uint8 = iota + 1
	htaCommunication
	htaOther
)

func htaKernelClass(name string) uint8 {
	switch {
	case htaComm.MatchString(name):
		return htaCommunication
	case htaMemory.MatchString(name):
		return htaOther
	case !htaNotComp.MatchString(name):
		return htaCompute
	}
	return htaOther
}

// htaWindow is HTA's window over the whole trace (Facts): whether the last
// step is dropped, and the time before which a GPU event's launch must
// start.
type htaWindow struct {
	drop   bool
	before int64
}

// htaPart is what one window adds to the HTA numbers: the unions of its
// kept GPU events (all, compute, communication) and each stream's kept
// kernels, copies and memsets in start order (the merger classifies the
// gaps: a stream's events of one window may start after the next
// window's first).
type htaPart struct {
	all, comp, comm spans
	streams         map[int32][]htaKernel
}

type htaKernel struct {
	ts, end, launchTS int64
	seq               int64 // the event's index in the whole trace (ties)
	launched          bool
}

// htaPartOf computes a window's part of the HTA numbers from its owned GPU
// events.
func htaPartOf(g *graph, hw htaWindow) htaPart {
	ev := g.ev
	p := htaPart{streams: map[int32][]htaKernel{}}
	class := map[uint32]uint8{}
	for _, i := range g.gpu { // by start, then index
		if !g.owned(i) {
			continue
		}
		l := g.launch[i]
		if hw.drop && (l < 0 || ev.TS[l] >= hw.before) {
			continue
		}
		s := span{ev.TS[i], ev.End(int(i))}
		p.all = append(p.all, s)
		c := class[ev.Name[i]]
		if c == 0 {
			c = htaKernelClass(g.t.Strings[ev.Name[i]])
			class[ev.Name[i]] = c
		}
		switch c {
		case htaCompute:
			p.comp = append(p.comp, s)
		case htaCommunication:
			p.comm = append(p.comm, s)
		}
		k := htaKernel{ts: s.S, end: s.E, seq: g.seqOf(i)}
		if l >= 0 {
			k.launchTS, k.launched = ev.TS[l], true
		}
		stream := int32(-1)
		if a := ev.Aux[i]; a >= 0 {
			stream = g.t.GPU[a].Stream
		}
		p.streams[stream] = append(p.streams[stream], k)
	}
	// cuda_sync events (enable_cuda_sync_events) sit on streams with a
	// correlation: HTA counts them busy, neither compute nor idle
	var syncs []int32
	for i, k := range ev.Kind {
		if k == kineto.KindSync && g.owned(int32(i)) && ev.Corr[i] >= 0 {
			syncs = append(syncs, int32(i))
		}
	}
	if len(syncs) > 0 {
		launched := map[int64]int64{} // correlation -> the earliest launch start
		if hw.drop {
			for _, i := range syncs {
				launched[ev.Corr[i]] = math.MaxInt64
			}
			for i, k := range ev.Kind {
				if c := ev.Corr[i]; k.IsLaunch() && c >= 0 {
					if t, ok := launched[c]; ok && ev.TS[i] < t {
						launched[c] = ev.TS[i]
					}
				}
			}
		}
		for _, i := range syncs {
			if !hw.drop || launched[ev.Corr[i]] < hw.before {
				p.all = append(p.all, span{ev.TS[i], ev.End(int(i))})
			}
		}
	}
	for _, v := range []*spans{&p.all, &p.comp, &p.comm} {
		*v = union(*v)
	}
	return p
}

// htaStream is one stream's idle gaps being summed: the kernels that may
// still have later windows' kernels start before them wait in pending.
type htaStream struct {
	HTAStream
	prevEnd int64 // the end of the last classified kernel
	hasPrev bool
	pending []htaKernel
}

// classify sums the gaps before the pending kernels that start before cut
// (all of them with cut = MaxInt64), in start order (HTA's
// _analyze_idle_time_for_stream: the gap to the previous kernel's end is
// host wait when the kernel's launch started after it, else kernel wait
// under 30 us, else other; a negative gap, kernels overlapping on the
// stream, is summed as HTA sums it).
func (st *htaStream) classify(cut int64) {
	n := 0
	for _, k := range st.pending {
		if k.ts >= cut {
			break
		}
		if st.hasPrev {
			gap := k.ts - st.prevEnd
			switch classifyGap(gap, st.prevEnd, k.launched, k.launchTS) {
			case gapHostWait:
				st.HostWaitNS += gap
			case gapKernelWait:
				st.KernelWaitNS += gap
			default:
				st.OtherWaitNS += gap
			}
		}
		st.prevEnd, st.hasPrev = k.end, true
		n++
	}
	st.pending = st.pending[n:]
}

// htaMerger sums the windows' parts, in window order. Spans and kernels
// of earlier windows that reach past a window's host time (cut) are
// carried to the next, where they may overlap or interleave with its GPU
// events: those start after their launches, which lie in later host time.
type htaMerger struct {
	all, comp, comm    int64 // union lengths
	inter              int64 // |comp ∩ comm|
	cAll, cComp, cComm spans // carried spans
	first, last        int64
	streams            map[int32]*htaStream
}

func newHTAMerger() *htaMerger {
	return &htaMerger{first: math.MaxInt64, last: math.MinInt64, streams: map[int32]*htaStream{}}
}

func (m *htaMerger) add(p htaPart, cut int64) {
	merge := func(total *int64, carry *spans, v spans) spans {
		u := union(append(slices.Clone(*carry), v...))
		*total += u.total() - carry.total()
		return u
	}
	if len(p.all) > 0 {
		m.first = min(m.first, p.all[0].S)
		m.last = max(m.last, p.all[len(p.all)-1].E)
	}
	uAll := merge(&m.all, &m.cAll, p.all)
	uComp := merge(&m.comp, &m.cComp, p.comp)
	uComm := merge(&m.comm, &m.cComm, p.comm)
	m.inter += intersect(uComp, uComm).total() - intersect(m.cComp, m.cComm).total()
	keep := func(u spans) spans {
		var out spans
		for _, s := range u {
			if s.E > cut {
				out = append(out, s)
			}
		}
		return out
	}
	m.cAll, m.cComp, m.cComm = keep(uAll), keep(uComp), keep(uComm)
	for id, ks := range p.streams {
		st := m.streams[id]
		if st == nil {
			st = &htaStream{HTAStream: HTAStream{Stream: id}}
			m.streams[id] = st
		}
		st.pending = append(st.pending, ks...)
		slices.SortStableFunc(st.pending, func(a, b htaKernel) int { return cmp.Or(cmp.Compare(a.ts, b.ts), cmp.Compare(a.seq, b.seq)) })
		st.classify(cut)
	}
}

func (m *htaMerger) result(hw htaWindow) HTA {
	h := HTA{LastStepDropped: hw.drop, Streams: []HTAStream{}}
	if m.last > m.first {
		h.KernelTimeNS = m.last - m.first
		h.IdleNS = h.KernelTimeNS - m.all
		h.ComputeNS = m.comp
		h.NonComputeNS = h.KernelTimeNS - h.ComputeNS - h.IdleNS
		h.IdleRatio = share(h.IdleNS, h.KernelTimeNS)
		h.ComputeRatio = share(h.ComputeNS, h.KernelTimeNS)
		h.NonComputeRatio = share(h.NonComputeNS, h.KernelTimeNS)
	}
	h.CommCompOverlapRatio = share(m.inter, m.comm)
	for _, st := range m.streams {
		st.classify(math.MaxInt64)
		h.Streams = append(h.Streams, st.HTAStream)
		h.HostWaitNS += st.HostWaitNS
		h.KernelWaitNS += st.KernelWaitNS
		h.OtherWaitNS += st.OtherWaitNS
	}
	slices.SortFunc(h.Streams, func(a, b HTAStream) int { return cmp.Compare(a.Stream, b.Stream) })
	return h
}

// htaMarks scans a batch for HTA's window: the ProfilerStep#N names (of
// any event but GPU work) and the latest start of one.
func (s *factScanner) htaMarks(b *kineto.Trace, i int) {
	k := b.Events.Kind[i]
	if k.IsGPU() || k == kineto.KindSync {
		return
	}
	if s.class(b, b.Events.Name[i])&nameMarker == 0 {
		return
	}
	f := &s.f
	if f.htaSteps == nil {
		f.htaSteps = map[string]bool{}
	}
	f.htaSteps[b.Strings[b.Events.Name[i]]] = true
	f.htaLastStep = max(f.htaLastStep, b.Events.TS[i])
}

// htaWindow is HTA's window for the trace.
func (f *Facts) htaWindow() htaWindow {
	return htaWindow{drop: len(f.htaSteps) >= 2, before: f.htaLastStep}
}
