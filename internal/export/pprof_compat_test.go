package export_test

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/google/pprof/profile"

	"github.com/ptscope/ptscope/internal/export"
	"github.com/ptscope/ptscope/internal/load"
	"github.com/ptscope/ptscope/internal/memory"
	"github.com/ptscope/ptscope/internal/snapshot"
	"github.com/ptscope/ptscope/internal/testfixture"
)

// TestPProfMatchesLibrary holds ptscope's own pprof writer to the bytes
// github.com/google/pprof/profile wrote before it (libraryPProf, the
// builder ptscope had, on the library's model): for every snapshot the
// tests read (the shared fixtures, testdata/snapshots, the committed
// bundles: every rank and device), at the peak, before the first entry,
// at the middle entry and at the end. And pprof's reader reads every one
// back with the summary's totals (a round trip).
func TestPProfMatchesLibrary(t *testing.T) {
	t.Parallel()
	root := testfixture.Root(t)
	var paths []string
	glob := func(pattern string) []string {
		m, err := filepath.Glob(filepath.Join(root, pattern))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	snaps := glob("testdata/snapshots/*.pickle.xz")
	archives := append(glob("testdata/bundles/trainers/*.tar.xz"), glob("testdata/bundles/windows/*.tar.xz")...)
	if len(snaps) < 10 || len(archives) < 14 {
		t.Fatalf("found %d snapshots, %d bundle archives: testdata moved?", len(snaps), len(archives))
	}
	// the shared fixtures are optional: a clone without them tests the rest
	paths = append(paths, glob("../shared/fixtures/*.pickle")...)
	paths = append(paths, snaps...)
	paths = append(paths, filepath.Join(root, "testdata", "bundles", "lm_small_bf16"))
	for _, a := range archives {
		dir := filepath.Join(t.TempDir(), filepath.Base(filepath.Dir(a))+"_"+filepath.Base(a))
		if err := testfixture.ExtractBundle(a, dir); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, dir)
	}
	profiles := 0
	for _, path := range paths {
		set, err := load.Snapshots(context.Background(), []string{path}, load.SnapshotOptions{SpillAbove: -1})
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		for _, in := range set.Inputs {
			for _, a := range in.Devices {
				m := export.FromAnalysis(a, in.Path)
				points := []export.Point{{Kind: export.AtPeak}, {Kind: export.AtStart}, {Kind: export.AtEnd}}
				if m.Entries() > 0 {
					points = append(points, export.Point{Kind: export.AtEvent, N: m.Entries() / 2})
				}
				for _, pt := range points {
					at, desc, err := m.Resolve(pt)
					if err != nil {
						t.Fatal(err)
					}
					name := fmt.Sprintf("%s device %d at %d", filepath.Base(in.Path), m.Device, at)
					comparePProf(t, name, m, at, desc)
					profiles++
				}
			}
		}
		if err := set.Close(); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d inputs, %d profiles compared", len(paths), profiles)
}

// comparePProf writes the profile of m at `at` with ptscope's writer and
// with the library, compares the bytes, and parses ptscope's back.
func comparePProf(t *testing.T, name string, m *export.Memory, at int, desc string) {
	t.Helper()
	var got bytes.Buffer
	sum, err := export.WritePProf(&got, m, at, desc)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	lp, lsum := libraryPProf(m, at, desc)
	if err := lp.CheckValid(); err != nil {
		t.Fatalf("%s: library profile: %v", name, err)
	}
	var want bytes.Buffer
	if err := lp.Write(&want); err != nil {
		t.Fatal(err)
	}
	if *sum != *lsum {
		t.Errorf("%s: summary %+v, library's %+v", name, sum, lsum)
	}
	if !bytes.Equal(got.Bytes(), want.Bytes()) {
		i := 0
		for i < got.Len() && i < want.Len() && got.Bytes()[i] == want.Bytes()[i] {
			i++
		}
		t.Errorf("%s: %d bytes, the library's %d; first difference at byte %d", name, got.Len(), want.Len(), i)
		return
	}
	if sum.InuseBytes != m.AllocatedAt(at) {
		t.Errorf("%s: in use %d B, allocated %d B", name, sum.InuseBytes, m.AllocatedAt(at))
	}

	p, err := profile.Parse(bytes.NewReader(got.Bytes()))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if len(p.Sample) != sum.Samples || p.DefaultSampleType != "inuse_space" || len(p.Comments) != 3 {
		t.Errorf("%s: %d samples (summary %d), default %q, %d comments", name, len(p.Sample), sum.Samples,
			p.DefaultSampleType, len(p.Comments))
	}
	var totals [4]int64
	for _, s := range p.Sample {
		for i, v := range s.Value {
			totals[i] += v
		}
		// a sample is one block size: alloc_space = alloc_objects x bytes
		size := s.NumLabel["bytes"]
		if len(size) != 1 || s.NumUnit["bytes"][0] != "bytes" || s.Value[3] != s.Value[2]*size[0] ||
			len(s.Label["category"]) != 1 || len(s.Label["stream"]) != 1 || len(s.Location) == 0 {
			t.Fatalf("%s: sample %v %v %v, %d locations", name, s.Value, s.Label, s.NumLabel, len(s.Location))
		}
		for _, l := range s.Location {
			if len(l.Line) != 1 || l.Line[0].Function == nil || l.Mapping == nil || l.Mapping.File != "python" {
				t.Fatalf("%s: location %+v", name, l)
			}
		}
	}
	if totals != [4]int64{sum.InuseObjects, sum.InuseBytes, sum.AllocObjects, sum.AllocBytes} {
		t.Errorf("%s: parsed totals %v, summary %+v", name, totals, sum)
	}
}

// libraryPProf is ptscope's pprof builder as it was on the library's
// model (github.com/google/pprof/profile), kept as the reference.
func libraryPProf(m *export.Memory, at int, atDesc string) (*profile.Profile, *export.PProfSummary) {
	const (
		inuseObjects = iota
		inuseSpace
		allocObjects
		allocSpace
	)
	type sampleKey struct {
		stack    snapshot.StackID
		category memory.Category
		stream   uint32
		meta     uint32
		size     int64
	}
	s := m.Snap
	sum := &export.PProfSummary{Event: at, At: atDesc}
	samples := map[sampleKey]*profile.Sample{}
	var order []sampleKey
	b := newLibLocations(s)
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
				lm = map[string][]string{"category": {a.Category.String()}, "stream": {libStreamName(s, a.Stream)}}
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

func libStreamName(s *snapshot.Snapshot, i uint32) string {
	if int(i) < len(s.Streams) {
		return strconv.FormatInt(s.Streams[i], 10)
	}
	return "0"
}

type libLocations struct {
	s       *snapshot.Snapshot
	byID    map[snapshot.FrameID]*profile.Location
	fnKey   map[[2]string]*profile.Function
	stacks  map[snapshot.StackID][]*profile.Location
	locs    []*profile.Location
	funcs   []*profile.Function
	empty   *profile.Location
	mapping *profile.Mapping
}

func newLibLocations(s *snapshot.Snapshot) *libLocations {
	m := &profile.Mapping{ID: 1, File: "python", HasFunctions: true, HasFilenames: true, HasLineNumbers: true}
	return &libLocations{s: s, mapping: m, byID: map[snapshot.FrameID]*profile.Location{}, fnKey: map[[2]string]*profile.Function{},
		stacks: map[snapshot.StackID][]*profile.Location{}}
}

func (b *libLocations) function(name, file string) *profile.Function {
	k := [2]string{name, file}
	if f := b.fnKey[k]; f != nil {
		return f
	}
	f := &profile.Function{ID: uint64(len(b.funcs) + 1), Name: name, Filename: file}
	b.funcs = append(b.funcs, f)
	b.fnKey[k] = f
	return f
}

func (b *libLocations) location(fn *profile.Function, line int) *profile.Location {
	l := &profile.Location{ID: uint64(len(b.locs) + 1), Mapping: b.mapping, Line: []profile.Line{{Function: fn, Line: int64(line)}}}
	b.locs = append(b.locs, l)
	return l
}

func (b *libLocations) stack(id snapshot.StackID) []*profile.Location {
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
			b.empty = b.location(b.function(export.NoStack, ""), 0)
		}
		out = []*profile.Location{b.empty}
	}
	b.stacks[id] = out
	return out
}
