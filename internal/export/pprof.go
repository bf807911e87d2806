package export

import (
	"io"
	"strconv"

	"github.com/ptscope/ptscope/internal/memory"
	"github.com/ptscope/ptscope/internal/snapshot"
)

// PProfSummary says what a pprof export holds.
type PProfSummary struct {
	Event        int    // inuse_* values are what was alive just after this entry
	At           string // the entry described
	InuseBytes   int64  // total of inuse_space: the allocated bytes at Event
	InuseObjects int64
	AllocBytes   int64 // total of alloc_space
	AllocObjects int64
	Samples      int
}

// pprof sample value indexes, in the order of Go heap profiles.
const (
	inuseObjects = iota
	inuseSpace
	allocObjects
	allocSpace
)

// sampleKey groups allocations into one pprof sample: the same stack, the
// same labels and the same block size (so that `pprof -tags` shows sizes,
// as in Go heap profiles).
type sampleKey struct {
	stack    snapshot.StackID
	category memory.Category
	stream   uint32
	meta     uint32
	size     int64
}

// pprofOf builds the memory of m as a pprof heap profile: inuse_space and
// inuse_objects are the allocations alive just after entry `at` (their
// total is the allocated bytes there: at the peak, the peak), alloc_space
// and alloc_objects every allocation the replay knows over the recording
// (those made before it included when they were alive or freed during it).
// Each Python (or C++) frame is a function and a location, leaf first;
// category, stream and module are labels, the block size a numeric label.
func pprofOf(m *Memory, at int, atDesc string) (*pprofProfile, *PProfSummary) {
	s := m.Snap
	sum := &PProfSummary{Event: at, At: atDesc}
	samples := map[sampleKey]*pprofSample{}
	p := &pprofProfile{
		SampleType: []pprofValueType{{"inuse_objects", "count"}, {"inuse_space", "bytes"},
			{"alloc_objects", "count"}, {"alloc_space", "bytes"}},
		DefaultSampleType: "inuse_space",
		PeriodType:        pprofValueType{"space", "bytes"},
		Period:            1,
		Comments: []string{
			"ptscope export pprof: CUDA caching-allocator memory of " + m.Path + ", device " + strconv.Itoa(m.Device),
			"inuse_space/inuse_objects: allocations alive just after " + atDesc,
			"alloc_space/alloc_objects: every allocation known over the recording",
		},
	}
	b := newLocations(s)
	// Samples share their label slices: a snapshot of many stacks and
	// sizes makes tens of thousands of samples.
	type labelsKey struct {
		category     memory.Category
		stream, meta uint32
	}
	labels := map[labelsKey][]pprofLabel{}
	sizes := map[int64][]pprofNumLabel{}
	for k := range m.Replay.Allocs {
		a := &m.Replay.Allocs[k]
		key := sampleKey{a.Stack, a.Category, a.Stream, a.Metadata, a.Size}
		smp := samples[key]
		if smp == nil {
			lk := labelsKey{a.Category, a.Stream, a.Metadata}
			ls, ok := labels[lk]
			if !ok {
				// in key order, as the encoder wants them
				ls = []pprofLabel{{"category", a.Category.String()}}
				if a.Metadata != 0 {
					ls = append(ls, pprofLabel{"module", s.Strings[a.Metadata]})
				}
				ls = append(ls, pprofLabel{"stream", streamName(s, a.Stream)})
				labels[lk] = ls
			}
			nl, ok := sizes[a.Size]
			if !ok {
				nl = []pprofNumLabel{{Key: "bytes", Num: a.Size, Unit: "bytes"}}
				sizes[a.Size] = nl
			}
			smp = &pprofSample{Location: b.stack(a.Stack), Value: make([]int64, 4), Label: ls, NumLabel: nl}
			samples[key] = smp
			p.Sample = append(p.Sample, smp)
		}
		smp.Value[allocObjects]++
		smp.Value[allocSpace] += a.Size
		sum.AllocObjects++
		sum.AllocBytes += a.Size
		if a.Alive(at) {
			smp.Value[inuseObjects]++
			smp.Value[inuseSpace] += a.Size
			sum.InuseObjects++
			sum.InuseBytes += a.Size
		}
	}
	p.Mapping = []*pprofMapping{b.mapping}
	p.Location, p.Function = b.locs, b.funcs
	sum.Samples = len(p.Sample)
	tr := s.Trace(m.Device)
	if tr.HasTime && m.Entries() > 0 {
		t := m.Replay.Timeline.TimeUS
		if at >= 0 {
			p.TimeNanos = t[at] * 1000
		} else {
			p.TimeNanos = t[0] * 1000
		}
		p.DurationNanos = (t[len(t)-1] - t[0]) * 1000
	}
	return p, sum
}

