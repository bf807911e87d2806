// Package snapshot is the typed model of a CUDA caching-allocator snapshot
// (torch.cuda.memory._snapshot / _dump_snapshot): segments and blocks at dump
// time, the per-device trace ring buffers in columns, interned frames and
// stacks, allocator settings and record_function annotations.
//
// Read accepts pickles (Python protocols 2-5, TorchScript's C++ pickler) and
// JSON documents of the same schema, compressed or not, in every variant the
// PyTorch versions since 1.13 write (legacy segment lists, history blocks,
// missing keys, active_awaiting_free).
package snapshot

import (
	"sort"

	"github.com/ptscope/ptscope/internal/spillmem"
)

// Action is what a trace entry records.
type Action uint8

// Trace entry actions (c10 TraceEntry::Action).
const (
	ActionUnknown Action = iota
	ActionAlloc
	ActionFreeRequested
	ActionFreeCompleted
	ActionSegmentAlloc
	ActionSegmentFree
	ActionSegmentMap
	ActionSegmentUnmap
	ActionSnapshot
	ActionOOM
	ActionAnnotate
)

var actionNames = [...]string{"unknown", "alloc", "free_requested", "free_completed", "segment_alloc",
	"segment_free", "segment_map", "segment_unmap", "snapshot", "oom", "annotate"}

func (a Action) String() string {
	if int(a) < len(actionNames) {
		return actionNames[a]
	}
	return "unknown"
}

// ParseAction maps the snapshot's action string to an Action. "free" (the
// merged form MemoryViz uses) counts as free_completed.
func ParseAction(s string) Action {
	switch s {
	case "alloc":
		return ActionAlloc
	case "free_requested":
		return ActionFreeRequested
	case "free_completed", "free":
		return ActionFreeCompleted
	case "segment_alloc":
		return ActionSegmentAlloc
	case "segment_free":
		return ActionSegmentFree
	case "segment_map":
		return ActionSegmentMap
	case "segment_unmap":
		return ActionSegmentUnmap
	case "snapshot":
		return ActionSnapshot
	case "oom":
		return ActionOOM
	case "annotate":
		return ActionAnnotate
	}
	return ActionUnknown
}

// Frame is one stack frame. Python, TorchScript and C++ frames share the shape.
type Frame struct {
	Filename string
	Line     int
	Name     string
}

// FrameID indexes Snapshot.Frames. StackID indexes Snapshot.Stacks; stack 0 is
// the empty stack (no frames recorded).
type (
	FrameID = uint32
	StackID = uint32
)

// Trace is one device's trace ring buffer in chronological order, in columns.
// For ActionOOM entries Addr holds device_free (bytes free on the device) and
// Size the requested bytes.
type Trace struct {
	Device         int
	Action         []Action
	Addr           []uint64
	Size           []int64
	Stream         []uint32 // index into Snapshot.Streams
	TimeUS         []int64  // microseconds since the Unix epoch; 0 if absent
	Stack          []StackID
	CompileContext []uint32 // index into Snapshot.Strings; 0 = none
	UserMetadata   []uint32 // index into Snapshot.Strings; 0 = none
	HasTime        bool     // the entries carry time_us
	// Invalid counts the entries read with a field of the wrong type (kept
	// with 0 for it) or an impossible value (a size of 0 or below, a time
	// before the previous entry's, an unknown action).
	Invalid Invalid

	arena *spillmem.Arena // where growTo places the columns; nil: the heap
}

// Invalid counts malformed records of one kind, and describes the first.
type Invalid struct {
	Count int
	First string // where and what, e.g. "device_traces[0][12]: size is a str"
	Index int    // the first's entry index in its trace; -1 when it is not a kept entry
	// Dropped counts, of Count, the records that were not kept (not a
	// dict, or a second reference to a record already read): the records
	// the input held are the kept ones plus Dropped.
	Dropped int
}

func (v *Invalid) add(index int, where func() string) {
	if v.Count == 0 {
		v.First, v.Index = where(), index
	}
	v.Count++
}

// Len is the number of entries.
func (t *Trace) Len() int { return len(t.Action) }

// Arena is the spill arena holding the columns (ReadOptions); nil when
// they are on the heap.
func (t *Trace) Arena() *spillmem.Arena { return t.arena }

// BlockState is the state of a block at dump time.
type BlockState uint8

