package perf

import (
	"cmp"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/ptscope/ptscope/internal/kineto"
)

// Operator is one row of the operator table (cpu_op events grouped by name,
// or by name and input shapes).
type Operator struct {
	Name               string `json:"name"`
	InputShapes        string `json:"input_shapes,omitempty"`
	Calls              int    `json:"calls"`
	HostSelfNS         int64  `json:"host_self_ns"`
	HostTotalNS        int64  `json:"host_total_ns"`
	DeviceSelfNS       int64  `json:"device_self_ns"`
	DeviceTotalNS      int64  `json:"device_total_ns"`
	TensorCoreEligible bool   `json:"tensor_core_eligible"`
	TensorCoreSelfNS   int64  `json:"tensor_core_self_ns"`  // tensor-core kernels it launched
	TensorCoreTotalNS  int64  `json:"tensor_core_total_ns"` // ... it and its descendants launched
}

// Kernel is one row of the kernel table (kernels grouped by name).
type Kernel struct {
	Name                   string  `json:"name"`
	Calls                  int     `json:"calls"`
	TotalNS                int64   `json:"total_ns"`
	MeanNS                 int64   `json:"mean_ns"`
	MinNS                  int64   `json:"min_ns"`
	MaxNS                  int64   `json:"max_ns"`
	MeanBlocksPerSM        float64 `json:"mean_blocks_per_sm"`
	MeanOccupancyRatio     float64 `json:"mean_occupancy_ratio"`
	TensorCore             bool    `json:"tensor_core"`
	Communication          bool    `json:"communication"`
	TopOperator            string  `json:"top_operator,omitempty"`
	TensorCoreEligibleCall bool    `json:"tensor_core_eligible_op"`
}

// tcEligibleOps is the plugin's list of operators that could use tensor cores.
var tcEligibleOps = map[string]bool{}

func init() {
	for _, n := range strings.Fields(`aten::_convolution aten::conv1d aten::conv2d aten::conv3d aten::conv_tbc
	aten::conv_transpose1d aten::conv_transpose2d aten::conv_transpose3d aten::convolution aten::cudnn_convolution
	aten::cudnn_convolution_transpose aten::prelu aten::addmm aten::addmv aten::addr aten::matmul aten::mm aten::mv
	aten::linear aten::addbmm aten::baddbmm aten::bmm aten::chain_matmul aten::linalg_multi_dot
	aten::_thnn_fused_lstm_cell aten::_thnn_fused_gru_cell aten::lstm_cell aten::gru_cell aten::rnn_tanh_cell
	aten::rnn_relu_cell CudnnConvolutionBackward BmmBackward0 aten::cudnn_convolution_transpose_backward
	CudnnConvolutionTransposeBackward MmBackward aten::cudnn_convolution_backward_weight aten::addmm_ AddmvBackward
	MvBackward aten::cudnn_convolution_transpose_backward_weight aten::cudnn_convolution_transpose_backward_input
	AddmmBackward aten::cudnn_convolution_backward_input AddbmmBackward aten::cudnn_convolution_backward
	aten::_scaled_mm aten::_int_mm aten::convolution_backward MmBackward0 AddmmBackward0 BaddbmmBackward0`) {
		tcEligibleOps[n] = true
	}
}

// opStats holds host and device times per op event, indexed by the op's
// position in graph.order (pos maps an event to it, -1 for non-ops), from
// the events the window owns: hostSelf is the op's duration when owned,
// minus its owned children's, not yet clamped at 0.
//
// An op whose parent has the same name and no other child op (a cpu_op
// calling its own overload, as aten::div does) is merged into the parent,
// as key_averages and the plugin do (_remove_dup_nodes): it is not a call
// of its own, and its self times are the parent's (merged).
type opStats struct {
	pos                                          []int32
	hostSelf, devSelf, devTotal, tcSelf, tcTotal []int64
	merged                                       []bool
}

