package perf

import (
	"encoding/json"
	"math"
	"sort"
	"strings"

	"github.com/ptscope/ptscope/internal/kineto"
)

// Comm summarises communication on one rank: NCCL kernels (by name, by the
// collective arguments Kineto copies onto them, or by an nccl:* enclosing
// op) and record_param_comms ops. A collective that runs on the host (gloo,
// or an nccl:* op whose kernel the trace lacks) is the outermost
// communication op with no communication kernel under it: its span is the
// collective's time.
type Comm struct {
	Kernels         int          `json:"kernels"`
	KernelNS        int64        `json:"total_ns"`      // the kernels' durations, summed
	OverlapRatio    float64      `json:"overlap_ratio"` // |compute ∩ comm| / |comm|
	ExposedNS       int64        `json:"exposed_ns"`    // comm time not hidden by compute
	Collectives     []Collective `json:"collectives"`
	RecordParamComm int          `json:"record_param_comms"`
}

// Collective aggregates one collective kind.
type Collective struct {
	Name    string `json:"name"`
	Calls   int    `json:"calls"`
	TotalNS int64  `json:"total_ns"`
	// Bytes: In/Out msg nelems × dtype size, else (older traces, gloo) the
	// op's Input Dims × Input type, as the plugin sizes them.
	Bytes int64 `json:"bytes"`
	Host  bool  `json:"host,omitempty"` // run on the host: no communication kernel (gloo)
}

// commEvent is one communication kernel, for matching across ranks.
type commEvent struct {
	name       string
	pg         string
	seq        int64
	start, end int64 // absolute ns (baseTimeNanoseconds + ts)
	index      int64 // the kernel's index in the whole trace (order)
	// idle are the parts of [start, end) in which no compute kernel runs
	// on the rank, relative to start: where waiting in it costs time
	idle []span
}

var dtypeSize = map[string]int64{"Float": 4, "float": 4, "Double": 8, "double": 8, "Half": 2, "c10::Half": 2,
	"BFloat16": 2, "c10::BFloat16": 2, "Long": 8, "long int": 8, "Int": 4, "int": 4, "Byte": 1, "unsigned char": 1,
	"Char": 1, "Bool": 1, "Float8_e4m3fn": 1, "Float8_e5m2": 1, "Short": 2}

// collectiveName normalises a collective from args or a kernel name.
func collectiveName(g *graph, i int) (name string, bytes int64, pg string, seq int64) {
	ev := g.ev
	seq = kineto.None
	var ci int32 = -1
	if a := ev.Aux[i]; a >= 0 {
		if ev.Kind[i].IsGPU() {
			ci = g.t.GPU[a].Comm
		} else {
			ci = g.t.Ops[a].Comm
		}
	}
	if ci < 0 {
		if o := g.owner[i]; o >= 0 && ev.Aux[o] >= 0 {
			ci = g.t.Ops[ev.Aux[o]].Comm
		}
	}
	if ci >= 0 {
		c := g.t.Comms[ci]
		name = g.t.Strings[c.Collective]
		n := max(c.InNelems, c.OutNelems)
		bytes = n * dtypeSize[g.t.Strings[c.Dtype]]
		return name, bytes, g.t.Strings[c.PGName], c.Seq
	}
	k := g.t.Name(i)
	if isOp(ev.Kind[i]) {
		return trimCommPrefix(k), inputBytes(g, i), "", seq
	}
	if o := g.owner[i]; o >= 0 && isCommOpName(g.t.Name(int(o))) {
		return trimCommPrefix(g.t.Name(int(o))), inputBytes(g, int(o)), "", seq
	}
	// ncclDevKernel_AllReduce_Sum_f32_RING_LL(...) / ncclKernel_AllReduce_RING_LL_Sum_float(...)
	k = strings.TrimPrefix(strings.TrimPrefix(k, "ncclDevKernel_"), "ncclKernel_")
	if p := strings.IndexAny(k, "_("); p > 0 {
		k = k[:p]
	}
	return strings.ToLower(k), 0, "", seq
}

// idleIn is [s, e) without the compute spans, relative to s.
func idleIn(compute spans, s, e int64) []span {
	var out []span
	at := s
	compute.clip(s, e, func(cs, ce int64) {
		if cs > at {
			out = append(out, span{at - s, cs - s})
		}
		at = ce
	})
	if at < e {
		out = append(out, span{at - s, e - s})
	}
	return out
}

func trimCommPrefix(name string) string {
	return strings.TrimPrefix(strings.TrimPrefix(name, "nccl:"), "gloo:")
}

// typeSize is the plugin's table of Input type sizes (communication.py);
// other types count 0.
var typeSize = map[string]int64{"long int": 8, "float": 4, "int": 4, "c10::Half": 2, "c10::BFloat16": 2,
	"unsigned char": 1}

