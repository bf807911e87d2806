package memory

import (
	"testing"

	"github.com/ptscope/ptscope/internal/snapshot"
)

// traceBuilder writes a synthetic device trace for the block model's tests.
type traceBuilder struct {
	s  *snapshot.Snapshot
	tr *snapshot.Trace
}

func newTraceBuilder() *traceBuilder {
	s := &snapshot.Snapshot{Stacks: [][]snapshot.FrameID{{}}, Strings: []string{""}, Streams: []int64{0},
		Traces: []snapshot.Trace{{Device: 0}}}
	s.Settings.MaxSplitSize = -1
	return &traceBuilder{s: s, tr: &s.Traces[0]}
}

func (b *traceBuilder) add(a snapshot.Action, addr uint64, size int64) *traceBuilder {
	tr := b.tr
	tr.Action = append(tr.Action, a)
	tr.Addr = append(tr.Addr, addr)
	tr.Size = append(tr.Size, size)
	tr.Stream = append(tr.Stream, 0)
	tr.TimeUS = append(tr.TimeUS, int64(len(tr.Action)))
	tr.Stack = append(tr.Stack, 0)
	tr.CompileContext = append(tr.CompileContext, 0)
	tr.UserMetadata = append(tr.UserMetadata, 0)
	return b
}

func (b *traceBuilder) alloc(addr uint64, size int64) *traceBuilder {
	return b.add(snapshot.ActionAlloc, addr, size)
}

func (b *traceBuilder) free(addr uint64, size int64) *traceBuilder {
	return b.add(snapshot.ActionFreeRequested, addr, size).add(snapshot.ActionFreeCompleted, addr, size)
}

func (b *traceBuilder) segment(addr uint64, size int64) *traceBuilder {
	return b.add(snapshot.ActionSegmentAlloc, addr, size)
}

// sizes replays the trace and returns each allocation's block size, in the
// order of the trace's allocs.
func (b *traceBuilder) sizes() []int64 {
	r := NewReplay(b.s, 0)
	var out []int64
	for _, a := range r.Allocs {
		if a.AllocIdx >= 0 {
			out = append(out, a.Size)
		}
	}
	return out
}

const (
	mib  = 1 << 20
	base = uint64(0x7f0000000000)
)

// The allocator's split rule for large blocks (c10 should_split): a block
// keeps the whole free block when 1 MiB or less would remain.
func TestBlockSizes(t *testing.T) {
	leak := int64(32_768_000) // the leak trainer's logits: 786,432 B short of 32 MiB
	cases := []struct {
		name string
		b    *traceBuilder
		want []int64
	}{
		{"small requests are rounded", newTraceBuilder().segment(base, 2*mib).alloc(base, 1000).alloc(base+1024, 3*512),
			[]int64{1024, 1536}},
		{"whole fresh segment", newTraceBuilder().segment(base, 32*mib).alloc(base, leak).free(base, leak),
			[]int64{32 * mib}},
		{"split off a 20 MiB segment", newTraceBuilder().segment(base, 20*mib).alloc(base, 4*mib).free(base, 4*mib),
			[]int64{4 * mib}},
		{"exactly 1 MiB left is not split", newTraceBuilder().segment(base, 20*mib).alloc(base, 19*mib).free(base, 19*mib),
			[]int64{20 * mib}},
		{"the next block in use bounds the free block", newTraceBuilder().segment(base, 20*mib).
			alloc(base, 2*mib).alloc(base+2*mib, 10*mib).free(base, 2*mib).
			alloc(base, 1536*1024).free(base, 1536*1024),
			[]int64{2 * mib, 10 * mib, 2 * mib}},
		{"a pending free still bounds it", newTraceBuilder().segment(base, 20*mib).
			alloc(base, 2*mib).alloc(base+2*mib, 10*mib).free(base, 2*mib).
			add(snapshot.ActionFreeRequested, base+2*mib, 10*mib).
			alloc(base, 1536*1024).free(base, 1536*1024).add(snapshot.ActionFreeCompleted, base+2*mib, 10*mib),
			[]int64{2 * mib, 10 * mib, 2 * mib}},
		{"a freed neighbour merges back", newTraceBuilder().segment(base, 20*mib).
			alloc(base, 2*mib).alloc(base+2*mib, 10*mib).free(base, 2*mib).free(base+2*mib, 10*mib).
			alloc(base, 19*mib+512).free(base, 19*mib+512),
			[]int64{2 * mib, 10 * mib, 20 * mib}},
		{"a segment freed and mapped again", newTraceBuilder().segment(base, 20*mib).alloc(base, 4*mib).free(base, 4*mib).
			add(snapshot.ActionSegmentFree, base, 20*mib).segment(base, 4*mib+mib/2).alloc(base, 4*mib).free(base, 4*mib),
			[]int64{4 * mib, 4*mib + mib/2}},
		{"outside any known segment the request stays", newTraceBuilder().alloc(base, leak).free(base, leak),
			[]int64{RoundSize(leak)}},
	}
	for _, c := range cases {
		got := c.b.sizes()
		if len(got) != len(c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
			continue
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("%s: %v, want %v", c.name, got, c.want)
				break
			}
		}
	}

	// max_split_size: a request at or above it is never split.
	b := newTraceBuilder().segment(base, 40*mib).alloc(base, 30*mib).free(base, 30*mib)
	b.s.Settings.MaxSplitSize = 16 * mib
	if got := b.sizes(); got[0] != 40*mib {
		t.Errorf("max_split_size: %v", got)
	}
	// Expandable segments split every block: the rounded request is exact.
	b = newTraceBuilder().segment(base, 32*mib).alloc(base, leak).free(base, leak)
	b.s.Settings.ExpandableSegments = true
	if got := b.sizes(); got[0] != RoundSize(leak) {
		t.Errorf("expandable: %v", got)
	}
}

// The allocated timeline counts the modelled blocks: its peak is what
// max_memory_allocated would say.
func TestBlockSizesPeak(t *testing.T) {
	b := newTraceBuilder().segment(base, 32*mib).alloc(base, 32_768_000).segment(base+32*mib, 2*mib).alloc(base+32*mib, 1000)
	r := NewReplay(b.s, 0)
	if p := r.Timeline.Allocated[len(r.Timeline.Allocated)-1]; p != 32*mib+1024 {
		t.Errorf("allocated %d", p)
	}
}

// BenchmarkBlockSizes models 500,000 large allocations among 2,000 large
// blocks alive at once in 100 segments (a long, large-tensor trace; real
// traces have far fewer large blocks).
func BenchmarkBlockSizes(b *testing.B) {
	tb := newTraceBuilder()
	const segs, perSeg = 100, 20
	for s := 0; s < segs; s++ {
		tb.segment(base+uint64(s)*64*mib, 64*mib)
	}
	slot := func(i int) uint64 { return base + uint64(i/perSeg)*64*mib + uint64(i%perSeg)*3*mib }
	for i := 0; i < segs*perSeg; i++ {
		tb.alloc(slot(i), 2*mib+int64(i%7)*512)
	}
	for k := 0; tb.tr.Len() < 1_000_000; k++ {
		i := (k * 7919) % (segs * perSeg)
		sz := 2*mib + int64(i%7)*512
		tb.free(slot(i), sz)
		tb.alloc(slot(i), sz)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		NewReplay(tb.s, 0)
	}
}