func computeOpStats(g *graph) *opStats {
	ev := g.ev
	n := ev.Len()
	m := len(g.order)
	st := &opStats{pos: make([]int32, n), hostSelf: make([]int64, m), devSelf: make([]int64, m), devTotal: make([]int64, m),
		tcSelf: make([]int64, m), tcTotal: make([]int64, m), merged: make([]bool, m)}
	for i := range st.pos {
		st.pos[i] = -1
	}
	for k, i := range g.order {
		st.pos[i] = int32(k)
		if g.owned(i) {
			st.hostSelf[k] = ev.Dur[i]
		}
	}
	for i := 0; i < n; i++ {
		if p := g.parent[i]; p >= 0 && (isOp(ev.Kind[i]) || ev.Kind[i].IsLaunch()) && g.owned(int32(i)) {
			st.hostSelf[st.pos[p]] -= ev.Dur[i]
		}
	}
	for _, i := range g.gpu {
		if o := g.owner[i]; o >= 0 && g.owned(i) {
			k := st.pos[o]
			st.devSelf[k] += ev.Dur[i]
			if ev.Kind[i] == kineto.KindKernel && g.isTC(ev.Name[i]) {
				st.tcSelf[k] += ev.Dur[i]
			}
		}
	}
	copy(st.devTotal, st.devSelf)
	copy(st.tcTotal, st.tcSelf)
	for k := len(g.order) - 1; k >= 0; k-- {
		if p := g.parent[g.order[k]]; p >= 0 {
			st.devTotal[st.pos[p]] += st.devTotal[k]
			st.tcTotal[st.pos[p]] += st.tcTotal[k]
		}
	}
	st.mergeDuplicates(g)
	return st
}

// mergeDuplicates merges each cpu_op whose parent is a cpu_op of the same
// name with no other child op into that parent, children first, so that a
// chain of them ends in its top op. The parent must lie whole in the
// window (owned, ending before the next window's host events), so that all
// its children are here to count.
func (st *opStats) mergeDuplicates(g *graph) {
	ev := g.ev
	children := make([]int32, len(g.order))
	for _, i := range g.order {
		if p := g.parent[i]; p >= 0 {
			children[st.pos[p]]++
		}
	}
	for k := len(g.order) - 1; k >= 0; k-- {
		i := g.order[k]
		p := g.parent[i]
		if p < 0 || ev.Kind[i] != kineto.KindCPUOp || ev.Kind[p] != kineto.KindCPUOp || ev.Name[i] != ev.Name[p] {
			continue
		}
		pk := st.pos[p]
		if children[pk] != 1 || !g.owned(p) || ev.End(int(p)) >= g.win.hostTo {
			continue
		}
		st.merged[k] = true
		st.hostSelf[pk] += st.hostSelf[k]
		st.devSelf[pk] += st.devSelf[k]
		st.tcSelf[pk] += st.tcSelf[k]
	}
}

// operators groups cpu_op events (and, with annotations, user annotations,
// ProfilerStep#N as "ProfilerStep*") by name, optionally by input shapes.
// torch's own annotations written as cpu_op by older profilers count as
// annotations.
func operators(g *graph, st *opStats, byShape, annotations bool) (map[rowKey]*Operator, map[int64]*spanOp) {
	return opRows(g, st, byShape, func(i int32) bool {
		if annotations {
			return isOp(g.ev.Kind[i])
		}
		return g.ev.Kind[i] == kineto.KindCPUOp && g.class(i)&ncAnnotation == 0
	})
}

