package snapshot

import (
	"fmt"
	"math"

	"github.com/ptscope/ptscope/internal/pickle"
	"github.com/ptscope/ptscope/internal/spillmem"
)

// Malformed records. A field of the wrong type is read as 0 and a value that
// cannot be right is kept as it is, so that a snapshot with a few damaged
// entries is still analysed; each is counted (Trace.Invalid,
// Snapshot.InvalidSegments) with the first described, for a finding. A
// snapshot where most entries are malformed is refused: its numbers would
// mean nothing.

// maxEntrySize is the largest size an entry or a segment can have: more
// than any device holds (the largest GPUs hold a few hundred GiB), and far
// enough from 2^63 that sums of such sizes cannot wrap.
const maxEntrySize = 16 << 40

// validate counts the invalid entries of t, whose entry i is row rowOf(i)
// of the builder's columns: those the builder saw with a field of the wrong
// type, a size of 0 or below on an allocation, free or segment entry, and a
// time before the previous entry's (the allocator appends in time order).
// Impossible numbers are neutralised besides, so that no sum over the
// trace wraps or runs away: a size above maxEntrySize, or whose block
// would run past the end of the address space, is read as 0; an alloc at
// an address that an earlier alloc of the trace still holds (no free
// between) is read as an entry of unknown action (the allocator never
// hands out one address twice: 10M such allocs made a 4.77 GiB peak).
func (b *builder) validate(t *Trace, rowOf func(int) int) {
	state := map[uint64]blockState{} // what the trace did last at each block address
	// what describes the impossible value of entry i, if any (formatted
	// for the first invalid entry only: a hostile trace has millions)
	var what func() string
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
		what = nil
		if a >= ActionAlloc && a <= ActionSegmentUnmap {
			switch sz, addr := t.Size[i], t.Addr[i]; {
			case sz > maxEntrySize:
				what = func() string { return fmt.Sprintf("%s of size %d, more than any device holds (read as 0)", a, sz) }
				t.Size[i] = 0
			case sz > 0 && addr > math.MaxUint64-uint64(sz):
				what = func() string {
					return fmt.Sprintf("%s of %d bytes at %#x runs past the end of the address space (read as size 0)", a, sz, addr)
				}
				t.Size[i] = 0
			}
		}
		if a == ActionAlloc || a == ActionFreeRequested || a == ActionFreeCompleted {
			addr := t.Addr[i]
			st := state[addr]
			next, bad := st.after(a)
			switch {
			case what != nil:
			case bad:
				what = func() string {
					return fmt.Sprintf("%s at %#x, which the trace %s before with no %s between (read as an unknown action)", a, addr, st.did(), st.between())
				}
				t.Action[i] = ActionUnknown
			default:
				state[addr] = next
			}
		}
		sizeBad := a >= ActionAlloc && a <= ActionSegmentUnmap && t.Size[i] <= 0
		timeBad := t.HasTime && i > 0 && t.TimeUS[i] < t.TimeUS[i-1]
		if !found && !sizeBad && !timeBad && what == nil {
			continue
		}
		what := what
		t.Invalid.add(i, func() string {
			where := fmt.Sprintf("device_traces[%d][%d]: ", t.Device, i)
			switch {
			case found:
				return where + fieldNames[br.field] + " is a " + kindName(br.kind)
			case what != nil:
				return where + what()
			case sizeBad:
				return where + fmt.Sprintf("%s of size %d", a, t.Size[i])
			}
			return where + fmt.Sprintf("time_us %d is before the previous entry's %d", t.TimeUS[i], t.TimeUS[i-1])
		})
	}
}

// blockState is what a trace did last at a block address. The allocator
// hands an address out once until it is freed, and frees it once (a
// free_requested, then a free_completed, or a free_completed alone): an
// alloc at an address it holds, or a second free, cannot be (10M allocs at
// one address made a 4.77 GiB peak; frees of one unknown address, each an
// allocation from before the recording, would add up the same way).
type blockState uint8

const (
	unseen    blockState = iota
	allocated            // alloc
	requested            // free_requested
	freed                // free_completed
)

// after returns the state after action a, and whether a is impossible.
func (s blockState) after(a Action) (blockState, bool) {
	switch a {
	case ActionAlloc:
		return allocated, s == allocated || s == requested
	case ActionFreeRequested:
		return requested, s == requested || s == freed
	}
	return freed, s == freed
}

func (s blockState) did() string {
	switch s {
	case allocated:
		return "allocated"
	case requested:
		return "requested to free"
	}
	return "freed"
}

func (s blockState) between() string {
	if s == allocated || s == requested {
		return "free"
	}
	return "alloc"
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
// type, its size is negative or above maxEntrySize, or its blocks add up to
// more than its size (the cached free bytes would then exceed what is
// reserved); impossible sizes are read as 0, blocks past the segment's size
// are dropped.
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
		return
	}
	if g.TotalSize > maxEntrySize || g.TotalSize > 0 && g.Address > math.MaxUint64-uint64(g.TotalSize) {
		ts := g.TotalSize
		iv.add(-1, func() string {
			return fmt.Sprintf("segments[%d]: total_size %d at %#x is more than a device holds (read as 0)", i, ts, g.Address)
		})
		g.TotalSize, g.Blocks = 0, nil
		return
	}
	for _, sz := range []struct {
		name string
		n    *int64
	}{{"allocated_size", &g.AllocatedSize}, {"active_size", &g.ActiveSize}, {"requested_size", &g.RequestedSize}} {
		if *sz.n > g.TotalSize {
			name, n, ts := sz.name, *sz.n, g.TotalSize
			iv.add(-1, func() string {
				return fmt.Sprintf("segments[%d]: %s %d is more than its total_size %d (read as the total)", i, name, n, ts)
			})
			*sz.n = g.TotalSize
		}
	}
	var sum int64
	for j, blk := range g.Blocks {
		if blk.Size > g.TotalSize-sum {
			ts := g.TotalSize
			iv.add(-1, func() string {
				return fmt.Sprintf("segments[%d]: blocks[%d] ends past the segment's total_size %d (it and the blocks after it dropped)", i, j, ts)
			})
			g.Blocks = g.Blocks[:j]
			break
		}
		sum += max(blk.Size, 0)
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
