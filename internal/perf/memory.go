package perf

import (
	"fmt"
	"slices"
	"sort"
)

// Memory is the allocator curve from [memory] events (profile_memory=True).
type Memory struct {
	PeakAllocatedBytes int64          `json:"peak_allocated_bytes"` // max over GPUs
	PeakReservedBytes  int64          `json:"peak_reserved_bytes"`
	Devices            []MemoryDevice `json:"devices"`
	OOMEvents          int            `json:"oom_events"`
}

// MemoryDevice is the curve of one device ("GPU0", "CPU").
type MemoryDevice struct {
	Device              string        `json:"device"`
	DeviceID            int           `json:"device_id"`
	IsGPU               bool          `json:"is_gpu"`
	Events              int           `json:"events"`
	PeakAllocatedBytes  int64         `json:"peak_allocated_bytes"`
	PeakAllocatedTimeNS int64         `json:"peak_allocated_time_ns"`
	PeakReservedBytes   int64         `json:"peak_reserved_bytes"`
	PeakReservedTimeNS  int64         `json:"peak_reserved_time_ns"`
	CapacityBytes       int64         `json:"capacity_bytes,omitempty"`
	Curve               []MemoryPoint `json:"curve"` // min/max-decimated; every peak is kept
}

// MemoryPoint is one sample of the curve.
type MemoryPoint struct {
	TimeNS         int64 `json:"time_ns"`
	AllocatedBytes int64 `json:"allocated_bytes"`
	ReservedBytes  int64 `json:"reserved_bytes"`
}

// memoryCurve builds per-device curves; base makes times absolute. Curves
// are decimated to about maxPoints (min/max preserving per bucket).
func memoryCurve(g *graph, base int64, maxPoints int) Memory {
	var out Memory
	type key struct {
		typ int8
		id  int32
	}
	devs := map[key]*MemoryDevice{}
	mem := g.t.Memory
	idx := make([]int, len(mem))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return mem[idx[a]].TS < mem[idx[b]].TS })
	for _, j := range idx {
		m := mem[j]
		if m.OOM {
			out.OOMEvents++
		}
		if m.DeviceType != 0 && m.DeviceType != 1 {
			continue
		}
		k := key{m.DeviceType, m.DeviceID}
		d := devs[k]
		if d == nil {
			d = &MemoryDevice{DeviceID: int(m.DeviceID), IsGPU: m.DeviceType == 1}
			if d.IsGPU {
				d.Device = fmt.Sprintf("GPU%d", m.DeviceID)
				if int(m.DeviceID) < len(g.t.Meta.Devices) && m.DeviceID >= 0 {
					d.CapacityBytes = g.t.Meta.Devices[m.DeviceID].TotalGlobalMem
				}
			} else {
				d.Device = "CPU"
			}
			devs[k] = d
		}
		d.Events++
		t := base + m.TS
		if m.TotalAllocated > d.PeakAllocatedBytes {
			d.PeakAllocatedBytes, d.PeakAllocatedTimeNS = m.TotalAllocated, t
		}
		if m.TotalReserved > d.PeakReservedBytes {
			d.PeakReservedBytes, d.PeakReservedTimeNS = m.TotalReserved, t
		}
		if m.TotalAllocated >= 0 {
			d.Curve = append(d.Curve, MemoryPoint{TimeNS: t, AllocatedBytes: m.TotalAllocated, ReservedBytes: m.TotalReserved})
		}
	}
	for _, d := range devs {
		d.Curve = decimate(d.Curve, maxPoints)
		if d.IsGPU {
			out.PeakAllocatedBytes = max(out.PeakAllocatedBytes, d.PeakAllocatedBytes)
			out.PeakReservedBytes = max(out.PeakReservedBytes, d.PeakReservedBytes)
		}
		out.Devices = append(out.Devices, *d)
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

// decimate keeps, per bucket, the points of minimum and maximum allocation
// and of maximum reservation, in time order, so that both peaks survive.
func decimate(p []MemoryPoint, maxPoints int) []MemoryPoint {
	if maxPoints <= 0 || len(p) <= maxPoints {
		return p
	}
	buckets := max(maxPoints/3, 1)
	per := (len(p) + buckets - 1) / buckets
	out := make([]MemoryPoint, 0, 3*buckets+3)
	for s := 0; s < len(p); s += per {
		e := min(s+per, len(p))
		lo, hi, res := s, s, s
		for i := s; i < e; i++ {
			if p[i].AllocatedBytes < p[lo].AllocatedBytes {
				lo = i
			}
			if p[i].AllocatedBytes > p[hi].AllocatedBytes {
				hi = i
			}
			if p[i].ReservedBytes > p[res].ReservedBytes {
				res = i
			}
		}
		keep := []int{lo, hi, res}
		slices.Sort(keep)
		for k, i := range keep {
			if k == 0 || i != keep[k-1] {
				out = append(out, p[i])
			}
		}
	}
	return out
}

// stepStartAllocated returns, per step, the GPU memory allocated (summed
// over GPUs) by the last [memory] event before the step's host start, or -1
// when there is none.
func stepStartAllocated(g *graph, steps []stepSpan) []int64 {
	out := make([]int64, len(steps))
	mem := g.t.Memory
	idx := make([]int, 0, len(mem))
	for i, m := range mem {
		if m.DeviceType == 1 && m.TotalAllocated >= 0 {
			idx = append(idx, i)
		}
	}
	sort.SliceStable(idx, func(a, b int) bool { return mem[idx[a]].TS < mem[idx[b]].TS })
	last := map[int32]int64{}
	k := 0
	for s, st := range steps {
		for ; k < len(idx) && mem[idx[k]].TS < st.hostS; k++ {
			m := mem[idx[k]]
			last[m.DeviceID] = m.TotalAllocated
		}
		if len(last) == 0 {
			out[s] = -1
			continue
		}
		var sum int64
		for _, v := range last {
			sum += v
		}
		out[s] = sum
	}
	return out
}
