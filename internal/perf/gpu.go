package perf

import (
	"fmt"
	"sort"
	"strings"

	"github.com/ptscope/ptscope/internal/kineto"
)

// GPU holds the plugin's GPU metrics for one device over the steps' span.
type GPU struct {
	Device                 int     `json:"device"`
	Name                   string  `json:"name,omitempty"`
	MemoryBytes            int64   `json:"memory_bytes,omitempty"`
	ComputeCapability      string  `json:"compute_capability,omitempty"`
	KernelNS               int64   `json:"kernel_ns"`
	UtilizationRatio       float64 `json:"utilization_ratio"`
	SMEfficiencyRatio      float64 `json:"sm_efficiency_ratio"`
	AchievedOccupancyRatio float64 `json:"achieved_occupancy_ratio"`
	TensorCoreRatio        float64 `json:"tensor_core_ratio"`
}

// UtilPoint is the busy fraction of one device over one time bucket.
type UtilPoint struct {
	Device           int     `json:"device"`
	StartNS          int64   `json:"start_ns"` // relative to the first step's start
	UtilizationRatio float64 `json:"utilization_ratio"`
}

// IsTensorCoreKernel reports whether a kernel name is a tensor-core kernel:
// the plugin's list (from NVIDIA PyProf) brought up to date for Ampere and
// Hopper (tensorop, wgmma/gmma, 16816/1688 MMA shapes, sm80/sm90 half and
// bf16 gemm families, fp8, tf32). fp32 SIMT kernels (simt, sgemm, f32f32 xmma
// without tf32, ffma) are not.
func IsTensorCoreKernel(name string) bool {
	n := strings.ToLower(name)
	// explicit fp32 CUDA-core kernels
	if strings.Contains(n, "simt") || strings.Contains(n, "_ffma") {
		return false
	}
	if strings.Contains(n, "f32f32") && !strings.Contains(n, "tf32") {
		return false
	}
	for _, k := range tcMarkers {
		if strings.Contains(n, k) {
			return true
		}
	}
	// cuBLAS/cuBLASLt/CUTLASS gemms with half, bf16, fp8, tf32 or int8 operands
	if strings.Contains(n, "gemm") || strings.Contains(n, "fmha") || strings.Contains(n, "flash") {
		for _, t := range []string{"bf16", "bfloat16", "f16", "fp16", "half", "e4m3", "e5m2", "fp8", "tf32", "i8i8", "s8s8"} {
			if strings.Contains(n, t) {
				return true
			}
		}
	}
	return false
}

var tcMarkers = []string{
	// the plugin's list
	"h884", "s884", "h1688", "s1688", "hmma", "i8816", "16816", "dgrad_1x1_stride_2x2",
	"first_layer_wgrad_kernel", "conv1x1", "conv2d_c1_k1", "direct_group", "xmma_implicit_gemm",
	"xmma_sparse_conv", "xmma_warp_specialized_implicit_gemm", "xmma_gemm", "xmma_sparse_gemm", "c1688",
	// Ampere and Hopper
	"tensorop", "wgmma", "gmma_", "imma", "16832", "1684", "hgemm", "s161616", "wmma",
	"sm90_xmma", "sm80_xmma", "sm89_xmma", "sm100_xmma", "nvjet",
}

// gpuMetrics computes per-device utilisation, estimated SM efficiency,
// achieved occupancy and tensor-core share over [s, e).
func gpuMetrics(g *graph, s, e int64) []GPU {
	ev := g.ev
	type acc struct {
		busy         spans
		sm           []smEdge
		occW, occDur float64
		kernel, tc   int64
		device       int
	}
	devs := map[int]*acc{}
	for _, i := range g.gpu {
		if ev.Kind[i] != kineto.KindKernel {
			continue
		}
		info := g.t.GPU[ev.Aux[i]]
		d := int(info.Device)
		a := devs[d]
		if a == nil {
			a = &acc{device: d}
			devs[d] = a
		}
		ks, ke := ev.TS[i], ev.End(int(i))
		cs, ce := max(ks, s), min(ke, e)
		if cs >= ce {
			continue
		}
		a.busy = append(a.busy, span{cs, ce})
		dur := float64(ce - cs)
		if info.BlocksPerSM > 0 {
			a.sm = append(a.sm, smEdge{cs, float64(info.BlocksPerSM)}, smEdge{ce, -float64(info.BlocksPerSM)})
		}
		if info.Occupancy >= 0 {
			a.occW += float64(info.Occupancy) / 100 * dur
			a.occDur += dur
		}
		a.kernel += ce - cs
		if g.isTC(ev.Name[i]) {
			a.tc += ce - cs
		}
	}
	var out []GPU
	for d, a := range devs {
		x := GPU{Device: d, KernelNS: a.kernel}
		if e > s {
			x.UtilizationRatio = float64(union(a.busy).total()) / float64(e-s)
			x.SMEfficiencyRatio = smEfficiency(a.sm) / float64(e-s)
		}
		if a.occDur > 0 {
			x.AchievedOccupancyRatio = a.occW / a.occDur
		}
		if a.kernel > 0 {
			x.TensorCoreRatio = float64(a.tc) / float64(a.kernel)
		}
		if d >= 0 && d < len(g.t.Meta.Devices) {
			p := g.t.Meta.Devices[d]
			x.Name, x.MemoryBytes = p.Name, p.TotalGlobalMem
			x.ComputeCapability = fmt.Sprintf("%d.%d", p.ComputeMajor, p.ComputeMinor)
		}
		out = append(out, x)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Device < out[j].Device })
	return out
}

type smEdge struct {
	t int64
	v float64
}

// smEfficiency integrates min(Σ blocks per SM of running kernels, 1) over time.
func smEfficiency(edges []smEdge) float64 {
	sort.Slice(edges, func(i, j int) bool { return edges[i].t < edges[j].t })
	var sum, level float64
	for i := 0; i < len(edges); i++ {
		if i > 0 && level > 0 {
			sum += min(level, 1) * float64(edges[i].t-edges[i-1].t)
		}
		level += edges[i].v
		if level < 1e-9 {
			level = 0
		}
	}
	return sum
}

// utilTimeline buckets kernel busy time per device: the bucket is the
// smallest power of ten microseconds giving at most 100 buckets.
func utilTimeline(g *graph, s, e int64) []UtilPoint {
	if e <= s {
		return nil
	}
	bucket := int64(1000)
	for (e-s)/bucket > 100 {
		bucket *= 10
	}
	ev := g.ev
	busy := map[int]spans{}
	for _, i := range g.gpu {
		if ev.Kind[i] != kineto.KindKernel {
			continue
		}
		d := int(g.t.GPU[ev.Aux[i]].Device)
		busy[d] = append(busy[d], span{ev.TS[i], ev.End(int(i))})
	}
	devs := make([]int, 0, len(busy))
	for d := range busy {
		devs = append(devs, d)
	}
	sort.Ints(devs)
	var out []UtilPoint
	for _, d := range devs {
		u := union(busy[d])
		for t := s; t < e; t += bucket {
			te := min(t+bucket, e)
			out = append(out, UtilPoint{Device: d, StartNS: t - s, UtilizationRatio: float64(u.overlap(t, te)) / float64(te-t)})
		}
	}
	return out
}
