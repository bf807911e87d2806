package memory

// FragOut is the fragmentation part of the JSON document.
type FragOut struct {
	ReservedBytes      int64        `json:"reserved_bytes"`
	AllocatedBytes     int64        `json:"allocated_bytes"`
	RequestedBytes     int64        `json:"requested_bytes"`
	PendingFreeBytes   int64        `json:"pending_free_bytes"`
	CachedFreeBytes    int64        `json:"cached_free_bytes"`
	RoundingWasteBytes int64        `json:"rounding_waste_bytes"`
	LargestFreeBytes   int64        `json:"largest_free_bytes"`
	EndRatio           float64      `json:"efficiency_at_end_ratio"`
	PeakRatio          float64      `json:"efficiency_at_peak_ratio"`
	CachedAtPeakBytes  int64        `json:"cached_free_at_peak_bytes"`
	Segments           int          `json:"segments"`
	ExpandableSegments int          `json:"expandable_segments"`
	Pools              []PoolOut    `json:"pools"`
	SegmentTable       []SegmentOut `json:"segment_table"` // the largest segments (up to 50)
	ActiveSizes        []BucketOut  `json:"active_block_sizes"`
	FreeSizes          []BucketOut  `json:"free_block_sizes"`
}

// PoolOut is one (pool, stream, type) in JSON form.
type PoolOut struct {
	Pool             [2]int64 `json:"pool_id"`
	Stream           int64    `json:"stream"`
	Type             string   `json:"segment_type"`
	ReservedBytes    int64    `json:"reserved_bytes"`
	FreeBytes        int64    `json:"free_bytes"`
	LargestFreeBytes int64    `json:"largest_free_bytes"`
}

// SegmentOut is one row of the per-segment table.
type SegmentOut struct {
	Address          uint64   `json:"address"`
	SizeBytes        int64    `json:"size_bytes"`
	Type             string   `json:"segment_type"`
	Stream           int64    `json:"stream"`
	Pool             [2]int64 `json:"pool_id"`
	AllocatedBytes   int64    `json:"allocated_bytes"`
	FreeBytes        int64    `json:"free_bytes"`
	LargestFreeBytes int64    `json:"largest_free_bytes"`
	Blocks           int      `json:"blocks"`
	Expandable       bool     `json:"expandable"`
}

// BucketOut is a histogram bucket in JSON form.
type BucketOut struct {
	LoBytes int64 `json:"lo_bytes"`
	HiBytes int64 `json:"hi_bytes"`
	Count   int   `json:"count"`
	Bytes   int64 `json:"bytes"`
}

func fragOut(f *Fragmentation, r *Replay, p Peak) FragOut {
	o := FragOut{ReservedBytes: f.Reserved, AllocatedBytes: f.Allocated, RequestedBytes: f.Requested,
		PendingFreeBytes: f.PendingFree, CachedFreeBytes: f.CachedFree, RoundingWasteBytes: f.RoundingWaste,
		LargestFreeBytes: f.LargestFree, EndRatio: f.Efficiency, Segments: f.SegmentCount, ExpandableSegments: f.ExpandableCount}
	if p.ReservedAtPeakBytes > 0 {
		o.PeakRatio = float64(p.AllocatedBytes) / float64(p.ReservedAtPeakBytes)
		o.CachedAtPeakBytes = p.ReservedAtPeakBytes - p.ActiveBytes
	}
	for _, pl := range f.Pools {
		o.Pools = append(o.Pools, PoolOut{pl.Pool, pl.Stream, pl.Type, pl.Reserved, pl.Free, pl.LargestFree})
	}
	for i, g := range f.Segments {
		if i >= 50 {
			break
		}
		o.SegmentTable = append(o.SegmentTable, SegmentOut{g.Address, g.Size, g.Type, g.Stream, g.Pool, g.Allocated, g.Free, g.LargestFree, g.Blocks, g.Expandable})
	}
	for _, b := range f.ActiveSizes {
		o.ActiveSizes = append(o.ActiveSizes, BucketOut{b.Lo, b.Hi, b.Count, b.Bytes})
	}
	for _, b := range f.FreeSizes {
		o.FreeSizes = append(o.FreeSizes, BucketOut{b.Lo, b.Hi, b.Count, b.Bytes})
	}
	return o
}
