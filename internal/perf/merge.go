package perf

import (
	"fmt"
	"math"
	"sort"

	"github.com/ptscope/ptscope/internal/kineto"
)

// merger sums the partial results of a trace's windows, given in window
// (time) order, into one Rank: tables summed row by row, steps
// concatenated, sums over time added, the memory curve decimated as its
// points arrive, and the figures that rest on the whole (ratios, means,
// the primary device, findings) computed once at the end.
type merger struct {
	f     *Facts
	opt   Options
	src   StepSource
	steps []stepSpan // all steps, for the timeline and overhead

	acc  partial
	mem  map[memKey]*memCurve
	oom  int
	nWin int
	// idle per device: the gaps classified, and the one that may continue
	// into the next window
	idle    map[int]Idle
	pending map[int]*gapPiece
	slotEnd int64 // the last step's end (0: not yet known)
	hta     *htaMerger
}

// memCurve is one device's memory curve being built.
type memCurve struct {
	d   MemoryDevice
	dec decimator
}

func newMerger(f *Facts, opt Options, src StepSource, steps []stepSpan) *merger {
	return &merger{f: f, opt: opt, src: src, steps: steps, mem: map[memKey]*memCurve{}, hta: newHTAMerger(),
		idle: map[int]Idle{}, pending: map[int]*gapPiece{},
		acc: partial{ops: map[rowKey]*Operator{}, shapeOps: map[rowKey]*Operator{}, shapeSpans: map[int64]*spanOp{},
			ranges: map[rowKey]*Operator{}, opSpans: map[int64]*spanOp{},
			rangeSpans: map[int64]*spanOp{}, rangeDev: map[string]int64{}, kernels: map[string]*kernelAcc{},
			kernelOps: map[kernelOpKey]*kernelOpAcc{},
			copies:    map[string]*Copy{}, syncs: map[string]*Sync{}, devs: map[int]*devPart{}, util: map[int][]int64{},
			comm: commPart{rows: map[string]*Collective{}}}}
}

// add merges the next window's partial result.
func (m *merger) add(p *partial) {
	a := &m.acc
	m.nWin++
	a.steps = append(a.steps, p.steps...)
	m.addTables(p)
	m.hta.add(p.hta, p.hostTo)
	m.addHostCosts(p)
	m.addDevices(p)
	m.addComm(p)
	m.addMemory(p.mem)
	a.links += p.links
	a.deep.add(&p.deep)
}

// addTables merges p's operator, range and kernel tables.
func (m *merger) addTables(p *partial) {
	a := &m.acc
	addRows(a.ops, p.ops)
	addRows(a.shapeOps, p.shapeOps)
	addSpans(a.shapeSpans, p.shapeSpans)
	addRows(a.ranges, p.ranges)
	addSpans(a.opSpans, p.opSpans)
	addSpans(a.rangeSpans, p.rangeSpans)
	for n, v := range p.rangeDev {
		a.rangeDev[n] += v
	}
	for n, k := range p.kernels {
		x := a.kernels[n]
		if x == nil {
			a.kernels[n] = k
			continue
		}
		x.Calls += k.Calls
		x.TotalNS += k.TotalNS
		x.MinNS = min(x.MinNS, k.MinNS)
		x.MaxNS = max(x.MaxNS, k.MaxNS)
		x.bw.merge(k.bw)
		x.ow.merge(k.ow)
		x.od += k.od
		x.Communication = x.Communication || k.Communication
		for op, t := range k.ops {
			x.ops[op] += t
		}
	}
	addKernelOps(a.kernelOps, p.kernelOps)
}

