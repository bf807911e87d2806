package perf

import (
	"sort"
	"strings"

	"github.com/ptscope/ptscope/internal/kineto"
)

// Comm summarises communication on one rank: NCCL kernels (by name, by the
// collective arguments Kineto copies onto them, or by an nccl:* enclosing
// op) and record_param_comms ops.
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
	Bytes   int64  `json:"bytes"`
}

// commEvent is one communication kernel, for matching across ranks.
type commEvent struct {
	name       string
	pg         string
	seq        int64
	start, end int64 // absolute ns (baseTimeNanoseconds + ts)
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
	if o := g.owner[i]; o >= 0 && isCommOpName(g.t.Name(int(o))) {
		return strings.TrimPrefix(strings.TrimPrefix(g.t.Name(int(o)), "nccl:"), "gloo:"), 0, "", seq
	}
	// ncclDevKernel_AllReduce_Sum_f32_RING_LL(...) / ncclKernel_AllReduce_RING_LL_Sum_float(...)
	k = strings.TrimPrefix(strings.TrimPrefix(k, "ncclDevKernel_"), "ncclKernel_")
	if p := strings.IndexAny(k, "_("); p > 0 {
		k = k[:p]
	}
	return strings.ToLower(k), 0, "", seq
}

func commStats(g *graph, r *roles) (Comm, []commEvent) {
	ev := g.ev
	var out Comm
	rows := map[string]*Collective{}
	var events []commEvent
	base := g.t.Meta.BaseTimeNS
	for k, i := range g.gpu {
		if !r.commKernel[k] {
			continue
		}
		out.Kernels++
		out.KernelNS += ev.Dur[i]
		name, bytes, pg, seq := collectiveName(g, int(i))
		c := rows[name]
		if c == nil {
			c = &Collective{Name: name}
			rows[name] = c
		}
		c.Calls++
		c.TotalNS += ev.Dur[i]
		c.Bytes += bytes
		events = append(events, commEvent{name: name, pg: pg, seq: seq, start: base + ev.TS[i], end: base + ev.End(int(i))})
	}
	for i := 0; i < ev.Len(); i++ {
		if ev.Kind[i] == kineto.KindCPUOp && g.t.Name(i) == "record_param_comms" {
			out.RecordParamComm++
		}
	}
	if out.KernelNS > 0 {
		// only GPU comm kernels count here, not the host ops in r.comm
		var ks spans
		for k, i := range g.gpu {
			if r.commKernel[k] {
				ks = append(ks, span{ev.TS[i], ev.End(int(i))})
			}
		}
		comm := union(ks)
		ov := intersect(comm, r.kernel).total()
		if t := comm.total(); t > 0 {
			out.OverlapRatio = float64(ov) / float64(t)
			out.ExposedNS = t - ov
		}
	}
	for _, c := range rows {
		out.Collectives = append(out.Collectives, *c)
	}
	sort.Slice(out.Collectives, func(i, j int) bool {
		a, b := out.Collectives[i], out.Collectives[j]
		if a.TotalNS != b.TotalNS {
			return a.TotalNS > b.TotalNS
		}
		return a.Name < b.Name
	})
	return out, events
}