// WritePProf writes the profile of pprofOf gzip-compressed, as pprof reads
// it (the bytes github.com/google/pprof/profile writes for it).
func WritePProf(w io.Writer, m *Memory, at int, atDesc string) (*PProfSummary, error) {
	p, sum := pprofOf(m, at, atDesc)
	return sum, p.writeGzip(w)
}

func streamName(s *snapshot.Snapshot, i uint32) string {
	if int(i) < len(s.Streams) {
		return strconv.FormatInt(s.Streams[i], 10)
	}
	return "0"
}

// locations interns pprof functions and locations: one location per
// snapshot frame, one function per (name, file).
type locations struct {
	s       *snapshot.Snapshot
	byID    map[snapshot.FrameID]uint64
	fnKey   map[[2]string]uint64
	stacks  map[snapshot.StackID][]uint64
	locs    []*pprofLocation
	funcs   []*pprofFunction
	empty   uint64
	mapping *pprofMapping
}

func newLocations(s *snapshot.Snapshot) *locations {
	// One mapping that says the functions are known, so that pprof does not
	// look for a binary to symbolize.
	m := &pprofMapping{ID: 1, File: "python", HasFunctions: true, HasFilenames: true, HasLineNumbers: true}
	return &locations{s: s, mapping: m, byID: map[snapshot.FrameID]uint64{}, fnKey: map[[2]string]uint64{},
		stacks: map[snapshot.StackID][]uint64{}}
}

// function interns a function and returns its ID. Its system name stays
// empty: pprof "demangles" a function whose system name equals its name as
// C++, which strips "<...>" and turns Python's "<module>" into nothing.
func (b *locations) function(name, file string) uint64 {
	k := [2]string{name, file}
	if id := b.fnKey[k]; id != 0 {
		return id
	}
	id := uint64(len(b.funcs) + 1)
	b.funcs = append(b.funcs, &pprofFunction{ID: id, Name: name, Filename: file})
	b.fnKey[k] = id
	return id
}

func (b *locations) location(fn uint64, line int) uint64 {
	id := uint64(len(b.locs) + 1)
	b.locs = append(b.locs, &pprofLocation{ID: id, Mapping: b.mapping.ID, Function: fn, Line: int64(line)})
	return id
}

// stack returns the location IDs of a snapshot stack, leaf first
// (snapshot stacks are innermost first too). A stack without frames gets
// one location that says so, so that its bytes show in every pprof view.
func (b *locations) stack(id snapshot.StackID) []uint64 {
	if ls, ok := b.stacks[id]; ok {
		return ls
	}
	var out []uint64
	if int(id) < len(b.s.Stacks) {
		for _, fid := range b.s.Stacks[id] {
			l := b.byID[fid]
			if l == 0 {
				f := b.s.Frames[fid]
				name := f.Name
				if f.Filename != "" {
					name += " (" + memory.TrimPath(f.Filename) + ")"
				}
				l = b.location(b.function(name, f.Filename), f.Line)
				b.byID[fid] = l
			}
			out = append(out, l)
		}
	}
	if len(out) == 0 {
		if b.empty == 0 {
			b.empty = b.location(b.function(noStack, ""), 0)
		}
		out = []uint64{b.empty}
	}
	b.stacks[id] = out
	return out
}