// inputBytes is the size of op i's inputs: Σ ∏ Input Dims × the size of
// its Input type (0 without them).
func inputBytes(g *graph, i int) int64 {
	a := g.ev.Aux[i]
	if a < 0 || !isOp(g.ev.Kind[i]) {
		return 0
	}
	info := g.t.Ops[a]
	var dims [][]int64
	var types []string
	if info.Shape == 0 || info.Types == 0 || json.Unmarshal([]byte(g.t.Strings[info.Shape]), &dims) != nil ||
		json.Unmarshal([]byte(g.t.Strings[info.Types]), &types) != nil {
		return 0
	}
	var n int64
	for k, d := range dims {
		if k >= len(types) {
			break
		}
		v := typeSize[types[k]]
		for _, x := range d {
			v *= x
		}
		n += v
	}
	return n
}

// hostCollectives are the communication ops (nccl:*, gloo:*,
// record_param_comms with collective arguments) that are outermost and
// have no communication kernel under them: collectives run on the host.
func hostCollectives(g *graph, r *roles) []int32 {
	ev := g.ev
	isComm := func(o int32) bool {
		if g.class(o)&ncCommOp != 0 {
			return true
		}
		a := ev.Aux[o]
		return a >= 0 && g.t.Ops[a].Comm >= 0
	}
	var cands int
	for _, o := range g.order {
		if isComm(o) {
			cands++
		}
	}
	if cands == 0 {
		return nil
	}
	// ops with a communication kernel under them
	withKernel := map[int32]bool{}
	for k, i := range g.gpu {
		if !r.commKernel[k] {
			continue
		}
		for o := g.owner[i]; o >= 0 && !withKernel[o]; o = g.parent[o] {
			withKernel[o] = true
		}
	}
	var out []int32
	for _, o := range g.order {
		if !isComm(o) || withKernel[o] {
			continue
		}
		outer := true
		for p := g.parent[o]; p >= 0; p = g.parent[p] {
			if isComm(p) {
				outer = false
				break
			}
		}
		if outer {
			out = append(out, o)
		}
	}
	return out
}

// commStats sums the owned communication kernels, and their overlap with
// compute over the window's time, and the owned host collectives.
func commStats(g *graph, r *roles) commPart {
	ev := g.ev
	w := g.win
	out := commPart{rows: map[string]*Collective{}}
	base := g.t.Meta.BaseTimeNS
	var ks spans
	for k, i := range g.gpu {
		if !r.commKernel[k] {
			continue
		}
		ks = append(ks, span{ev.TS[i], ev.End(int(i))})
		if !g.owned(i) {
			continue
		}
		out.kernels++
		out.kernelNS += ev.Dur[i]
		name, bytes, pg, seq := collectiveName(g, int(i))
		c := out.rows[name]
		if c == nil {
			c = &Collective{Name: name}
			out.rows[name] = c
		}
		c.Calls++
		c.TotalNS += ev.Dur[i]
		c.Bytes += bytes
		out.events = append(out.events, commEvent{name: name, pg: pg, seq: seq, start: base + ev.TS[i], end: base + ev.End(int(i)),
			index: g.seqOf(i), idle: idleIn(r.kernel, ev.TS[i], ev.End(int(i)))})
	}
	for _, o := range hostCollectives(g, r) {
		if !g.owned(o) {
			continue
		}
		name, bytes, pg, seq := collectiveName(g, int(o))
		c := out.rows[name]
		if c == nil {
			c = &Collective{Name: name, Host: true}
			out.rows[name] = c
		}
		c.Calls++
		c.TotalNS += ev.Dur[o]
		c.Bytes += bytes
		out.events = append(out.events, commEvent{name: name, pg: pg, seq: seq, start: base + ev.TS[o], end: base + ev.End(int(o)),
			index: g.seqOf(o), idle: idleIn(r.kernel, ev.TS[o], ev.End(int(o)))})
	}
	for i := 0; i < ev.Len(); i++ {
		if ev.Kind[i] == kineto.KindCPUOp && g.owned(int32(i)) && g.t.Name(i) == "record_param_comms" {
			out.rpc++
		}
	}
	// only GPU comm kernels count here, not the host ops in r.comm
	comm := union(ks)
	if w.from != math.MinInt64 || w.to != math.MaxInt64 {
		comm = intersect(comm, spans{{w.from, w.to}})
	}
	out.overlapNS = intersect(comm, r.kernel).total()
	out.commNS = comm.total()
	return out
}

// finishComm makes the communication summary of the whole trace.
func finishComm(a *commPart) (Comm, []commEvent) {
	out := Comm{Kernels: a.kernels, KernelNS: a.kernelNS, RecordParamComm: a.rpc}
	if out.KernelNS > 0 && a.commNS > 0 {
		out.OverlapRatio = float64(a.overlapNS) / float64(a.commNS)
		out.ExposedNS = a.commNS - a.overlapNS
	}
	for _, c := range a.rows {
		out.Collectives = append(out.Collectives, *c)
	}
	sortByTotal(out.Collectives, func(c *Collective) (int64, string) { return c.TotalNS, c.Name })
	ev := a.events
	sort.Slice(ev, func(i, j int) bool {
		if ev[i].start != ev[j].start {
			return ev[i].start < ev[j].start
		}
		return ev[i].index < ev[j].index
	})
	return out, ev
}
