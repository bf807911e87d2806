package perf

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/ptscope/ptscope/internal/kineto"
)

// MemoryOp is one row of the TensorBoard plugin's memory statistics
// table (memory_parser.py), from the [memory] events of profile_memory=True
// traces: per operator name and device, what its calls allocated and freed
// (an event belongs to the innermost operator on its thread whose span
// holds it). Self counts the events of the operator itself; the others add
// those of the operators it called.
type MemoryOp struct {
	Operator string `json:"operator"`
	Device   string `json:"device"` // "GPU0", "CPU"
	Calls    int    `json:"calls"`  // calls of the operator (all of them, as the plugin)
	// Allocations and AllocatedBytes count the allocations; IncreaseBytes
	// is allocated minus freed bytes (the plugin's "size increase").
	Allocations        int   `json:"allocations"`
	AllocatedBytes     int64 `json:"allocated_bytes"`
	IncreaseBytes      int64 `json:"increase_bytes"`
	SelfAllocations    int   `json:"self_allocations"`
	SelfAllocatedBytes int64 `json:"self_allocated_bytes"`
	SelfIncreaseBytes  int64 `json:"self_increase_bytes"`
	// PeakAllocatedBytes is the most memory allocated on the device at any
	// of these events (Total Allocated): how close the operator took the
	// device to its peak.
	PeakAllocatedBytes int64 `json:"peak_allocated_bytes"`
}

// isOperator reports whether event o is an operator of the plugin's
// tables: a cpu_op that is not one of torch's annotations (older traces
// write ProfilerStep#N, Optimizer and DataLoader spans as cpu_op).
func isOperator(g *graph, o int32) bool {
	return g.ev.Kind[o] == kineto.KindCPUOp && g.class(o)&ncAnnotation == 0
}

type memOpKey struct {
	op  string
	dev string
}

// memoryOps attributes the owned memory events to the operators of g's
// trace and sums them by operator name and device.
func memoryOps(g *graph) map[memOpKey]*MemoryOp {
	ev := g.ev
	rows := map[memOpKey]*MemoryOp{}
	mem := g.t.Memory
	if len(mem) == 0 {
		return rows
	}
	// the memory events of each thread, by time
	byThread := map[int64][]int32{}
	for k, m := range mem {
		if m.DeviceType != 0 && m.DeviceType != 1 {
			continue
		}
		tk := threadKey(m.PID, m.TID)
		byThread[tk] = append(byThread[tk], int32(k))
	}
	// the threads' ops, in g.order (per thread, parents first)
	ops := map[int64][]int32{}
	for _, o := range g.order {
		tk := threadKey(ev.PID[o], ev.TID[o])
		if _, ok := byThread[tk]; ok {
			ops[tk] = append(ops[tk], o)
		}
	}
	// rows by (name id, device) while summing
	byID := map[uint64]*MemoryOp{}
	row := func(o int32, m kineto.MemoryEvent) *MemoryOp {
		dev := int64(-1) // CPU
		if m.DeviceType == 1 {
			dev = int64(m.DeviceID)
		}
		k := uint64(g.ev.Name[o])<<32 | uint64(uint32(dev))
		r := byID[k]
		if r == nil {
			d := "CPU"
			if dev >= 0 {
				d = fmt.Sprintf("GPU%d", dev)
			}
			r = &MemoryOp{Operator: g.t.Name(int(o)), Device: d}
			byID[k] = r
			rows[memOpKey{r.Operator, d}] = r
		}
		return r
	}
	for tk, list := range byThread {
		sortRuns(list, func(a, b int32) int { return cmp.Compare(mem[a].TS, mem[b].TS) }, slices.SortStableFunc)
		thread := ops[tk]
		var stack []int32
		next := 0
		for _, k := range list {
			m := mem[k]
			for next < len(thread) && ev.TS[thread[next]] <= m.TS {
				o := thread[next]
				for len(stack) > 0 && ev.End(int(stack[len(stack)-1])) <= ev.TS[o] {
					stack = stack[:len(stack)-1]
				}
				stack = append(stack, o)
				next++
			}
			for len(stack) > 0 && ev.End(int(stack[len(stack)-1])) <= m.TS {
				stack = stack[:len(stack)-1]
			}
			if len(stack) == 0 { // memory events are owned by one window only
				continue
			}
			top := stack[len(stack)-1]
			if !isOperator(g, top) {
				continue // the plugin counts events of operators only
			}
			for o, self := top, true; o >= 0; o, self = g.parent[o], false {
				if !isOperator(g, o) {
					continue
				}
				r := row(o, m)
				r.IncreaseBytes += m.Bytes
				r.PeakAllocatedBytes = max(r.PeakAllocatedBytes, m.TotalAllocated)
				if self {
					r.SelfIncreaseBytes += m.Bytes
				}
				if m.Bytes > 0 {
					r.Allocations++
					r.AllocatedBytes += m.Bytes
					if self {
						r.SelfAllocations++
						r.SelfAllocatedBytes += m.Bytes
					}
				}
			}
		}
	}
	return rows
}

// memoryOpCalls counts the owned calls of each operator name (rows of
// other windows need them too).
func memoryOpCalls(g *graph) map[string]int {
	calls := map[string]int{}
	if !g.t.Meta.ProfileMemory && len(g.t.Memory) == 0 {
		return calls
	}
	byID := make([]int32, len(g.t.Strings))
	for _, o := range g.order {
		if isOperator(g, o) && g.owned(o) {
			byID[g.ev.Name[o]]++
		}
	}
	for id, n := range byID {
		if n > 0 {
			calls[g.t.Strings[id]] = int(n)
		}
	}
	return calls
}

// addMemoryOps merges a window's rows into dst.
func addMemoryOps(dst, src map[memOpKey]*MemoryOp) {
	for k, r := range src {
		x := dst[k]
		if x == nil {
			dst[k] = r
			continue
		}
		x.Allocations += r.Allocations
		x.AllocatedBytes += r.AllocatedBytes
		x.IncreaseBytes += r.IncreaseBytes
		x.SelfAllocations += r.SelfAllocations
		x.SelfAllocatedBytes += r.SelfAllocatedBytes
		x.SelfIncreaseBytes += r.SelfIncreaseBytes
		x.PeakAllocatedBytes = max(x.PeakAllocatedBytes, r.PeakAllocatedBytes)
	}
}

// finishMemoryOps lists the rows by allocated bytes, with the calls.
func finishMemoryOps(rows map[memOpKey]*MemoryOp, calls map[string]int) []MemoryOp {
	out := make([]MemoryOp, 0, len(rows))
	for _, r := range rows {
		if r.Allocations == 0 && r.IncreaseBytes == 0 {
			continue
		}
		r.Calls = calls[r.Operator]
		out = append(out, *r)
	}
	slices.SortFunc(out, func(a, b MemoryOp) int {
		return cmp.Or(cmp.Compare(b.AllocatedBytes, a.AllocatedBytes), cmp.Compare(a.Operator, b.Operator), cmp.Compare(a.Device, b.Device))
	})
	return out
}
