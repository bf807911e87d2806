package perf

import (
	"fmt"
	"sort"
	"strings"

	"github.com/ptscope/ptscope/internal/kineto"
)

// GPU holds one device's metrics over the steps' span. Utilisation counts
// compute kernels only: communication kernels (NCCL), which mostly wait for
// other ranks, and copies are not compute.
type GPU struct {
	Device                 int     `json:"device"`
	Name                   string  `json:"name,omitempty"`
	MemoryBytes            int64   `json:"memory_bytes,omitempty"`
	ComputeCapability      string  `json:"compute_capability,omitempty"`
	Streams                int     `json:"streams"`
	KernelNS               int64   `json:"compute_total_ns"` // compute kernels' durations during the steps, summed
	UtilizationRatio       float64 `json:"utilization_ratio"`
	SMEfficiencyRatio      float64 `json:"sm_efficiency_ratio"`
	AchievedOccupancyRatio float64 `json:"achieved_occupancy_ratio"`
	TensorCoreRatio        float64 `json:"tensor_core_ratio"`
	Idle                   Idle    `json:"idle"`
}

// UtilPoint is the compute-busy fraction of one device over one time bucket.
type UtilPoint struct {
	Device           int     `json:"device"`
	StartTimeNS      int64   `json:"start_ns"`
	DurationNS       int64   `json:"duration_ns"`
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

// devWork is one device's GPU work, split by role.
type devWork struct {
	device              int
	events              []int32 // every GPU event, sorted by start
	compute, comm, copy spans   // unions of compute kernels, communication kernels, memcpy/memset
	streams             map[int32]bool
	sm                  []smEdge
	occW                wsum  // occupancy (%) × time, in the steps
	occDur              int64 // time with an occupancy
	kernel, tc          int64
}

// deviceWork groups the GPU events by device; compute-kernel statistics
// are clipped to the steps' windows (slots, sorted and disjoint).
func deviceWork(g *graph, ro *roles, slots spans) map[int]*devWork {
	ev := g.ev
	devs := map[int]*devWork{}
	// every device of the whole trace: one may be idle through a window
	for _, d := range g.win.devices {
		devs[d] = &devWork{device: d, streams: map[int32]bool{}}
	}
	for k, i := range g.gpu {
		info := g.t.GPU[ev.Aux[i]]
		d := int(info.Device)
		a := devs[d]
		if a == nil {
			a = &devWork{device: d, streams: map[int32]bool{}}
			devs[d] = a
		}
		a.events = append(a.events, i)
		if g.owned(i) {
			a.streams[info.Stream] = true
		}
		ks, ke := ev.TS[i], ev.End(int(i))
		switch {
		case ev.Kind[i] != kineto.KindKernel:
			a.copy = append(a.copy, span{ks, ke})
			continue
		case ro.commKernel[k]:
			a.comm = append(a.comm, span{ks, ke})
			continue
		}
		a.compute = append(a.compute, span{ks, ke})
		tc := g.isTC(ev.Name[i])
		slots.clip(ks, ke, func(cs, ce int64) {
			if info.BlocksPerSM > 0 {
				q := int64(fixed(float64(info.BlocksPerSM)))
				a.sm = append(a.sm, smEdge{cs, q}, smEdge{ce, -q})
			}
			if info.Occupancy >= 0 {
				a.occW.add(fixed(float64(info.Occupancy)), ce-cs)
				a.occDur += ce - cs
			}
			a.kernel += ce - cs
			if tc {
				a.tc += ce - cs
			}
		})
	}
	for _, a := range devs {
		a.compute, a.comm, a.copy = union(a.compute), union(a.comm), union(a.copy)
	}
	return devs
}

// gpuParts computes per-device utilisation sums (the union of compute
// kernels over the steps' windows), idle time, SM efficiency, occupancy
// and tensor-core time over the window's steps (slots); gpuRows makes the
// metrics of the whole trace from their sums.
func gpuParts(g *graph, devs map[int]*devWork, slots spans) (map[int]*devPart, int64) {
	out := map[int]*devPart{}
	for d, a := range devs {
		x := &devPart{kernel: a.kernel, tc: a.tc, occW: a.occW, occDur: a.occDur, streams: a.streams}
		if len(slots) > 0 {
			x.inSlots = intersect(a.compute, slots).total()
			x.sm = smEfficiency(a.sm)
		}
		x.idle, x.head, x.tail = deviceIdle(g, a, slots)
		out[d] = x
	}
	return out, slots.total()
}

func gpuRows(f *Facts, devs map[int]*devPart, idle map[int]Idle, total int64) []GPU {
	var out []GPU
	for d, a := range devs {
		x := GPU{Device: d, KernelNS: a.kernel, Streams: len(a.streams)}
		if total > 0 {
			x.UtilizationRatio = float64(a.inSlots) / float64(total)
			x.SMEfficiencyRatio = a.sm.value() / float64(total)
		}
		if a.occDur > 0 {
			x.AchievedOccupancyRatio = a.occW.value() / 100 / float64(a.occDur)
		}
		if a.kernel > 0 {
			x.TensorCoreRatio = float64(a.tc) / float64(a.kernel)
		}
		if d >= 0 && d < len(f.meta.Devices) {
			p := f.meta.Devices[d]
			x.Name, x.MemoryBytes = p.Name, p.TotalGlobalMem
			x.ComputeCapability = fmt.Sprintf("%d.%d", p.ComputeMajor, p.ComputeMinor)
		}
		x.Idle = idle[d]
		if x.Idle.SpanNS > 0 {
			x.Idle.IdleRatio = float64(x.Idle.IdleNS) / float64(x.Idle.SpanNS)
		}
		out = append(out, x)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Device < out[j].Device })
	return out
}

// smEdge is where a kernel's blocks per SM (v, fixed point) start or end.
type smEdge struct {
	t int64
	v int64
}

// smEfficiency integrates min(Σ blocks per SM of running kernels, 1) over
// time, exactly (fixed point).
func smEfficiency(edges []smEdge) wsum {
	sort.Slice(edges, func(i, j int) bool { return edges[i].t < edges[j].t })
	var sum wsum
	var level int64
	for i := 0; i < len(edges); i++ {
		if i > 0 && level > 0 {
			sum.add(uint64(min(level, fixOne)), edges[i].t-edges[i-1].t)
		}
		level += edges[i].v
	}
	return sum
}

// utilTimeline makes the compute-busy fraction of each device per bucket
// (utilParts' sums): the bucket is the smallest power of ten microseconds
// giving at most 100 buckets over the steps. base makes times absolute.
func utilTimeline(util map[int][]int64, tl timelineSpec, base int64) []UtilPoint {
	if tl.e <= tl.s {
		return nil
	}
	ids := make([]int, 0, len(util))
	for d := range util {
		ids = append(ids, d)
	}
	sort.Ints(ids)
	var out []UtilPoint
	for _, d := range ids {
		v := util[d]
		for b, t := 0, tl.s; t < tl.e; b, t = b+1, t+tl.bucket {
			te := min(t+tl.bucket, tl.e)
			out = append(out, UtilPoint{Device: d, StartTimeNS: base + t, DurationNS: te - t, UtilizationRatio: float64(v[b]) / float64(te-t)})
		}
	}
	return out
}
