package perf

import (
	"math"
	"strings"

	"github.com/ptscope/ptscope/internal/kineto"
)

// Breakdown is a step's wall time split in the plugin's priority order:
// Kernel > Memcpy > Memset > Communication > Runtime > DataLoader > CPU Exec
// > Other. The parts sum to the step's duration.
type Breakdown struct {
	KernelNS        int64 `json:"kernel_ns"`
	MemcpyNS        int64 `json:"memcpy_ns"`
	MemsetNS        int64 `json:"memset_ns"`
	CommunicationNS int64 `json:"communication_ns"`
	RuntimeNS       int64 `json:"runtime_ns"`
	DataLoaderNS    int64 `json:"dataloader_ns"`
	CPUExecNS       int64 `json:"cpu_exec_ns"`
	OtherNS         int64 `json:"other_ns"`
}

// Total is the sum of all parts.
func (b Breakdown) Total() int64 {
	return b.KernelNS + b.MemcpyNS + b.MemsetNS + b.CommunicationNS + b.RuntimeNS + b.DataLoaderNS + b.CPUExecNS + b.OtherNS
}

// Parts returns the parts with their display names, in priority order.
func (b Breakdown) Parts() []Part {
	return []Part{{"Kernel", b.KernelNS}, {"Memcpy", b.MemcpyNS}, {"Memset", b.MemsetNS},
		{"Communication", b.CommunicationNS}, {"Runtime", b.RuntimeNS}, {"DataLoader", b.DataLoaderNS},
		{"CPU Exec", b.CPUExecNS}, {"Other", b.OtherNS}}
}

// Part is one named share of a step.
type Part struct {
	Name string
	NS   int64
}

// Phases is a step's wall time split by training phase, with priority data
// loading > backward > forward > optimizer > other; data loading is the
// breakdown's DataLoader part. The parts sum to the step's duration.
type Phases struct {
	ForwardNS     int64 `json:"forward_ns"`
	BackwardNS    int64 `json:"backward_ns"`
	OptimizerNS   int64 `json:"optimizer_ns"`
	DataLoadingNS int64 `json:"data_loading_ns"`
	OtherNS       int64 `json:"other_ns"`
}

func isDataLoader(name string) bool {
	return strings.HasPrefix(name, "enumerate(DataLoader)#") || strings.HasPrefix(name, "enumerate(DataPipe)#")
}

func isOptimizer(name string) bool {
	return strings.HasPrefix(name, "Optimizer.step#") || strings.HasPrefix(name, "Optimizer.zero_grad#")
}

func isCommOpName(name string) bool {
	return strings.HasPrefix(name, "nccl:") || strings.HasPrefix(name, "gloo:")
}

// isCommKernel reports NCCL/RCCL/HCCL kernels by name (HTA's rule) or by
// the collective arguments Kineto copies onto them.
func isCommKernelName(name string) bool {
	return strings.HasPrefix(name, "nccl") || strings.Contains(name, "ncclKernel") || strings.Contains(name, "ncclDevKernel") ||
		strings.HasPrefix(name, "rccl") || strings.HasPrefix(name, "hccl")
}

// roles holds the union of each role's intervals over the whole trace.
type roles struct {
	kernel, memcpy, memset, comm, runtime, dataloader, cpu spans
	commKernel                                             []bool // per GPU event index in g.gpu
}

// hostRoles are the unions of the host events' roles, which need no
// links: they are built while the graph is.
type hostRoles struct {
	runtime, dataloader, cpu, commOps spans
}

// host event roles, by name
const (
	roleCPU uint8 = iota + 1
	roleStep
	roleDataLoader
	roleCommOp
)

func buildHostRoles(t *kineto.Trace) *hostRoles {
	ev := &t.Events
	var nLaunch, nHost int
	for _, k := range ev.Kind {
		switch {
		case k.IsLaunch():
			nLaunch++
		case isOp(k) || k == kineto.KindPythonFunction:
			nHost++
		}
	}
	h := &hostRoles{runtime: make(spans, 0, nLaunch), cpu: make(spans, 0, nHost)}
	cls := make([]uint8, len(t.Strings)) // role by name id, 0: not yet known
	for i := 0; i < ev.Len(); i++ {
		k := ev.Kind[i]
		switch {
		case k.IsLaunch():
			h.runtime = append(h.runtime, span{ev.TS[i], ev.End(i)})
		case isOp(k) || k == kineto.KindPythonFunction:
			id := ev.Name[i]
			c := cls[id]
			if c == 0 {
				switch name := t.Strings[id]; {
				case strings.HasPrefix(name, "ProfilerStep#"):
					c = roleStep
				case isDataLoader(name):
					c = roleDataLoader
				case isCommOpName(name):
					c = roleCommOp
				default:
					c = roleCPU
				}
				cls[id] = c
			}
			s := span{ev.TS[i], ev.End(i)}
			switch c {
			case roleDataLoader:
				h.dataloader = append(h.dataloader, s)
			case roleCommOp:
				h.commOps = append(h.commOps, s)
			case roleCPU:
				h.cpu = append(h.cpu, s)
			}
		}
	}
	lists := []*spans{&h.runtime, &h.dataloader, &h.cpu, &h.commOps}
	parallel(len(lists), func(j int) { *lists[j] = union(*lists[j]) })
	return h
}