// addHostCosts merges p's tensor-core eligibility, launch statistics,
// copies and synchronisations.
func (m *merger) addHostCosts(p *partial) {
	a := &m.acc
	a.tcAll += p.tcAll
	a.tcYes += p.tcYes
	l := &a.launch
	l.kernels += p.launch.kernels
	l.tiny += p.launch.tiny
	l.short += p.launch.short
	l.runtime += p.launch.runtime
	l.delays = append(l.delays, p.launch.delays...)
	for n, c := range p.copies {
		if x := a.copies[n]; x != nil {
			x.Calls += c.Calls
			x.Bytes += c.Bytes
			x.TotalNS += c.TotalNS
		} else {
			a.copies[n] = c
		}
	}
	for n, s := range p.syncs {
		if x := a.syncs[n]; x != nil {
			x.Calls += s.Calls
			x.TotalNS += s.TotalNS
		} else {
			a.syncs[n] = s
		}
	}
}

// addDevices merges p's per-device sums (and their idle gaps, addIdle)
// and utilisation timelines.
func (m *merger) addDevices(p *partial) {
	a := &m.acc
	for d, v := range p.devs {
		m.addIdle(d, v)
		x := a.devs[d]
		if x == nil {
			a.devs[d] = v
			continue
		}
		x.kernel += v.kernel
		x.tc += v.tc
		x.occW.merge(v.occW)
		x.occDur += v.occDur
		x.sm.merge(v.sm)
		x.inSlots += v.inSlots
		for s := range v.streams {
			x.streams[s] = true
		}
	}
	a.slotTotal += p.slotTotal
	for d, v := range p.util {
		x := a.util[d]
		if x == nil {
			a.util[d] = v
			continue
		}
		for i := range x {
			x[i] += v[i]
		}
	}
}

// addComm merges p's collectives and communication sums.
func (m *merger) addComm(p *partial) {
	c := &m.acc.comm
	c.kernels += p.comm.kernels
	c.kernelNS += p.comm.kernelNS
	for n, r := range p.comm.rows {
		if x := c.rows[n]; x != nil {
			x.Calls += r.Calls
			x.TotalNS += r.TotalNS
			x.Bytes += r.Bytes
			x.Host = x.Host && r.Host
		} else {
			c.rows[n] = r
		}
	}
	c.events = append(c.events, p.comm.events...)
	c.rpc += p.comm.rpc
	c.overlapNS += p.comm.overlapNS
	c.commNS += p.comm.commNS
}

func addRows(dst, src map[rowKey]*Operator) {
	for k, r := range src {
		x := dst[k]
		if x == nil {
			dst[k] = r
			continue
		}
		x.Calls += r.Calls
		x.HostSelfNS += r.HostSelfNS
		x.HostTotalNS += r.HostTotalNS
		x.DeviceSelfNS += r.DeviceSelfNS
		x.DeviceTotalNS += r.DeviceTotalNS
		x.TensorCoreSelfNS += r.TensorCoreSelfNS
		x.TensorCoreTotalNS += r.TensorCoreTotalNS
	}
}

func addSpans(dst, src map[int64]*spanOp) {
	for k, s := range src {
		x := dst[k]
		if x == nil {
			dst[k] = s
			continue
		}
		x.hostSelf += s.hostSelf
		if s.row != nil {
			x.row = s.row
		}
	}
}

// finishSpans adds the host self time of ops that spanned windows to
// their rows, clamped at 0 as for any op.
func finishSpans(rows map[rowKey]*Operator, sp map[int64]*spanOp) {
	for _, s := range sp {
		if s.row == nil {
			continue // owned by no window: cannot happen in a whole trace
		}
		r := rows[*s.row]
		if r == nil {
			r = &Operator{Name: s.row.name, InputShapes: s.row.shape, TensorCoreEligible: tcEligibleOps[s.row.name]}
			rows[*s.row] = r
		}
		r.HostSelfNS += max(s.hostSelf, 0)
	}
}

func addIdleSums(a, b Idle) Idle {
	a.SpanNS += b.SpanNS
	a.ComputeNS += b.ComputeNS
	a.IdleNS += b.IdleNS
	a.CommunicationNS += b.CommunicationNS
	a.CopyNS += b.CopyNS
	a.HostWaitNS += b.HostWaitNS
	a.KernelWaitNS += b.KernelWaitNS
	a.OtherNS += b.OtherNS
	return a
}

