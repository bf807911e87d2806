package export

import (
	"fmt"
	"io"
	"strconv"

	"github.com/google/pprof/profile"

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

// PProf builds the memory of m as a pprof heap profile: inuse_space and
// inuse_objects are the allocations alive just after entry `at` (their
// total is the allocated bytes there: at the peak, the peak), alloc_space
// and alloc_objects every allocation the replay knows over the recording
// (those made before it included when they were alive or freed during it).
// Each Python (or C++) frame is a function and a location, leaf first;
// category, stream and module are labels, the block size a numeric label.
func PProf(m *Memory, at int, atDesc string) (*profile.Profile, *PProfSummary) {
	s := m.Snap
	sum := &PProfSummary{Event: at, At: atDesc}
	samples := map[sampleKey]*profile.Sample{}
	var order []sampleKey
	b := newLocations(s)
	// Samples share their label maps (pprof only reads them): a snapshot
	// of many stacks and sizes makes tens of thousands of samples.
	type labelKey struct {
		category     memory.Category
		stream, meta uint32
	}
	labels := map[labelKey]map[string][]string{}
	sizes := map[int64]map[string][]int64{}
	units := map[string][]string{"bytes": {"bytes"}}
	for k := range m.Replay.Allocs {
		a := &m.Replay.Allocs[k]
		key := sampleKey{a.Stack, a.Category, a.Stream, a.Metadata, a.Size}
		smp := samples[key]
		if smp == nil {
			lk := labelKey{a.Category, a.Stream, a.Metadata}
			lm := labels[lk]
			if lm == nil {
				lm = map[string][]string{"category": {a.Category.String()}, "stream": {streamName(s, a.Stream)}}
				if a.Metadata != 0 {
					lm["module"] = []string{s.Strings[a.Metadata]}
				}
				labels[lk] = lm
			}
			nm := sizes[a.Size]
			if nm == nil {
				nm = map[string][]int64{"bytes": {a.Size}}
				sizes[a.Size] = nm
			}
			smp = &profile.Sample{Location: b.stack(a.Stack), Value: make([]int64, 4), Label: lm, NumLabel: nm, NumUnit: units}
			samples[key] = smp
			order = append(order, key)
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
	p := &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "inuse_objects", Unit: "count"}, {Type: "inuse_space", Unit: "bytes"},
			{Type: "alloc_objects", Unit: "count"}, {Type: "alloc_space", Unit: "bytes"}},
		DefaultSampleType: "inuse_space",
		PeriodType:        &profile.ValueType{Type: "space", Unit: "bytes"},
		Period:            1,
		Mapping:           []*profile.Mapping{b.mapping},
		Location:          b.locs,
		Function:          b.funcs,
		Comments: []string{
			"ptscope export pprof: CUDA caching-allocator memory of " + m.Path + ", device " + strconv.Itoa(m.Device),
			"inuse_space/inuse_objects: allocations alive just after " + atDesc,
			"alloc_space/alloc_objects: every allocation known over the recording",
		},
	}
	for _, k := range order {
		p.Sample = append(p.Sample, samples[k])
	}
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

// WritePProf writes PProf's profile gzip-compressed, as pprof reads it.
func WritePProf(w io.Writer, m *Memory, at int, atDesc string) (*PProfSummary, error) {
	p, sum := PProf(m, at, atDesc)
	if err := p.CheckValid(); err != nil {
		return nil, fmt.Errorf("pprof profile: %w", err)
	}
	return sum, p.Write(w)
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
	byID    map[snapshot.FrameID]*profile.Location
	fnKey   map[[2]string]*profile.Function
	stacks  map[snapshot.StackID][]*profile.Location
	locs    []*profile.Location
	funcs   []*profile.Function
	empty   *profile.Location
	mapping *profile.Mapping
}

func newLocations(s *snapshot.Snapshot) *locations {
	// One mapping that says the functions are known, so that pprof does not
	// look for a binary to symbolize.
	m := &profile.Mapping{ID: 1, File: "python", HasFunctions: true, HasFilenames: true, HasLineNumbers: true}
	return &locations{s: s, mapping: m, byID: map[snapshot.FrameID]*profile.Location{}, fnKey: map[[2]string]*profile.Function{},
		stacks: map[snapshot.StackID][]*profile.Location{}}
}

// function interns a function. SystemName stays empty: pprof "demangles"
// a function whose SystemName equals its Name as C++, which strips "<...>"
// and turns Python's "<module>" into nothing.
func (b *locations) function(name, file string) *profile.Function {
	k := [2]string{name, file}
	if f := b.fnKey[k]; f != nil {
		return f
	}
	f := &profile.Function{ID: uint64(len(b.funcs) + 1), Name: name, Filename: file}
	b.funcs = append(b.funcs, f)
	b.fnKey[k] = f
	return f
}

func (b *locations) location(fn *profile.Function, line int) *profile.Location {
	l := &profile.Location{ID: uint64(len(b.locs) + 1), Mapping: b.mapping, Line: []profile.Line{{Function: fn, Line: int64(line)}}}
	b.locs = append(b.locs, l)
	return l
}

// stack returns the locations of a snapshot stack, leaf first (snapshot
// stacks are innermost first too). A stack without frames gets one
// location that says so, so that its bytes show in every pprof view.
func (b *locations) stack(id snapshot.StackID) []*profile.Location {
	if ls, ok := b.stacks[id]; ok {
		return ls
	}
	var out []*profile.Location
	if int(id) < len(b.s.Stacks) {
		for _, fid := range b.s.Stacks[id] {
			l := b.byID[fid]
			if l == nil {
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
		if b.empty == nil {
			b.empty = b.location(b.function(noStack, ""), 0)
		}
		out = []*profile.Location{b.empty}
	}
	b.stacks[id] = out
	return out
}
