package perf

import (
	"cmp"
	"math"
	"slices"

	"github.com/ptscope/ptscope/internal/kineto"
)

// KernelOp is one row of the kernel table by kernel and launching
// operator, the plugin's "Kernel Properties + Op Name" view: kernels
// grouped by name, the operator that launched them, grid, block,
// registers per thread and shared memory. Means are weighted by duration,
// a kernel without the value counting as 0, as in Kernel and the plugin.
type KernelOp struct {
	Name     string `json:"name"`
	Operator string `json:"operator"` // "" when no operator launched it
	// Grid and Block are [x, y, z]; zeros when the trace does not say.
	Grid               [3]int32 `json:"grid"`
	Block              [3]int32 `json:"block"`
	RegistersPerThread int32    `json:"registers_per_thread"`
	SharedMemoryBytes  int32    `json:"shared_memory_bytes"`
	Calls              int      `json:"calls"`
	TotalNS            int64    `json:"total_ns"`
	MeanNS             int64    `json:"mean_ns"`
	MinNS              int64    `json:"min_ns"`
	MaxNS              int64    `json:"max_ns"`
	MeanBlocksPerSM    float64  `json:"mean_blocks_per_sm"`
	MeanOccupancyRatio float64  `json:"mean_occupancy_ratio"`
	TensorCore         bool     `json:"tensor_core"`
	// OperatorTensorCoreEligible: the operator could use tensor cores.
	OperatorTensorCoreEligible bool `json:"operator_tensor_core_eligible"`
}

// kernelOpKey identifies a KernelOp row.
type kernelOpKey struct {
	name, op    string
	grid, block [3]int32
	regs, smem  int32
}

// kernelOpAcc is a KernelOp row being summed.
type kernelOpAcc struct {
	KernelOp
	bw, ow wsum // blocks per SM × time, occupancy (%) × time
}

// kernelOps groups the owned kernels by name, launching op and launch
// configuration.
func kernelOps(g *graph) map[kernelOpKey]*kernelOpAcc {
	ev := g.ev
	rows := map[kernelOpKey]*kernelOpAcc{}
	for _, i := range g.gpu {
		if ev.Kind[i] != kineto.KindKernel || !g.owned(i) {
			continue
		}
		info := g.t.GPU[ev.Aux[i]]
		k := kernelOpKey{name: g.t.Strings[ev.Name[i]], grid: info.Grid, block: info.Block, regs: info.Registers,
			smem: info.SharedMem}
		if o := g.owner[i]; o >= 0 {
			k.op = g.t.Name(int(o))
		}
		a := rows[k]
		if a == nil {
			a = &kernelOpAcc{KernelOp: KernelOp{Name: k.name, Operator: k.op, Grid: k.grid, Block: k.block,
				RegistersPerThread: k.regs, SharedMemoryBytes: k.smem, MinNS: math.MaxInt64,
				TensorCore: g.isTC(ev.Name[i]), OperatorTensorCoreEligible: tcEligibleOps[k.op]}}
			rows[k] = a
		}
		d := ev.Dur[i]
		a.Calls++
		a.TotalNS += d
		a.MinNS = min(a.MinNS, d)
		a.MaxNS = max(a.MaxNS, d)
		if info.BlocksPerSM > 0 {
			a.bw.add(fixed(float64(info.BlocksPerSM)), d)
		}
		if info.Occupancy >= 0 {
			a.ow.add(fixed(float64(info.Occupancy)), d)
		}
	}
	return rows
}

// addKernelOps merges a window's rows into dst.
func addKernelOps(dst, src map[kernelOpKey]*kernelOpAcc) {
	for k, r := range src {
		x := dst[k]
		if x == nil {
			dst[k] = r
			continue
		}
		x.Calls += r.Calls
		x.TotalNS += r.TotalNS
		x.MinNS = min(x.MinNS, r.MinNS)
		x.MaxNS = max(x.MaxNS, r.MaxNS)
		x.bw.merge(r.bw)
		x.ow.merge(r.ow)
	}
}

// kernelOpRows finishes the rows, by total time, then name, operator and
// configuration.
func kernelOpRows(rows map[kernelOpKey]*kernelOpAcc) []KernelOp {
	out := make([]KernelOp, 0, len(rows))
	for _, a := range rows {
		if a.Calls > 0 {
			a.MeanNS = a.TotalNS / int64(a.Calls)
		}
		if a.TotalNS > 0 {
			a.MeanBlocksPerSM = a.bw.value() / float64(a.TotalNS)
			a.MeanOccupancyRatio = a.ow.value() / 100 / float64(a.TotalNS)
		}
		out = append(out, a.KernelOp)
	}
	slices.SortFunc(out, func(a, b KernelOp) int {
		return cmp.Or(cmp.Compare(b.TotalNS, a.TotalNS), cmp.Compare(a.Name, b.Name), cmp.Compare(a.Operator, b.Operator),
			slices.Compare(a.Grid[:], b.Grid[:]), slices.Compare(a.Block[:], b.Block[:]),
			cmp.Compare(a.RegistersPerThread, b.RegistersPerThread), cmp.Compare(a.SharedMemoryBytes, b.SharedMemoryBytes))
	})
	return out
}
