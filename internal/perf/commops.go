package perf

import (
	"cmp"
	"math"
	"slices"
)

// CommOp is one row of the TensorBoard plugin's communication operations
// table (its distributed view): the collectives run through nccl:* and
// gloo:* operators, by name. A call's latency runs from the operator's
// start to the end of its last kernel (the union of the operator's span and
// its kernels'); its transfer time, found across ranks, is each kernel
// shortened to the shortest duration any rank took for it (the rest is
// waiting for the slowest rank).
type CommOp struct {
	Name  string `json:"name"`
	Calls int    `json:"calls"`
	// Bytes sums each call's size: its Input Dims × Input type, as the
	// plugin sizes them, else In msg nelems × dtype of the collective
	// arguments under it.
	Bytes         int64 `json:"bytes"`
	MeanBytes     int64 `json:"mean_bytes"`
	LatencyNS     int64 `json:"latency_ns"` // the union of the calls' latencies
	MeanLatencyNS int64 `json:"mean_latency_ns"`
	// BandwidthBytesPerS is Bytes / LatencyNS, the algorithm bandwidth
	// the plugin's numbers give.
	BandwidthBytesPerS float64 `json:"bandwidth_bytes_per_s"`
	// TransferNS is the union of the calls' transfer time (plugin's "data
	// transfer time"), with several ranks of one job whose calls match
	// one for one (else -1).
	TransferNS        int64   `json:"transfer_ns"`
	MeanTransferNS    int64   `json:"mean_transfer_ns"`
	TransferBytesPerS float64 `json:"transfer_bandwidth_bytes_per_s"`
}

// commOpCall is one call of a communication operator, kept for the
// cross-rank transfer time: its ranges (the operator's span, then its
// kernels' by start) in absolute ns.
type commOpCall struct {
	name   string
	bytes  int64
	ranges []span
}

// commOps lists the owned outermost nccl:*/gloo:* operators in start order
// with their kernels (the communication kernels owned by them or their
// descendants).
func commOps(g *graph) []commOpCall {
	ev := g.ev
	base := g.t.Meta.BaseTimeNS
	isComm := func(o int32) bool { return g.class(o)&ncCommOp != 0 }
	outer := func(o int32) bool {
		for p := g.parent[o]; p >= 0; p = g.parent[p] {
			if isComm(p) {
				return false
			}
		}
		return true
	}
	outerOf := func(o int32) int32 {
		for ; o >= 0; o = g.parent[o] {
			if isComm(o) && outer(o) {
				return o
			}
		}
		return -1
	}
	kernels := map[int32][]int32{}
	for _, i := range g.gpu {
		if o := outerOf(g.owner[i]); o >= 0 {
			kernels[o] = append(kernels[o], i)
		}
	}
	// sizes from the collective arguments under a call (record_param_comms)
	argBytes := map[int32]int64{}
	for _, o := range g.order {
		if a := ev.Aux[o]; a >= 0 && g.t.Ops[a].Comm >= 0 {
			if p := outerOf(g.parent[o]); p >= 0 && argBytes[p] == 0 {
				c := g.t.Comms[g.t.Ops[a].Comm]
				argBytes[p] = max(c.InNelems, c.OutNelems) * dtypeSize[g.t.Strings[c.Dtype]]
			}
		}
	}
	var out []commOpCall
	for _, o := range g.order {
		if !isComm(o) || !g.owned(o) || !outer(o) {
			continue
		}
		c := commOpCall{name: g.t.Name(int(o)), bytes: inputBytes(g, int(o)), ranges: []span{{base + ev.TS[o], base + ev.End(int(o))}}}
		if c.bytes == 0 {
			c.bytes = argBytes[o]
		}
		for _, i := range kernels[o] {
			c.ranges = append(c.ranges, span{base + ev.TS[i], base + ev.End(int(i))})
		}
		out = append(out, c)
	}
	slices.SortStableFunc(out, func(a, b commOpCall) int { return cmp.Compare(a.ranges[0].S, b.ranges[0].S) })
	return out
}

// commOpRows sums the calls by name.
func commOpRows(calls []commOpCall) []CommOp {
	by := map[string]*CommOp{}
	lat := map[string]spans{}
	for _, c := range calls {
		r := by[c.name]
		if r == nil {
			r = &CommOp{Name: c.name, TransferNS: -1, MeanTransferNS: -1}
			by[c.name] = r
		}
		r.Calls++
		r.Bytes += c.bytes
		lat[c.name] = append(lat[c.name], c.ranges...)
	}
	out := make([]CommOp, 0, len(by))
	for n, r := range by {
		r.LatencyNS = union(lat[n]).total()
		r.MeanBytes = r.Bytes / int64(r.Calls)
		r.MeanLatencyNS = r.LatencyNS / int64(r.Calls)
		if r.LatencyNS > 0 {
			r.BandwidthBytesPerS = float64(r.Bytes) / float64(r.LatencyNS) * 1e9
		}
		out = append(out, *r)
	}
	slices.SortFunc(out, func(a, b CommOp) int {
		return cmp.Or(cmp.Compare(b.LatencyNS, a.LatencyNS), cmp.Compare(a.Name, b.Name))
	})
	return out
}

// commTransfer fills the transfer time of the ranks' communication
// operators (the plugin's _process_distributed_profiles): when every rank
// has the same calls with the same number of ranges, each range's
// transfer is its last stretch as long as the shortest duration any rank
// took for it.
func commTransfer(ranks []Rank) {
	if len(ranks) < 2 {
		return
	}
	n := len(ranks[0].commCalls)
	for _, r := range ranks {
		if len(r.commCalls) != n || n == 0 {
			return
		}
	}
	for i := 0; i < n; i++ {
		k := len(ranks[0].commCalls[i].ranges)
		for _, r := range ranks {
			if c := r.commCalls[i]; len(c.ranges) != k || c.name != ranks[0].commCalls[i].name {
				return
			}
		}
	}
	real := make([]map[string]spans, len(ranks))
	for ri := range ranks {
		real[ri] = map[string]spans{}
	}
	for i := 0; i < n; i++ {
		for j := range ranks[0].commCalls[i].ranges {
			shortest := int64(math.MaxInt64)
			for _, r := range ranks {
				s := r.commCalls[i].ranges[j]
				shortest = min(shortest, s.E-s.S)
			}
			for ri, r := range ranks {
				s := r.commCalls[i].ranges[j]
				name := r.commCalls[i].name
				real[ri][name] = append(real[ri][name], span{s.E - shortest, s.E})
			}
		}
	}
	for ri := range ranks {
		r := &ranks[ri]
		for k := range r.CommOps {
			op := &r.CommOps[k]
			op.TransferNS = union(real[ri][op.Name]).total()
			op.MeanTransferNS = op.TransferNS / int64(op.Calls)
			if op.TransferNS > 0 {
				op.TransferBytesPerS = float64(op.Bytes) / float64(op.TransferNS) * 1e9
			}
		}
	}
}
