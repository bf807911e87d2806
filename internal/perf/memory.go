package perf

import (
	"slices"
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

// decimator thins a memory curve whose points arrive one at a time in
// time order: it keeps, per bucket of points, those of minimum and maximum
// allocation and of maximum reservation, in time order, so that both peaks
// survive. It needs the number of points in advance, which sets the
// buckets.
type decimator struct {
	per         int // points per bucket (0: keep every point)
	lo, hi, res int // positions in the bucket of the kept points
	bucket      []MemoryPoint
	out         []MemoryPoint
}

func newDecimator(n, maxPoints int) decimator {
	if maxPoints <= 0 || n <= maxPoints {
		return decimator{}
	}
	buckets := max(maxPoints/3, 1)
	per := (n + buckets - 1) / buckets
	return decimator{per: per, out: make([]MemoryPoint, 0, 3*buckets+3)}
}

func (d *decimator) add(x MemoryPoint) {
	if d.per == 0 {
		d.out = append(d.out, x)
		return
	}
	b := d.bucket
	if len(b) == 0 {
		d.lo, d.hi, d.res = 0, 0, 0
	} else {
		if x.AllocatedBytes < b[d.lo].AllocatedBytes {
			d.lo = len(b)
		}
		if x.AllocatedBytes > b[d.hi].AllocatedBytes {
			d.hi = len(b)
		}
		if x.ReservedBytes > b[d.res].ReservedBytes {
			d.res = len(b)
		}
	}
	d.bucket = append(b, x)
	if len(d.bucket) == d.per {
		d.flush()
	}
}

func (d *decimator) flush() {
	if len(d.bucket) == 0 {
		return
	}
	keep := []int{d.lo, d.hi, d.res}
	slices.Sort(keep)
	for k, i := range keep {
		if k == 0 || i != keep[k-1] {
			d.out = append(d.out, d.bucket[i])
		}
	}
	d.bucket = d.bucket[:0]
}

// finish returns the kept points (nil when none came).
func (d *decimator) finish() []MemoryPoint {
	d.flush()
	if len(d.out) == 0 {
		return nil
	}
	return d.out
}