// addIdle adds a window's idle time of device d, joining a gap that ends
// at the window's start with the one that continues it.
func (m *merger) addIdle(d int, v *devPart) {
	last := m.lastSlotEnd()
	idle := addIdleSums(m.idle[d], v.idle)
	pend := m.pending[d]
	h, t := v.head, v.tail
	through := h.ok && t.ok && h.s == t.s
	if h.ok {
		switch {
		case pend != nil && pend.e == h.s && through:
			pend.e, pend.end = h.e, h.end
			m.idle[d] = idle
			return
		case pend != nil && pend.e == h.s:
			addGap(&idle, pend.s, h.e, h.end, last)
		default:
			if pend != nil {
				addGap(&idle, pend.s, pend.e, pend.end, last)
			}
			if through {
				m.pending[d] = &gapPiece{h.s, h.e, h.end, true}
				m.idle[d] = idle
				return
			}
			addGap(&idle, h.s, h.e, h.end, last)
		}
	} else if pend != nil {
		addGap(&idle, pend.s, pend.e, pend.end, last)
	}
	delete(m.pending, d)
	if t.ok {
		m.pending[d] = &gapPiece{t.s, t.e, t.end, true}
	}
	m.idle[d] = idle
}

// finishIdle classifies the gaps still open at the end.
func (m *merger) finishIdle() {
	for d, p := range m.pending {
		idle := m.idle[d]
		addGap(&idle, p.s, p.e, p.end, m.lastSlotEnd())
		m.idle[d] = idle
	}
	clear(m.pending)
}

func (m *merger) lastSlotEnd() int64 {
	if m.slotEnd == 0 {
		m.slotEnd = math.MaxInt64
		if sl := stepSlots(m.steps); len(sl) > 0 {
			m.slotEnd = sl[len(sl)-1].E
		}
	}
	return m.slotEnd
}

// addMemory adds a window's memory events (its own, by time) to the
// curves; windows come in time order, so the curves grow in time order.
func (m *merger) addMemory(mem []kineto.MemoryEvent) {
	meta := m.f.meta
	base := meta.BaseTimeNS
	var last *memCurve // most events are of the device of the one before
	var lastKey memKey
	for _, e := range mem {
		if e.OOM {
			m.oom++
		}
		if e.DeviceType != 0 && e.DeviceType != 1 {
			continue
		}
		k := memKey{e.DeviceType, e.DeviceID}
		c := last
		if c == nil || k != lastKey {
			c = m.mem[k]
		}
		if c == nil {
			c = &memCurve{d: MemoryDevice{DeviceID: int(e.DeviceID), IsGPU: e.DeviceType == 1}}
			if c.d.IsGPU {
				c.d.Device = fmt.Sprintf("GPU%d", e.DeviceID)
				if int(e.DeviceID) < len(meta.Devices) && e.DeviceID >= 0 {
					c.d.CapacityBytes = meta.Devices[e.DeviceID].TotalGlobalMem
				}
			} else {
				c.d.Device = "CPU"
			}
			c.dec = newDecimator(m.f.memPoints[k], m.opt.MemoryPoints)
			m.mem[k] = c
		}
		last, lastKey = c, k
		d := &c.d
		d.Events++
		t := base + e.TS
		if e.TotalAllocated > d.PeakAllocatedBytes {
			d.PeakAllocatedBytes, d.PeakAllocatedTimeNS = e.TotalAllocated, t
		}
		if e.TotalReserved > d.PeakReservedBytes {
			d.PeakReservedBytes, d.PeakReservedTimeNS = e.TotalReserved, t
		}
		if e.TotalAllocated >= 0 {
			c.dec.add(MemoryPoint{TimeNS: t, AllocatedBytes: e.TotalAllocated, ReservedBytes: e.TotalReserved})
		}
	}
}