// userRanges groups the user annotations (record_function ranges such as
// "forward", DataLoader and Optimizer spans), ProfilerStep#N excluded. Their
// device total is the GPU work launched on any thread of the process while
// the range was open (dev, by name).
func userRanges(g *graph, st *opStats) (rows map[rowKey]*Operator, sp map[int64]*spanOp, dev map[string]int64) {
	rows, sp = opRows(g, st, false, func(i int32) bool {
		return g.ev.Kind[i] == kineto.KindUserAnnotation && !strings.HasPrefix(g.t.Name(int(i)), "ProfilerStep#")
	})
	// device time of a range: the GPU work launched on any thread of its
	// process while it was open (backward() runs on autograd threads)
	type launch struct {
		ts  int64
		pid int32
		dur int64
	}
	var ls []launch
	for _, i := range g.gpu {
		if l := g.launch[i]; l >= 0 && g.owned(i) {
			ls = append(ls, launch{g.ev.TS[l], g.ev.PID[l], g.ev.Dur[i]})
		}
	}
	// any order of equal starts gives the same sums
	slices.SortFunc(ls, func(a, b launch) int { return cmp.Compare(a.ts, b.ts) })
	dev = map[string]int64{}
	for _, i := range g.order {
		if g.ev.Kind[i] != kineto.KindUserAnnotation {
			continue
		}
		s, e, pid := g.ev.TS[i], g.ev.End(int(i)), g.ev.PID[i]
		k := sort.Search(len(ls), func(j int) bool { return ls[j].ts >= s })
		for ; k < len(ls) && ls[k].ts <= e; k++ {
			if ls[k].pid == pid {
				dev[g.t.Name(int(i))] += ls[k].dur
			}
		}
	}
	return rows, sp, dev
}

// opRows adds the ops that keep selects to rows by (display name, input
// shapes): owned ops add their calls and durations; every op adds what the
// window's owned events add to it (device time, children's host time). An
// op whose children other windows may own (it spans windows) leaves its
// host self time to the merge, in the second map.
func opRows(g *graph, st *opStats, byShape bool, keep func(i int32) bool) (map[rowKey]*Operator, map[int64]*spanOp) {
	ev := g.ev
	rows := map[rowKey]*Operator{}
	spans := map[int64]*spanOp{}
	// rows by string ids, found without hashing the strings: by name id
	// alone, or by name and shape ids
	byName := make([]*Operator, len(g.t.Strings))
	type idKey struct {
		name, shape uint32
		shaped      bool
	}
	byIDs := map[idKey]*Operator{}
	keyOf := func(i int32) rowKey {
		key := rowKey{name: g.t.Strings[ev.Name[i]]}
		if g.class(i)&ncStep != 0 {
			key.name = "ProfilerStep*"
		}
		if byShape && ev.Aux[i] >= 0 {
			key.shape = g.t.Strings[g.t.Ops[ev.Aux[i]].Shape]
		}
		return key
	}
	for pos, i := range g.order {
		if !keep(i) || st.merged[pos] {
			continue
		}
		owned := g.owned(i)
		hs, ds, dt, tc, tt := st.hostSelf[pos], st.devSelf[pos], st.devTotal[pos], st.tcSelf[pos], st.tcTotal[pos]
		if !owned && hs == 0 && ds == 0 && dt == 0 && tc == 0 && tt == 0 {
			continue // context that nothing here adds to
		}
		var r *Operator
		ik := idKey{name: ev.Name[i]}
		if byShape && ev.Aux[i] >= 0 {
			ik.shape, ik.shaped = g.t.Ops[ev.Aux[i]].Shape, true
		}
		if ik.shaped {
			r = byIDs[ik]
		} else {
			r = byName[ik.name]
		}
		if r == nil {
			key := keyOf(i)
			if r = rows[key]; r == nil {
				r = &Operator{Name: key.name, InputShapes: key.shape, TensorCoreEligible: tcEligibleOps[key.name]}
				rows[key] = r
			}
			if ik.shaped {
				byIDs[ik] = r
			} else {
				byName[ik.name] = r
			}
		}
		if owned {
			r.Calls++
			r.HostTotalNS += ev.Dur[i]
		}
		r.DeviceSelfNS += ds
		r.DeviceTotalNS += dt
		r.TensorCoreSelfNS += tc
		r.TensorCoreTotalNS += tt
		if owned && ev.End(int(i)) < g.win.hostTo {
			r.HostSelfNS += max(hs, 0) // all its children are here
			continue
		}
		sp := spans[g.seqOf(i)]
		if sp == nil {
			sp = &spanOp{}
			spans[g.seqOf(i)] = sp
		}
		sp.hostSelf += hs
		if owned {
			k := keyOf(i)
			sp.row = &k
		}
	}
	return rows, spans
}

