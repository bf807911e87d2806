// Package timeline holds the level-of-detail indexes behind ptscope's
// interactive views (ptscope serve and --html files). They are built once
// from a model and then answer each viewport in time proportional to what
// it shows, never to the size of the input:
//
//   - min/max pyramids over the allocated and reserved curves (Pyramid);
//   - per-viewport block selection for the memory timeline: every
//     allocation at least one pixel wide and tall is returned on its own,
//     with its stacking offsets (memory_viz's layout: each new allocation
//     on top, blocks above a freed one moving down) computed here; the rest
//     is the per-column band under the allocated curve (Memory.View);
//   - allocator-state checkpoints every K entries, so that the state at any
//     entry is a checkpoint plus at most K replayed entries (Memory.LiveAt,
//     Memory.State); the same live sets answer hit tests (Memory.Hit);
//   - the same idea for profiler traces (Trace).
//
// Nothing here parses or renders: it reads snapshot and memory models and
// returns data.
package timeline

import (
	"cmp"
	"slices"
	"sync"

	"github.com/ptscope/ptscope/internal/memory"
	"github.com/ptscope/ptscope/internal/snapshot"
)

// Block is one allocation of the timeline. Blocks are numbered in stacking
// order: those alive before the recording first, then by allocation entry.
// Entries are trace indices; a block is allocated after entry Start
// through entry End-1 (memory_allocated counts it), and active (allocated
// or pending free) through ActiveEnd-1.
type Block struct {
	Start     int32 // alloc entry; -1 before the recording
	End       int32 // free_requested entry; Len() if never freed
	ActiveEnd int32 // free_completed entry; Len() if never completed
	Size      int64 // block bytes
	Alloc     int32 // index into the replay's Allocs
}

// Memory is the level-of-detail index of one device of a snapshot.
type Memory struct {
	Snap   *snapshot.Snapshot
	Device int
	Replay *memory.Replay
	Phases *memory.Phases // may be nil
	Stacks *memory.StackInfo

	Blocks    []Block
	Allocated *Pyramid
	Reserved  *Pyramid

	n         int
	cats      []memory.Category // per block: its allocation's category (views read it for every block drawn)
	bySize    []sized           // the blocks, largest first
	freeAt    []int32           // per entry: the block whose allocated life ends there, or -1
	ckpt      checkpoints
	segEvents []segEvent
	keyTable  keys
}

// sized is a block as the viewport selection scans it (by size, in one
// pass over memory).
type sized struct {
	size       int64
	start, end int32
	id         int32
}

// Len is the number of trace entries.
func (m *Memory) Len() int { return m.n }

// NewMemory indexes device d of s from its replay (with categories) and
// phases (nil when unknown).
func NewMemory(s *snapshot.Snapshot, d int, r *memory.Replay, ph *memory.Phases) *Memory {
	n := r.Timeline.Len()
	m := &Memory{Snap: s, Device: d, Replay: r, Phases: ph, n: n}
	// The parts below depend only on the replay and the blocks: they are
	// built at once (serve answers nothing about an input before its
	// timeline exists).
	var wg sync.WaitGroup
	wg.Go(func() {
		m.Stacks = memory.NewStackInfo(s)
		m.Allocated = NewPyramid(r.Timeline.Allocated)
		m.Reserved = NewPyramid(r.Timeline.Reserved)
		m.segEvents = segmentEvents(s.Trace(d))
	})
	defer wg.Wait()

	// Stacking order: blocks alive before the recording at the bottom (in
	// the replay's order), then by allocation entry. The replay appends
	// recorded allocations in entry order, so a stable partition is enough.
	m.Blocks = make([]Block, 0, len(r.Allocs))
	end := func(i int32) int32 {
		if i < 0 {
			return int32(n)
		}
		return i
	}
	for pass := 0; pass < 2; pass++ {
		for k := range r.Allocs {
			a := &r.Allocs[k]
			if (a.AllocIdx < 0) != (pass == 0) {
				continue
			}
			b := Block{Start: a.AllocIdx, End: end(a.FreeReqIdx), ActiveEnd: end(a.FreeIdx), Size: a.Size, Alloc: int32(k)}
			if a.FreeReqIdx >= 0 && a.FreeIdx < 0 {
				b.ActiveEnd = int32(n) // freed by the program, still pending at the dump
			}
			if b.ActiveEnd < b.End {
				b.ActiveEnd = b.End
			}
			if b.Start < 0 {
				b.Start = -1
			}
			m.Blocks = append(m.Blocks, b)
		}
	}
	wg.Go(func() {
		m.bySize = make([]sized, len(m.Blocks))
		m.cats = make([]memory.Category, len(m.Blocks))
		for i, b := range m.Blocks {
			m.bySize[i] = sized{b.Size, b.Start, b.End, int32(i)}
			m.cats[i] = r.Allocs[b.Alloc].Category
		}
		slices.SortFunc(m.bySize, func(a, b sized) int {
			if a.size != b.size {
				return cmp.Compare(b.size, a.size)
			}
			return cmp.Compare(a.id, b.id)
		})
	})
	m.freeAt = make([]int32, n)
	for i := range m.freeAt {
		m.freeAt[i] = -1
	}
	for id := range m.Blocks {
		if e := m.Blocks[id].End; e < int32(n) {
			m.freeAt[e] = int32(id)
		}
	}
	m.ckpt = buildCheckpoints(m)
	return m
}

// Category is the category of block id's allocation.
func (m *Memory) Category(id int) memory.Category { return m.cats[id] }

// Alloc returns the replay's allocation behind block id.
func (m *Memory) Alloc(id int) *memory.Alloc { return &m.Replay.Allocs[m.Blocks[id].Alloc] }

// Time returns the time of entry i in Unix nanoseconds (0 when the
// snapshot has no times or i is out of range).
func (m *Memory) Time(i int) int64 {
	t := m.Replay.Timeline.TimeUS
	if i < 0 || i >= len(t) {
		return 0
	}
	return t[i] * 1000
}

// AllocatedAt is memory_allocated after entry i (before the first entry
// for i < 0).
func (m *Memory) AllocatedAt(i int) int64 {
	if i < 0 || m.n == 0 {
		return m.Replay.Baseline.Allocated
	}
	return m.Replay.Timeline.Allocated[min(i, m.n-1)]
}

// PhaseAt is the phase of entry i.
func (m *Memory) PhaseAt(i int) memory.Phase {
	if m.Phases == nil || i < 0 || i >= len(m.Phases.Of) {
		return memory.PhaseUnknown
	}
	return m.Phases.Of[i]
}

// StepAt is the index into Phases.Steps of the step holding entry i, or -1.
func (m *Memory) StepAt(i int) int {
	if m.Phases == nil || i < 0 || i >= len(m.Phases.StepOf) {
		return -1
	}
	return int(m.Phases.StepOf[i])
}