// buildRoles adds the GPU events' roles to the host's.
func buildRoles(g *graph, h *hostRoles) *roles {
	ev := g.ev
	r := &roles{commKernel: make([]bool, len(g.gpu)), runtime: h.runtime, dataloader: h.dataloader, cpu: h.cpu}
	r.kernel = make(spans, 0, len(g.gpu))
	for k, i := range g.gpu {
		s := span{ev.TS[i], ev.End(int(i))}
		switch ev.Kind[i] {
		case kineto.KindKernel:
			if g.isCommGPU(int(i)) {
				r.comm = append(r.comm, s)
				r.commKernel[k] = true
			} else {
				r.kernel = append(r.kernel, s)
			}
		case kineto.KindMemcpy:
			r.memcpy = append(r.memcpy, s)
		case kineto.KindMemset:
			r.memset = append(r.memset, s)
		}
	}
	// union's result does not depend on the order of its spans
	r.comm = append(r.comm, h.commOps...)
	for _, v := range []*spans{&r.kernel, &r.memcpy, &r.memset, &r.comm} {
		*v = union(*v)
	}
	return r
}

// isCommGPU reports whether GPU event i is communication.
func (g *graph) isCommGPU(i int) bool {
	ev := g.ev
	if ev.Kind[i] != kineto.KindKernel {
		return false
	}
	if a := ev.Aux[i]; a >= 0 && g.t.GPU[a].Comm >= 0 {
		return true
	}
	if g.class(int32(i))&ncCommKernel != 0 {
		return true
	}
	if o := g.owner[i]; o >= 0 && g.class(o)&ncCommOp != 0 {
		return true
	}
	return false
}

// attribute splits every step by priority. Time taken by a higher role is
// not available to lower ones. It also returns the DataLoader role's share
// (the DataLoader time no GPU work or launch hides), which the phases take
// as their data loading.
func attribute(r *roles, steps []stepSpan) ([]Breakdown, spans) {
	slots := make(spans, 0, len(steps))
	for _, s := range steps {
		slots = append(slots, span{s.start, s.end})
	}
	slots = union(slots)
	out := make([]Breakdown, len(steps))
	fields := func(b *Breakdown) []*int64 {
		return []*int64{&b.KernelNS, &b.MemcpyNS, &b.MemsetNS, &b.CommunicationNS, &b.RuntimeNS, &b.DataLoaderNS, &b.CPUExecNS}
	}
	var dataloader spans
	for k, role := range []spans{r.kernel, r.memcpy, r.memset, r.comm, r.runtime, r.dataloader, r.cpu} {
		taken := intersect(role, slots)
		slots = subtract(slots, taken)
		if k == 5 {
			dataloader = taken
		}
		for i, s := range steps {
			*fields(&out[i])[k] = taken.overlap(s.start, s.end)
		}
	}
	for i, s := range steps {
		out[i].OtherNS = (s.end - s.start) - out[i].Total()
	}
	return out, dataloader
}

// StepOverlap splits a step as the plugin's distributed view does:
// computation is the compute kernels' time (the CPU ops' in a trace
// without kernels), communication the communication role's (kernels and
// nccl:*/gloo:* ops), overlap their intersection, other the rest; the four
// parts sum to the step's duration.
type StepOverlap struct {
	ComputeOnlyNS       int64 `json:"compute_only_ns"`
	OverlapNS           int64 `json:"overlap_ns"`
	CommunicationOnlyNS int64 `json:"communication_only_ns"`
	OtherNS             int64 `json:"other_ns"`
}

// commOverlap is each step's StepOverlap.
func commOverlap(r *roles, steps []stepSpan, kernels bool) []StepOverlap {
	comp := r.kernel
	if !kernels {
		comp = r.cpu
	}
	both := intersect(comp, r.comm)
	out := make([]StepOverlap, len(steps))
	for i, s := range steps {
		c, m, o := comp.overlap(s.start, s.end), r.comm.overlap(s.start, s.end), both.overlap(s.start, s.end)
		out[i] = StepOverlap{ComputeOnlyNS: c - o, OverlapNS: o, CommunicationOnlyNS: m - o, OtherNS: (s.end - s.start) + o - c - m}
	}
	return out
}

