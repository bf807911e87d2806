package memory

import (
	"math/bits"
	"sort"

	"github.com/ptscope/ptscope/internal/snapshot"
)

// Fragmentation describes the final segments of a device: how much of what
// the allocator holds is really used, and how the free part is cut up. The
// at-peak fields come from the replay (zero without history).
type Fragmentation struct {
	ReservedBytes      int64   `json:"reserved_bytes"`
	AllocatedBytes     int64   `json:"allocated_bytes"`      // active_allocated block bytes
	RequestedBytes     int64   `json:"requested_bytes"`      // bytes the program asked for in those blocks
	PendingFreeBytes   int64   `json:"pending_free_bytes"`   // freed, waiting on other streams (record_stream)
	CachedFreeBytes    int64   `json:"cached_free_bytes"`    // inactive blocks: reusable without cudaMalloc
	RoundingWasteBytes int64   `json:"rounding_waste_bytes"` // AllocatedBytes - RequestedBytes
	LargestFreeBytes   int64   `json:"largest_free_bytes"`   // largest inactive block anywhere
	EfficiencyAtEnd    float64 `json:"efficiency_at_end_ratio"`
	// EfficiencyAtPeak is allocated / reserved when allocated peaked, and
	// CachedFreeAtPeakBytes reserved minus active then.
	EfficiencyAtPeak      float64      `json:"efficiency_at_peak_ratio"`
	CachedFreeAtPeakBytes int64        `json:"cached_free_at_peak_bytes"`
	SegmentCount          int          `json:"segment_count"`
	ExpandableCount       int          `json:"expandable_segment_count"`
	Pools                 []PoolFree   `json:"pools"`
	Segments              []SegmentUse `json:"segments"`           // largest first
	ActiveSizes           []Bucket     `json:"active_block_sizes"` // histogram of active block sizes
	FreeSizes             []Bucket     `json:"free_block_sizes"`   // histogram of free block sizes
}

// PoolFree is the free space of one (pool, stream, segment type).
type PoolFree struct {
	Pool             [2]int64 `json:"pool_id"`
	Stream           int64    `json:"stream"`
	Type             string   `json:"segment_type"`
	ReservedBytes    int64    `json:"reserved_bytes"`
	FreeBytes        int64    `json:"free_bytes"`
	LargestFreeBytes int64    `json:"largest_free_bytes"`
}

// SegmentUse is one row of the per-segment table.
type SegmentUse struct {
	Address          uint64   `json:"address"`
	SizeBytes        int64    `json:"size_bytes"`
	Type             string   `json:"segment_type"`
	Stream           int64    `json:"stream"`
	Pool             [2]int64 `json:"pool_id"`
	AllocatedBytes   int64    `json:"allocated_bytes"` // active blocks, pending frees included
	FreeBytes        int64    `json:"free_bytes"`
	LargestFreeBytes int64    `json:"largest_free_bytes"`
	Blocks           int      `json:"blocks"`
	Expandable       bool     `json:"expandable"`
}

// Bucket counts blocks whose size is in [LoBytes, HiBytes).
type Bucket struct {
	LoBytes int64 `json:"lo_bytes"`
	HiBytes int64 `json:"hi_bytes"`
	Count   int   `json:"count"`
	Bytes   int64 `json:"bytes"`
}

// NewFragmentation measures device d's final segments.
func NewFragmentation(s *snapshot.Snapshot, d int) *Fragmentation {
	f := &Fragmentation{Pools: []PoolFree{}, Segments: []SegmentUse{}, ActiveSizes: []Bucket{}, FreeSizes: []Bucket{}}
	pools := map[PoolFree]*PoolFree{}
	var active, free []int64
	for _, g := range s.DeviceSegments(d) {
		f.SegmentCount++
		if g.Expandable {
			f.ExpandableCount++
		}
		u := SegmentUse{Address: g.Address, SizeBytes: g.TotalSize, Type: g.Type, Stream: s.Streams[g.Stream],
			Pool: g.Pool, Blocks: len(g.Blocks), Expandable: g.Expandable}
		key := PoolFree{Pool: g.Pool, Stream: s.Streams[g.Stream], Type: g.Type}
		p := pools[key]
		if p == nil {
			k := key
			p = &k
			pools[key] = p
		}
		p.ReservedBytes += g.TotalSize
		f.ReservedBytes += g.TotalSize
		for _, b := range g.Blocks {
			switch b.State {
			case snapshot.BlockActiveAllocated:
				f.AllocatedBytes += b.Size
				f.RequestedBytes += b.RequestedSize
				u.AllocatedBytes += b.Size
				active = append(active, b.Size)
			case snapshot.BlockActivePendingFree:
				f.PendingFreeBytes += b.Size
				u.AllocatedBytes += b.Size
			default:
				f.CachedFreeBytes += b.Size
				u.FreeBytes += b.Size
				p.FreeBytes += b.Size
				u.LargestFreeBytes = max(u.LargestFreeBytes, b.Size)
				p.LargestFreeBytes = max(p.LargestFreeBytes, b.Size)
				f.LargestFreeBytes = max(f.LargestFreeBytes, b.Size)
				free = append(free, b.Size)
			}
		}
		f.Segments = append(f.Segments, u)
	}
	f.RoundingWasteBytes = f.AllocatedBytes - f.RequestedBytes
	if f.ReservedBytes > 0 {
		f.EfficiencyAtEnd = float64(f.AllocatedBytes) / float64(f.ReservedBytes)
	}
	for _, p := range pools {
		f.Pools = append(f.Pools, *p)
	}
	sort.Slice(f.Pools, func(i, j int) bool {
		a, b := f.Pools[i], f.Pools[j]
		if a.ReservedBytes != b.ReservedBytes {
			return a.ReservedBytes > b.ReservedBytes
		}
		if a.Stream != b.Stream {
			return a.Stream < b.Stream
		}
		if a.Type != b.Type {
			return a.Type < b.Type
		}
		return a.Pool[0] < b.Pool[0] || (a.Pool[0] == b.Pool[0] && a.Pool[1] < b.Pool[1])
	})
	sort.Slice(f.Segments, func(i, j int) bool {
		if f.Segments[i].SizeBytes != f.Segments[j].SizeBytes {
			return f.Segments[i].SizeBytes > f.Segments[j].SizeBytes
		}
		return f.Segments[i].Address < f.Segments[j].Address
	})
	f.ActiveSizes = histogram(active)
	f.FreeSizes = histogram(free)
	return f
}

// histogram buckets sizes by powers of two, from 512 B.
func histogram(sizes []int64) []Bucket {
	if len(sizes) == 0 {
		return []Bucket{}
	}
	byExp := map[int]*Bucket{}
	lo, hi := 64, 0
	for _, sz := range sizes {
		e := 9 // 512 B
		if sz > 512 {
			e = 63 - bits.LeadingZeros64(uint64(sz))
		}
		b := byExp[e]
		if b == nil {
			b = &Bucket{LoBytes: 1 << e, HiBytes: 1 << (e + 1)}
			if e == 9 {
				b.LoBytes = 0
			}
			byExp[e] = b
		}
		b.Count++
		b.Bytes += sz
		lo, hi = min(lo, e), max(hi, e)
	}
	var out []Bucket
	for e := lo; e <= hi; e++ {
		if b := byExp[e]; b != nil {
			out = append(out, *b)
		} else {
			out = append(out, Bucket{LoBytes: 1 << e, HiBytes: 1 << (e + 1)})
		}
	}
	return out
}