// Block states.
const (
	BlockInactive          BlockState = iota // cached free space
	BlockActiveAllocated                     // handed out to a tensor
	BlockActivePendingFree                   // freed by the user, still used by another stream
)

func (s BlockState) String() string {
	switch s {
	case BlockActiveAllocated:
		return "active_allocated"
	case BlockActivePendingFree:
		return "active_pending_free"
	}
	return "inactive"
}

// Block is a piece of a segment at dump time.
type Block struct {
	Address       uint64 // segment address plus the sizes of earlier blocks
	Size          int64  // rounded size
	RequestedSize int64  // what the user asked for; stale for inactive blocks
	State         BlockState
	Stack         StackID
}

// Segment is one cudaMalloc'd (or expandable) region at dump time.
type Segment struct {
	Device        int
	Address       uint64
	TotalSize     int64
	AllocatedSize int64
	ActiveSize    int64
	RequestedSize int64
	Stream        uint32 // index into Snapshot.Streams
	Type          string // "large" or "small"
	Pool          [2]int64
	Expandable    bool
	Stack         StackID
	Blocks        []Block
}

// Annotation is a record_function START or END marker.
type Annotation struct {
	Device int
	Name   string
	Stage  string // "START" or "END"
	TimeUS int64
}

// Setting is one allocator_settings entry, rendered as text.
type Setting struct {
	Key, Value string
}

// Settings are the allocator settings at dump time.
type Settings struct {
	All                []Setting // in file order
	ExpandableSegments bool
	MaxSplitSize       int64 // -1 = unlimited
	Conf               string
	// TraceOverflowed is set when the allocator reported that the ring buffer
	// wrapped (newer PyTorch); OverflowKnown says whether it reported at all.
	TraceOverflowed bool
	OverflowKnown   bool
	TraceMaxEntries int64
}

// Snapshot is a whole allocator snapshot.
type Snapshot struct {
	Segments    []Segment
	Traces      []Trace // indexed by device ordinal
	Settings    Settings
	Annotations []Annotation
	Frames      []Frame
	Stacks      [][]FrameID // innermost frame first; Stacks[0] is empty
	Strings     []string    // Strings[0] is ""
	Streams     []int64     // raw cudaStream_t values; Streams[0] is 0
	Format      string      // e.g. "pickle protocol 4", "json"
	Legacy      bool        // legacy list-of-segments or history-block form
	Warnings    []string
	InputBytes  int64 // decompressed bytes read
	// InvalidSegments counts the segments and blocks read with a field of
	// the wrong type or a negative size.
	InvalidSegments Invalid
	// InvalidStacks counts the stacks longer than the reader keeps (cut to
	// their innermost frames).
	InvalidStacks Invalid

	arena *spillmem.Arena
}

// Arena is the spill arena the trace columns were placed in (ReadOptions),
// for the analyses to place theirs alongside; nil when they are on the heap.
func (s *Snapshot) Arena() *spillmem.Arena { return s.arena }

// StackFrames returns the frames of stack id, innermost first.
func (s *Snapshot) StackFrames(id StackID) []Frame {
	if int(id) >= len(s.Stacks) {
		return nil
	}
	ids := s.Stacks[id]
	out := make([]Frame, len(ids))
	for i, f := range ids {
		out[i] = s.Frames[f]
	}
	return out
}

// Devices lists, in order, the device ordinals that have segments or a trace
// entry other than the "snapshot" marker _snapshot() records on every device.
func (s *Snapshot) Devices() []int {
	seen := map[int]bool{}
	for _, g := range s.Segments {
		seen[g.Device] = true
	}
	for _, t := range s.Traces {
		for _, a := range t.Action {
			if a != ActionSnapshot {
				seen[t.Device] = true
				break
			}
		}
	}
	out := make([]int, 0, len(seen))
	for d := range seen {
		out = append(out, d)
	}
	sort.Ints(out)
	return out
}

// Trace returns the trace of device d (an empty one if none was recorded).
func (s *Snapshot) Trace(d int) *Trace {
	if d >= 0 && d < len(s.Traces) {
		return &s.Traces[d]
	}
	return &Trace{Device: d}
}

// DeviceSegments returns the segments of device d.
func (s *Snapshot) DeviceSegments(d int) []Segment {
	var out []Segment
	for _, g := range s.Segments {
		if g.Device == d {
			out = append(out, g)
		}
	}
	return out
}