// phaseSpans builds the union of each training phase: the host spans of its
// annotations or ops plus the GPU work they launched. The outermost
// classifying ancestor decides, except that backward work (autograd threads,
// backward ops) and ptscope's own forward/backward annotations inside an
// optimizer step stay backward and forward: a closure passed to
// optimizer.step (LBFGS, Lightning) runs the forward and backward there.
// With ptscope:optimizer annotations, they alone mark the optimizer step.
func phaseSpans(g *graph) (opt, bwd, fwd spans) {
	ev := g.ev
	n := ev.Len()
	// ptscope run's companion marks the optimizer's own work with
	// ptscope:optimizer; the Optimizer.step annotation around it also holds
	// the companion's step bookkeeping (and prof.step()), which is not the
	// optimizer's.
	ownOpt := false
	for _, i := range g.order {
		if g.class(i)&ncPtOptimizer != 0 {
			ownOpt = true
			break
		}
	}
	cls := make([]uint8, n) // 0 none, 2 optimizer, 3 backward, 4 forward
	var count [5]int
	// g.order runs thread by thread: remember the last thread's verdict
	lastThread, autograd := int64(math.MinInt64), false
	for _, i := range g.order {
		nc := g.class(i)
		c := uint8(0)
		if p := g.parent[i]; p >= 0 {
			c = cls[p]
		}
		if tk := threadKey(ev.PID[i], ev.TID[i]); tk != lastThread {
			lastThread, autograd = tk, g.autogr[tk]
		}
		switch {
		case c == 3:
		case nc&ncPtForward != 0:
			c = 4
		case nc&(ncPtBackward|ncBackward) != 0 || autograd || g.isBackwardOp(i):
			c = 3
		case c == 2:
		case nc&ncPtOptimizer != 0 || nc&ncOptimizer != 0 && !(ownOpt && nc&ncOptStep != 0):
			c = 2
		case c == 0 && ev.Kind[i] == kineto.KindCPUOp && nc&ncDataLoader == 0:
			c = 4
		}
		cls[i] = c
		count[c]++
	}
	for _, i := range g.gpu {
		if o := g.owner[i]; o >= 0 {
			count[cls[o]]++
		}
	}
	opt, bwd, fwd = make(spans, 0, count[2]), make(spans, 0, count[3]), make(spans, 0, count[4])
	add := func(c uint8, s span) {
		switch c {
		case 2:
			opt = append(opt, s)
		case 3:
			bwd = append(bwd, s)
		case 4:
			fwd = append(fwd, s)
		}
	}
	for _, i := range g.order {
		add(cls[i], span{ev.TS[i], ev.End(int(i))})
	}
	for _, i := range g.gpu {
		if o := g.owner[i]; o >= 0 {
			add(cls[o], span{ev.TS[i], ev.End(int(i))})
		}
	}
	return union(opt), union(bwd), union(fwd)
}

// attributePhases splits every step by priority (ph: phaseSpans' optimizer,
// backward and forward spans): data loading (exactly the
// breakdown's DataLoader part), then backward > forward > optimizer, so that
// forward and backward work inside an optimizer step stay theirs; the rest
// is other.
func attributePhases(ph [3]spans, steps []stepSpan, data spans) []Phases {
	opt, bwd, fwd := ph[0], ph[1], ph[2]
	slots := make(spans, 0, len(steps))
	for _, s := range steps {
		slots = append(slots, span{s.start, s.end})
	}
	slots = union(slots)
	out := make([]Phases, len(steps))
	fields := func(p *Phases) []*int64 {
		return []*int64{&p.DataLoadingNS, &p.BackwardNS, &p.ForwardNS, &p.OptimizerNS}
	}
	for k, role := range []spans{data, bwd, fwd, opt} {
		taken := intersect(role, slots)
		slots = subtract(slots, taken)
		for i, s := range steps {
			*fields(&out[i])[k] = taken.overlap(s.start, s.end)
		}
	}
	for i, s := range steps {
		p := &out[i]
		p.OtherNS = (s.end - s.start) - p.DataLoadingNS - p.OptimizerNS - p.BackwardNS - p.ForwardNS
	}
	return out
}

// isBackwardOp reports whether op i is the backward end of a fwd-bwd link.
func (g *graph) isBackwardOp(i int32) bool { return g.bwdOp[i] }