// rank finishes the result.
func (m *merger) rank() *Rank {
	f, a := m.f, &m.acc
	base := f.meta.BaseTimeNS
	r := m.newRank()
	m.finishTables(r)
	m.finishDevices(r)
	stepStats(r)
	r.Comm, r.comm = finishComm(&a.comm)
	r.Memory = m.finishMemory()
	r.UtilTimeline = utilTimeline(a.util, newTimelineSpec(m.steps), base)
	r.FwdBwdLinks = a.links
	if r.TimeOrigin == OriginUnix {
		r.Overhead = profilingOverhead(r, m.opt.Phases, base, f)
	}
	if f.mtia > 0 {
		r.Warnings = append(r.Warnings, fmt.Sprintf("%d MTIA device events (mtia_ccp_events) are not analysed: the device numbers cover CUDA and ROCm work only", f.mtia))
	}
	if f.incomplete() {
		r.Warnings = append(r.Warnings, "the trace holds no operator and no kernel launch: the profiler recorded no active step of the training (the job may have ended during the profiler's warm-up), so the report judges nothing")
	}
	a.deep.finish(r)
	r.Findings = findings(f, r)
	emptyLists(r)
	return r
}

// newRank is the rank's identity, profiler settings and the warnings of
// reading its trace.
func (m *merger) newRank() *Rank {
	f := m.f
	base := f.meta.BaseTimeNS
	r := &Rank{Rank: f.rank, hasRank: f.rank >= 0, Path: f.path, Bytes: f.bytes, Events: f.events,
		SlowestStep: -1, OutlierSteps: []int{}, PrimaryDevice: -1}
	if r.Rank < 0 {
		r.Rank = 0
	}
	if d := f.meta.Distributed; d != nil {
		r.WorldSize, r.Backend = d.WorldSize, d.Backend
	}
	r.TimeOrigin = timeOrigin(f)
	if f.minTS != math.MaxInt64 {
		r.StartTimeNS = base + f.minTS
	}
	r.id = jobIdent{pid: f.pid, hasPID: f.hasPID, unix: r.TimeOrigin == OriginUnix, start: base + f.spanS, end: base + f.spanE,
		worker: workerName(f.path)}
	r.Profiler = Profiler{WithStack: f.meta.WithStack, RecordShapes: f.meta.RecordShapes, ProfileMemory: f.meta.ProfileMemory,
		Schedule: f.markers, PythonFunctionEvents: f.pythonFunctions}
	r.Warnings = append([]string{}, f.damage.Warnings...)
	if f.damage.Truncated {
		r.Warnings = append(r.Warnings, "the trace is truncated: the report covers the events before the cut")
	}
	if f.damage.Repaired > 0 {
		r.Warnings = append(r.Warnings, fmt.Sprintf("%d damaged events repaired", f.damage.Repaired))
	}
	if f.damage.Dropped > 0 {
		r.Warnings = append(r.Warnings, fmt.Sprintf("%d unreadable events dropped", f.damage.Dropped))
	}
	return r
}