// sortOperators orders operator rows by device self time, host self time,
// name and shapes.
func sortOperators(out []Operator) {
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.DeviceSelfNS != b.DeviceSelfNS {
			return a.DeviceSelfNS > b.DeviceSelfNS
		}
		if a.HostSelfNS != b.HostSelfNS {
			return a.HostSelfNS > b.HostSelfNS
		}
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.InputShapes < b.InputShapes
	})
}

// kernelAcc is a kernel row being summed, with the weights of its means
// and its time by launching op (for TopOperator).
type kernelAcc struct {
	Kernel
	bw, ow wsum  // blocks per SM × time, occupancy (%) × time
	od     int64 // time
	ops    map[string]int64
}

// kernels groups the owned kernel events by name. Means of blocks per SM
// and occupancy are weighted by duration, as in the plugin.
func kernels(g *graph) map[string]*kernelAcc {
	ev := g.ev
	rows := map[string]*kernelAcc{}
	byID := map[uint32]*kernelAcc{}
	for _, i := range g.gpu {
		if ev.Kind[i] != kineto.KindKernel || !g.owned(i) {
			continue
		}
		a := byID[ev.Name[i]]
		if a == nil {
			n := g.t.Strings[ev.Name[i]]
			a = &kernelAcc{Kernel: Kernel{Name: n, MinNS: math.MaxInt64, TensorCore: IsTensorCoreKernel(n)}, ops: map[string]int64{}}
			rows[n] = a
			byID[ev.Name[i]] = a
		}
		d := ev.Dur[i]
		a.Calls++
		a.TotalNS += d
		a.MinNS = min(a.MinNS, d)
		a.MaxNS = max(a.MaxNS, d)
		info := g.t.GPU[ev.Aux[i]]
		if info.BlocksPerSM > 0 {
			a.bw.add(fixed(float64(info.BlocksPerSM)), d)
		}
		if info.Occupancy >= 0 {
			a.ow.add(fixed(float64(info.Occupancy)), d)
		}
		a.od += d
		if g.isCommGPU(int(i)) {
			a.Communication = true
		}
		if o := g.owner[i]; o >= 0 {
			a.ops[g.t.Name(int(o))] += d
		}
	}
	return rows
}

// kernelRows finishes the kernel rows, by total time.
func kernelRows(rows map[string]*kernelAcc) []Kernel {
	out := make([]Kernel, 0, len(rows))
	for _, a := range rows {
		if a.Calls > 0 {
			a.MeanNS = a.TotalNS / int64(a.Calls)
		}
		if a.od > 0 {
			a.MeanBlocksPerSM = a.bw.value() / float64(a.od)
			a.MeanOccupancyRatio = a.ow.value() / 100 / float64(a.od)
		}
		best, bestT := "", int64(-1)
		for op, t := range a.ops {
			if t > bestT || (t == bestT && op < best) {
				best, bestT = op, t
			}
		}
		if bestT >= 0 {
			a.TopOperator = best
			a.TensorCoreEligibleCall = tcEligibleOps[a.TopOperator]
		}
		out = append(out, a.Kernel)
	}
	sortByTotal(out, func(k *Kernel) (int64, string) { return k.TotalNS, k.Name })
	return out
}

// sortByTotal orders rows by their total time, longest first, then by name.
func sortByTotal[T any](rows []T, key func(*T) (totalNS int64, name string)) {
	sort.Slice(rows, func(i, j int) bool {
		ti, ni := key(&rows[i])
		tj, nj := key(&rows[j])
		if ti != tj {
			return ti > tj
		}
		return ni < nj
	})
}
