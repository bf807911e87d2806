package memory

import (
	"math/bits"
	"sort"

	"github.com/ptscope/ptscope/internal/snapshot"
)

// Fragmentation describes the final segments of a device: how much of what
// the allocator holds is really used, and how the free part is cut up.
type Fragmentation struct {
	Reserved        int64
	Allocated       int64   // active_allocated block bytes
	Requested       int64   // bytes the program asked for in those blocks
	PendingFree     int64   // freed but waiting on other streams (record_stream)
	CachedFree      int64   // inactive blocks: reusable without cudaMalloc
	RoundingWaste   int64   // Allocated - Requested
	LargestFree     int64   // largest inactive block anywhere
	Efficiency      float64 // Allocated / Reserved (0 when nothing is reserved)
	Pools           []PoolFree
	Segments        []SegmentUse
	ActiveSizes     []Bucket // histogram of active block sizes
	FreeSizes       []Bucket // histogram of free block sizes
	SegmentCount    int
	ExpandableCount int
}

// PoolFree is the free space of one (pool, stream, segment type).
type PoolFree struct {
	Pool        [2]int64
	Stream      int64
	Type        string
	Reserved    int64
	Free        int64
	LargestFree int64
}

// SegmentUse is one row of the per-segment table.
type SegmentUse struct {
	Address     uint64
	Size        int64
	Type        string
	Stream      int64
	Pool        [2]int64
	Allocated   int64
	Free        int64
	LargestFree int64
	Blocks      int
	Expandable  bool
}

// Bucket counts blocks in [Lo, Hi).
type Bucket struct {
	Lo, Hi int64
	Count  int
	Bytes  int64
}

// NewFragmentation measures device d's final segments.
func NewFragmentation(s *snapshot.Snapshot, d int) *Fragmentation {
	f := &Fragmentation{}
	pools := map[PoolFree]*PoolFree{}
	var active, free []int64
	for _, g := range s.DeviceSegments(d) {
		f.SegmentCount++
		if g.Expandable {
			f.ExpandableCount++
		}
		u := SegmentUse{Address: g.Address, Size: g.TotalSize, Type: g.Type, Stream: s.Streams[g.Stream],
			Pool: g.Pool, Blocks: len(g.Blocks), Expandable: g.Expandable}
		key := PoolFree{Pool: g.Pool, Stream: s.Streams[g.Stream], Type: g.Type}
		p := pools[key]
		if p == nil {
			k := key
			p = &k
			pools[key] = p
		}
		p.Reserved += g.TotalSize
		f.Reserved += g.TotalSize
		for _, b := range g.Blocks {
			switch b.State {
			case snapshot.BlockActiveAllocated:
				f.Allocated += b.Size
				f.Requested += b.RequestedSize
				u.Allocated += b.Size
				active = append(active, b.Size)
			case snapshot.BlockActivePendingFree:
				f.PendingFree += b.Size
				u.Allocated += b.Size
			default:
				f.CachedFree += b.Size
				u.Free += b.Size
				p.Free += b.Size
				u.LargestFree = max(u.LargestFree, b.Size)
				p.LargestFree = max(p.LargestFree, b.Size)
				f.LargestFree = max(f.LargestFree, b.Size)
				free = append(free, b.Size)
			}
		}
		f.Segments = append(f.Segments, u)
	}
	f.RoundingWaste = f.Allocated - f.Requested
	if f.Reserved > 0 {
		f.Efficiency = float64(f.Allocated) / float64(f.Reserved)
	}
	for _, p := range pools {
		f.Pools = append(f.Pools, *p)
	}
	sort.Slice(f.Pools, func(i, j int) bool {
		a, b := f.Pools[i], f.Pools[j]
		if a.Reserved != b.Reserved {
			return a.Reserved > b.Reserved
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
		if f.Segments[i].Size != f.Segments[j].Size {
			return f.Segments[i].Size > f.Segments[j].Size
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
		return nil
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
			b = &Bucket{Lo: 1 << e, Hi: 1 << (e + 1)}
			if e == 9 {
				b.Lo = 0
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
			out = append(out, Bucket{Lo: 1 << e, Hi: 1 << (e + 1)})
		}
	}
	return out
}