// finishTables fills r's operator, range, kernel, launch, copy and sync
// tables.
func (m *merger) finishTables(r *Rank) {
	f, a := m.f, &m.acc
	finishSpans(a.ops, a.opSpans)
	r.Operators = make([]Operator, 0, len(a.ops))
	for _, o := range a.ops {
		r.Operators = append(r.Operators, *o)
	}
	sortOperators(r.Operators)
	r.OperatorsByShape = []Operator{}
	switch {
	case m.opt.GroupByShape:
		r.OperatorsByShape = append(r.OperatorsByShape, r.Operators...)
	case f.meta.RecordShapes:
		finishSpans(a.shapeOps, a.shapeSpans)
		for _, o := range a.shapeOps {
			r.OperatorsByShape = append(r.OperatorsByShape, *o)
		}
		sortOperators(r.OperatorsByShape)
	}
	finishSpans(a.ranges, a.rangeSpans)
	r.UserRanges = make([]Operator, 0, len(a.ranges))
	for _, o := range a.ranges {
		o.DeviceTotalNS = a.rangeDev[o.Name]
		r.UserRanges = append(r.UserRanges, *o)
	}
	sort.SliceStable(r.UserRanges, func(i, j int) bool {
		x, y := r.UserRanges[i], r.UserRanges[j]
		if x.HostTotalNS != y.HostTotalNS {
			return x.HostTotalNS > y.HostTotalNS
		}
		return x.Name < y.Name
	})
	r.Kernels = kernelRows(a.kernels)
	r.KernelOps = kernelOpRows(a.kernelOps)
	r.HTA = m.hta.result(f.htaWindow())
	if a.tcAll > 0 {
		r.TensorCoreEligibleRatio = float64(a.tcYes) / float64(a.tcAll)
	}
	r.Launch = finishLaunch(&a.launch)
	r.Copies = copyRows(a.copies)
	r.Syncs = syncRows(a.syncs)
}

// finishDevices fills r's GPUs, its primary device (the one with the most
// compute, whose numbers are the rank's headline) and its steps.
func (m *merger) finishDevices(r *Rank) {
	f, a := m.f, &m.acc
	r.StepSource = m.src
	m.finishIdle()
	r.GPUs = gpuRows(f, a.devs, m.idle, a.slotTotal)
	for _, x := range r.GPUs {
		// the rank's headline numbers: the device with the most compute
		if r.PrimaryDevice < 0 || x.KernelNS > r.GPUs[indexOfDevice(r.GPUs, r.PrimaryDevice)].KernelNS {
			r.PrimaryDevice = x.Device
			r.GPUUtilizationRatio, r.SMEfficiencyRatio = x.UtilizationRatio, x.SMEfficiencyRatio
			r.AchievedOccupancyRatio, r.TensorCoreRatio = x.AchievedOccupancyRatio, x.TensorCoreRatio
			r.Idle = x.Idle
		}
	}
	r.Steps = make([]Step, 0, len(a.steps))
	for _, sp := range a.steps {
		st := sp.Step
		if st.DurationNS > 0 && r.PrimaryDevice >= 0 {
			st.UtilizationRatio = float64(sp.compute[r.PrimaryDevice]) / float64(st.DurationNS)
		}
		r.Steps = append(r.Steps, st)
	}
}

// emptyLists makes r's lists [] in the JSON, never null.
func emptyLists(r *Rank) {
	if r.Comm.Collectives == nil {
		r.Comm.Collectives = []Collective{}
	}
	if r.Memory.Devices == nil {
		r.Memory.Devices = []MemoryDevice{}
	}
	if r.UtilTimeline == nil {
		r.UtilTimeline = []UtilPoint{}
	}
	if r.GPUs == nil {
		r.GPUs = []GPU{}
	}
}

func indexOfDevice(gs []GPU, d int) int {
	for i := range gs {
		if gs[i].Device == d {
			return i
		}
	}
	return 0
}

func (m *merger) finishMemory() Memory {
	out := Memory{OOMEvents: m.oom}
	for _, c := range m.mem {
		d := c.d
		d.Curve = c.dec.finish()
		if d.IsGPU {
			out.PeakAllocatedBytes = max(out.PeakAllocatedBytes, d.PeakAllocatedBytes)
			out.PeakReservedBytes = max(out.PeakReservedBytes, d.PeakReservedBytes)
		}
		out.Devices = append(out.Devices, d)
	}
	sort.Slice(out.Devices, func(i, j int) bool {
		a, b := out.Devices[i], out.Devices[j]
		if a.IsGPU != b.IsGPU {
			return a.IsGPU
		}
		return a.DeviceID < b.DeviceID
	})
	return out
}
