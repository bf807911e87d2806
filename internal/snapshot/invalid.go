package snapshot

import (
	"fmt"

	"github.com/ptscope/ptscope/internal/pickle"
	"github.com/ptscope/ptscope/internal/spillmem"
)

// Malformed records. A field of the wrong type is read as 0 and a value that
// cannot be right is kept as it is, so that a snapshot with a few damaged
// entries is still analysed; each is counted (Trace.Invalid,
// Snapshot.InvalidSegments) with the first described, for a finding. A
// snapshot where most entries are malformed is refused: its numbers would
// mean nothing.

// validate counts the invalid entries of t, whose entry i is row rowOf(i)
// of the builder's columns: those the builder saw with a field of the wrong
// type, a size of 0 or below on an allocation, free or segment entry, and a
// time before the previous entry's (the allocator appends in time order).
func (b *builder) validate(t *Trace, rowOf func(int) int) {
	if len(b.bad) > 0 && b.badAt == nil {
		b.badAt = make(map[int]badRow, len(b.bad))
		for _, br := range b.bad {
			b.badAt[br.row] = br
		}
	}
	for i := range t.Action {
		spillmem.Poll(t.arena, i)
		var br badRow
		found := false
		if b.badAt != nil {
			br, found = b.badAt[rowOf(i)]
		}
		a := t.Action[i]
		sizeBad := a >= ActionAlloc && a <= ActionSegmentUnmap && t.Size[i] <= 0
		timeBad := t.HasTime && i > 0 && t.TimeUS[i] < t.TimeUS[i-1]
		if !found && !sizeBad && !timeBad {
			continue
		}
		t.Invalid.add(i, func() string {
			where := fmt.Sprintf("device_traces[%d][%d]: ", t.Device, i)
			switch {
			case found:
				return where + fieldNames[br.field] + " is a " + kindName(br.kind)
			case sizeBad:
				return where + fmt.Sprintf("%s of size %d", a, t.Size[i])
			}
			return where + fmt.Sprintf("time_us %d is before the previous entry's %d", t.TimeUS[i], t.TimeUS[i-1])
		})
	}
}

// kindName names a pickle kind as Python would.
func kindName(k pickle.Kind) string {
	if k == pickle.KindFloat {
		return "float"
	}
	return k.String()
}

// refuseInvalid returns an error when most records of the snapshot are
// invalid.
func (b *builder) refuseInvalid() error {
	s := b.s
	n, bad, first := 0, 0, ""
	for _, t := range s.Traces {
		n += t.Len() + t.Invalid.Dropped
		bad += t.Invalid.Count
		if first == "" {
			first = t.Invalid.First
		}
	}
	if bad > 0 && 2*bad > n {
		return fmt.Errorf("%d of %d trace entries are invalid (first: %s): not a snapshot PyTorch wrote", bad, n, first)
	}
	nseg := s.InvalidSegments.Dropped
	for _, g := range s.Segments {
		nseg += 1 + len(g.Blocks)
	}
	if iv := s.InvalidSegments; iv.Count > 0 && 2*iv.Count > nseg {
		return fmt.Errorf("%d of %d segments and blocks are invalid (first: %s): not a snapshot PyTorch wrote", iv.Count, nseg, iv.First)
	}
	return nil
}

// checkSegment counts segment i when a size or an address has the wrong
// type, or its size is negative.
func (b *builder) checkSegment(i int, d *pickle.Dict, g *Segment) {
	iv := &b.s.InvalidSegments
	for _, key := range []string{"total_size", "address"} {
		if v, ok := d.Get(key); ok {
			if _, isInt := v.Uint(); !isInt {
				iv.add(-1, func() string { return fmt.Sprintf("segments[%d]: %s is a %s", i, key, kindName(v.Kind())) })
				return
			}
		}
	}
	if g.TotalSize < 0 {
		iv.add(-1, func() string { return fmt.Sprintf("segments[%d]: total_size is %d", i, g.TotalSize) })
	}
}

// checkBlock counts block j of segment i when its size has the wrong type
// or is negative.
func (b *builder) checkBlock(i, j int, rb *rawBlock) {
	if !rb.sizeBad && rb.Size >= 0 {
		return
	}
	b.s.InvalidSegments.add(-1, func() string {
		if rb.sizeBad {
			return fmt.Sprintf("segments[%d].blocks[%d]: size is a %s", i, j, kindName(rb.sizeKind))
		}
		return fmt.Sprintf("segments[%d].blocks[%d]: size is %d", i, j, rb.Size)
	})
}
