package export

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"testing"

	"github.com/ptscope/ptscope/internal/memory"
	"github.com/ptscope/ptscope/internal/snapshot"
	"github.com/ptscope/ptscope/internal/testfixture"
)

// vizDoc is a memory_viz snapshot as encoding/json reads it.
type vizDoc struct {
	Segments []struct {
		Device        int    `json:"device"`
		Address       uint64 `json:"address"`
		TotalSize     int64  `json:"total_size"`
		AllocatedSize int64  `json:"allocated_size"`
		Stream        int64  `json:"stream"`
		Blocks        []struct {
			Size          int64           `json:"size"`
			RequestedSize int64           `json:"requested_size"`
			State         string          `json:"state"`
			Frames        []vizFrame      `json:"frames"`
			Extra         json.RawMessage `json:"-"`
		} `json:"blocks"`
	} `json:"segments"`
	DeviceTraces [][]vizEntry `json:"device_traces"`
}

type vizFrame struct {
	Filename string `json:"filename"`
	Line     int    `json:"line"`
	Name     string `json:"name"`
}

type vizEntry struct {
	Action     string     `json:"action"`
	Addr       *uint64    `json:"addr"`
	DeviceFree *uint64    `json:"device_free"`
	Size       *int64     `json:"size"`
	Stream     *int64     `json:"stream"`
	TimeUS     int64      `json:"time_us"`
	Frames     []vizFrame `json:"frames"`
}

func decodeViz(t *testing.T, b []byte) *vizDoc {
	t.Helper()
	var d vizDoc
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("memory_viz JSON: %v", err)
	}
	return &d
}

// checkVizShape: every segment is covered exactly by its blocks (what
// _memory_viz.segsum asserts), every trace entry has action, addr (or
// device_free), size, stream and frames.
func checkVizShape(t *testing.T, d *vizDoc) {
	t.Helper()
	for _, g := range d.Segments {
		var sum, alloc int64
		for _, b := range g.Blocks {
			sum += b.Size
			if b.State == "active_allocated" {
				alloc += b.Size
			}
			switch b.State {
			case "active_allocated", "active_pending_free", "inactive":
			default:
				t.Fatalf("segment %#x: block state %q", g.Address, b.State)
			}
			if b.Frames == nil {
				t.Fatalf("segment %#x: block without frames", g.Address)
			}
		}
		if sum != g.TotalSize || alloc != g.AllocatedSize {
			t.Fatalf("segment %#x of %d B: blocks add up to %d B, allocated %d B (segment says %d)", g.Address, g.TotalSize, sum, alloc, g.AllocatedSize)
		}
	}
	for dev, tr := range d.DeviceTraces {
		for i, e := range tr {
			if e.Action == "" || e.Size == nil || e.Stream == nil || e.Frames == nil {
				t.Fatalf("device %d entry %d lacks action/size/stream/frames: %+v", dev, i, e)
			}
			if (e.Action == "oom") != (e.DeviceFree != nil) || (e.Action != "oom") != (e.Addr != nil) {
				t.Fatalf("device %d entry %d: addr/device_free: %+v", dev, i, e)
			}
		}
	}
}

// vizReplay does what MemoryViz.js's "Allocator State History" does with a
// snapshot: it elides a free_requested directly followed by its
// free_completed into one "free", takes the active blocks of the final
// segments (addresses from the cumulative block sizes) and replays the
// device's trace backwards, undoing allocs, frees and segment events. The
// JS throws where this fails: a free_requested whose block is not there, or
// a block outside every segment when a state is drawn. It checks every
// drawn state at `checks` evenly spaced entries and returns the allocated
// (requested) and reserved bytes of the states it drew, by entry index.
func vizReplay(t *testing.T, d *vizDoc, dev int, checks int) map[int][2]int64 {
	t.Helper()
	type seg struct {
		addr uint64
		size int64
	}
	type blk struct {
		size, requested int64
	}
	var segs []seg
	blocks := map[uint64]blk{}
	for _, g := range d.Segments {
		if g.Device != dev {
			continue
		}
		segs = append(segs, seg{g.Address, g.TotalSize})
		at := g.Address
		for _, b := range g.Blocks {
			if b.State != "inactive" {
				blocks[at] = blk{b.Size, b.RequestedSize}
			}
			at += uint64(b.Size)
		}
	}
	var events []vizEntry
	for _, e := range d.DeviceTraces[dev] {
		if e.Action == "free_completed" && len(events) > 0 {
			prev := &events[len(events)-1]
			if prev.Action == "free_requested" && *prev.Addr == *e.Addr {
				prev.Action = "free"
				continue
			}
		}
		events = append(events, e)
	}
	drawn := map[int][2]int64{}
	draw := func(idx int) {
		sort.Slice(segs, func(a, b int) bool { return segs[a].addr < segs[b].addr })
		var reserved, allocated int64
		for _, g := range segs {
			reserved += g.size
		}
		for addr, b := range blocks {
			k := sort.Search(len(segs), func(i int) bool { return segs[i].addr+uint64(segs[i].size) > addr })
			if k == len(segs) || segs[k].addr > addr {
				t.Fatalf("state at event %d: block %#x of %d B lies in no segment (MemoryViz: b.segment is null)", idx, addr, b.size)
			}
			allocated += b.requested
		}
		drawn[idx] = [2]int64{allocated, reserved}
	}
	step := max(len(events)/max(checks, 1), 1)
	draw(len(events) - 1)
	for i := len(events) - 1; i > 0; i-- {
		e := events[i]
		switch e.Action {
		case "free":
			blocks[*e.Addr] = blk{*e.Size, *e.Size}
		case "free_requested":
			if _, ok := blocks[*e.Addr]; !ok {
				t.Fatalf("event %d: free_requested of %#x, which is not allocated then (MemoryViz: l_block_map[addr] is undefined)", i, *e.Addr)
			}
		case "free_completed":
			blocks[*e.Addr] = blk{*e.Size, *e.Size}
		case "alloc":
			delete(blocks, *e.Addr)
		case "segment_free", "segment_unmap":
			segs = append(segs, seg{*e.Addr, *e.Size})
		case "segment_alloc", "segment_map":
			// remove (or for unmapped ranges shrink) the segment holding it
			end := *e.Addr + uint64(*e.Size)
			for k, g := range segs {
				gend := g.addr + uint64(g.size)
				if g.addr <= *e.Addr && end <= gend {
					switch {
					case g.addr == *e.Addr && gend == end:
						segs = append(segs[:k], segs[k+1:]...)
					case g.addr == *e.Addr:
						segs[k] = seg{end, int64(gend - end)}
					case gend == end:
						segs[k].size -= *e.Size
					default:
						segs[k].size = int64(*e.Addr - g.addr)
						segs = append(segs, seg{end, int64(gend - end)})
					}
					break
				}
			}
		}
		if (i-1)%step == 0 {
			draw(i - 1)
		}
	}
	return drawn
}

func writeViz(t *testing.T, m *Memory, w Window, minSize int64) ([]byte, *MemVizSummary) {
	t.Helper()
	var buf bytes.Buffer
	sum, err := WriteMemViz(&buf, m.Snap, []MemVizDevice{{m, w}}, minSize)
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), sum
}

func TestMemVizWhole(t *testing.T) { checkMemVizWhole(t, testMemory(t)) }

// checkMemVizWhole: the whole snapshot as memory_viz JSON holds every
// segment and trace entry, with action, addr, size and frames as the
// snapshot has them, and MemoryViz's backward replay runs through it.
func checkMemVizWhole(t *testing.T, m *Memory) {
	b, sum := writeViz(t, m, FullWindow(m), 0)
	d := decodeViz(t, b)
	checkVizShape(t, d)
	segs := len(m.Snap.DeviceSegments(0))
	if len(d.Segments) != segs || sum.Segments != segs {
		t.Errorf("%d segments, want %d", len(d.Segments), segs)
	}
	if len(d.DeviceTraces) != 1 || len(d.DeviceTraces[0]) != m.Entries() || sum.Entries != m.Entries() {
		t.Fatalf("device traces %d, entries %d, want 1 and %d", len(d.DeviceTraces), sum.Entries, m.Entries())
	}
	framed := 0
	for _, e := range d.DeviceTraces[0] {
		if e.Action == "alloc" && len(e.Frames) > 0 {
			framed++
		}
	}
	if framed == 0 {
		t.Error("no alloc carries frames")
	}
	// The snapshot as read and as written agree entry by entry.
	tr := m.Snap.Trace(0)
	for i, e := range d.DeviceTraces[0] {
		if e.Action != tr.Action[i].String() || *e.Size != tr.Size[i] || e.TimeUS != tr.TimeUS[i] || len(e.Frames) != len(m.Snap.Stacks[tr.Stack[i]]) {
			t.Fatalf("entry %d: %+v, model %v %d %d", i, e, tr.Action[i], tr.Size[i], tr.TimeUS[i])
		}
	}
	vizReplay(t, d, 0, 40)
}

// TestMemVizWindow: one step of a real training snapshot. The segments are the state
// just after the step's last entry: their active blocks add up to the
// replay's allocated bytes there and the segments to its reserved bytes,
// and MemoryViz's replay of the step's entries backwards from them holds.
func TestMemVizWindow(t *testing.T) {
	m := testMemory(t)
	w, err := m.StepWindow(1, 1)
	if err != nil {
		t.Fatal(err)
	}
	b, sum := writeViz(t, m, w, 0)
	d := decodeViz(t, b)
	checkVizShape(t, d)
	if sum.Misplaced != 0 {
		t.Errorf("%d blocks fit no segment", sum.Misplaced)
	}
	if got := len(d.DeviceTraces[0]); got != w.Hi-w.Lo+1 {
		t.Errorf("%d entries for window %+v", got, w)
	}
	var alloc, reserved int64
	for _, g := range d.Segments {
		reserved += g.TotalSize
		alloc += g.AllocatedSize
	}
	tl := &m.Replay.Timeline
	if alloc != tl.Allocated[w.Hi] || reserved != tl.Reserved[w.Hi] {
		t.Errorf("state after entry %d: allocated %d B, reserved %d B; replay %d B, %d B", w.Hi, alloc, reserved, tl.Allocated[w.Hi], tl.Reserved[w.Hi])
	}
	vizReplay(t, d, 0, 40)
}

// TestMemVizStateAtEnd: the state rebuilt at the last entry is the final
// segments' own: the same segments and the same active blocks.
func TestMemVizStateAtEnd(t *testing.T) {
	for _, name := range []string{validateSnap, "expandable_gpt2_2l.pickle.xz", "leak_gpt2_2l.pickle.xz"} {
		t.Run(name, func(t *testing.T) {
			m := loadMemory(t, testfixture.Testdata(t, "snapshots", name), 0)
			v := &memViz{s: m.Snap, sum: &MemVizSummary{}}
			final := m.Snap.DeviceSegments(m.Device)
			got := v.stateAt(m, final, m.Entries()-1)
			if v.sum.Misplaced != 0 {
				t.Errorf("%d blocks misplaced", v.sum.Misplaced)
			}
			want := map[string]bool{}
			for _, g := range final {
				want[fmt.Sprintf("seg %#x %d", g.Address, g.TotalSize)] = true
				for _, b := range g.Blocks {
					if b.State != snapshot.BlockInactive {
						want[fmt.Sprintf("blk %#x %d %v", b.Address, b.Size, b.State)] = true
					}
				}
			}
			have := map[string]bool{}
			for _, g := range got {
				have[fmt.Sprintf("seg %#x %d", g.addr, g.size)] = true
				for _, b := range g.blocks {
					st := snapshot.BlockActiveAllocated
					if b.pending {
						st = snapshot.BlockActivePendingFree
					}
					have[fmt.Sprintf("blk %#x %d %v", b.addr, b.size, st)] = true
				}
			}
			for k := range want {
				if !have[k] {
					t.Errorf("rebuilt state lacks %s", k)
				}
			}
			for k := range have {
				if !want[k] {
					t.Errorf("rebuilt state has %s, the snapshot does not", k)
				}
			}
		})
	}
}

// TestMemVizCuts: real snapshots with segment_alloc, segment_map and oom
// entries, cut at several points: the rebuilt segments add up to the
// replay's allocated and reserved bytes there and memory_viz's replay holds.
func TestMemVizCuts(t *testing.T) {
	for _, name := range []string{"expandable_gpt2_2l", "leak_gpt2_2l", "oom_fragmentation", "oom_lm_xl_forward", "validate_gpt2tiny_fp32"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			m := loadMemory(t, testfixture.Testdata(t, "snapshots", name+".pickle.xz"), 0)
			n := m.Entries()
			for _, hi := range []int{0, n / 5, n / 2, 3 * n / 4, n - 2} {
				checkCut(t, m, Window{0, hi})
				checkCut(t, m, Window{hi / 2, hi})
			}
		})
	}
}

func checkCut(t *testing.T, m *Memory, w Window) {
	t.Helper()
	b, sum := writeViz(t, m, w, 0)
	d := decodeViz(t, b)
	checkVizShape(t, d)
	var alloc, reserved int64
	for _, g := range d.Segments {
		reserved += g.TotalSize
		alloc += g.AllocatedSize
	}
	tl := &m.Replay.Timeline
	if sum.Misplaced != 0 || alloc != tl.Allocated[w.Hi] || reserved != tl.Reserved[w.Hi] {
		t.Errorf("cut %+v: allocated %d B, reserved %d B, %d misplaced; replay %d B, %d B", w, alloc, reserved, sum.Misplaced, tl.Allocated[w.Hi], tl.Reserved[w.Hi])
	}
	if got := len(d.DeviceTraces[m.Device]); got != w.Hi-w.Lo+1 {
		t.Errorf("cut %+v: %d entries", w, got)
	}
	vizReplay(t, d, m.Device, 8)
}

// synthetic builds a one-device snapshot from trace entries and final
// segments, with times 1 us apart.
func synthetic(entries []synthEntry, segs []snapshot.Segment) *Memory {
	s := &snapshot.Snapshot{Stacks: [][]snapshot.FrameID{nil}, Strings: []string{""}, Streams: []int64{0}, Segments: segs}
	tr := snapshot.Trace{HasTime: true}
	for i, e := range entries {
		tr.Action = append(tr.Action, e.a)
		tr.Addr = append(tr.Addr, e.addr)
		tr.Size = append(tr.Size, e.size)
		tr.Stream = append(tr.Stream, 0)
		tr.TimeUS = append(tr.TimeUS, int64(1000+i))
		tr.Stack = append(tr.Stack, 0)
		tr.CompileContext = append(tr.CompileContext, 0)
		tr.UserMetadata = append(tr.UserMetadata, 0)
	}
	s.Traces = []snapshot.Trace{tr}
	r := memory.NewReplay(s, 0)
	return &Memory{Snap: s, Replay: r, Peak: -1, Path: "synthetic"}
}

type synthEntry struct {
	a    snapshot.Action
	addr uint64
	size int64
}

// TestMemVizSegmentEvents: cuts across segment_free (a segment that existed
// then), segment_alloc (one that did not yet) and, for expandable segments,
// segment_map and segment_unmap (ranges merged and split), which no real
// test snapshot holds.
func TestMemVizSegmentEvents(t *testing.T) {
	const mib = 1 << 20
	const a, b = 0x7f0000000000, 0x7f0010000000
	m := synthetic([]synthEntry{
		{snapshot.ActionSegmentAlloc, a, 20 * mib},
		{snapshot.ActionAlloc, a, mib},
		{snapshot.ActionFreeRequested, a, mib},
		{snapshot.ActionFreeCompleted, a, mib},
		{snapshot.ActionSegmentFree, a, 20 * mib},
		{snapshot.ActionSegmentAlloc, b, 2 * mib},
		{snapshot.ActionAlloc, b, 512},
	}, []snapshot.Segment{{Address: b, TotalSize: 2 * mib, Type: "small", Blocks: []snapshot.Block{
		{Address: b, Size: 512, RequestedSize: 512, State: snapshot.BlockActiveAllocated},
		{Address: b + 512, Size: 2*mib - 512, State: snapshot.BlockInactive}}}})
	wantSegs := []int{1, 1, 1, 1, 0, 1, 1}
	for hi := 0; hi < m.Entries(); hi++ {
		checkCut(t, m, Window{0, hi})
		b, _ := writeViz(t, m, Window{0, hi}, 0)
		if got := len(decodeViz(t, b).Segments); got != wantSegs[hi] {
			t.Errorf("after entry %d: %d segments, want %d", hi, got, wantSegs[hi])
		}
	}

	const e = 0x7f0100000000
	x := synthetic([]synthEntry{
		{snapshot.ActionSegmentMap, e, 2 * mib},
		{snapshot.ActionSegmentMap, e + 2*mib, 2 * mib},
		{snapshot.ActionAlloc, e, 3 * mib},
		{snapshot.ActionFreeRequested, e, 3 * mib},
		{snapshot.ActionFreeCompleted, e, 3 * mib},
		{snapshot.ActionSegmentUnmap, e + 2*mib, 2 * mib},
		{snapshot.ActionSegmentMap, e + 4*mib, 2 * mib},
		{snapshot.ActionSegmentUnmap, e, 2 * mib},
	}, []snapshot.Segment{{Address: e + 4*mib, TotalSize: 2 * mib, Type: "large", Expandable: true,
		Blocks: []snapshot.Block{{Address: e + 4*mib, Size: 2 * mib, State: snapshot.BlockInactive}}}})
	// mapped bytes after each entry: 2, 4, 4, 4, 4, 2, 4 (two ranges), 2
	wantSegs = []int{1, 1, 1, 1, 1, 1, 2, 1}
	for hi := 0; hi < x.Entries(); hi++ {
		checkCut(t, x, Window{0, hi})
		b, _ := writeViz(t, x, Window{0, hi}, 0)
		if got := len(decodeViz(t, b).Segments); got != wantSegs[hi] {
			t.Errorf("expandable, after entry %d: %d segments, want %d", hi, got, wantSegs[hi])
		}
	}
}

// TestMemVizMinSize: only allocations that requested at least the size
// remain, in the trace and in the segments, and the replay still holds.
func TestMemVizMinSize(t *testing.T) {
	m := testMemory(t)
	const min = 16 << 20
	b, sum := writeViz(t, m, FullWindow(m), min)
	d := decodeViz(t, b)
	checkVizShape(t, d)
	if sum.Entries == 0 || sum.Entries >= m.Entries()/2 {
		t.Errorf("%d of %d entries kept above 16 MiB", sum.Entries, m.Entries())
	}
	for _, e := range d.DeviceTraces[0] {
		switch e.Action {
		case "alloc", "free_requested", "free_completed":
			if *e.Size < min {
				t.Fatalf("entry of %d B kept", *e.Size)
			}
		}
	}
	for _, g := range d.Segments {
		for _, bl := range g.Blocks {
			if bl.State != "inactive" && bl.RequestedSize < min {
				t.Fatalf("active block of %d B kept", bl.RequestedSize)
			}
		}
	}
	vizReplay(t, d, 0, 20)

	// a window and a size together
	w, _ := m.StepWindow(2, 2)
	b, _ = writeViz(t, m, w, min)
	d = decodeViz(t, b)
	checkVizShape(t, d)
	vizReplay(t, d, 0, 20)
}

// TestNoTrace: a snapshot with segments and no trace entries (history was
// never recorded) exports what its final blocks hold.
func TestNoTrace(t *testing.T) {
	const a = 0x7f0000000000
	m := synthetic(nil, []snapshot.Segment{{Address: a, TotalSize: 2 << 20, Type: "small", Blocks: []snapshot.Block{
		{Address: a, Size: 4096, RequestedSize: 4000, State: snapshot.BlockActiveAllocated},
		{Address: a + 4096, Size: 2<<20 - 4096, State: snapshot.BlockInactive}}}})
	for _, p := range []Point{{Kind: AtPeak}, {Kind: AtEnd}, {Kind: AtStart}} {
		at, _, err := m.Resolve(p)
		if err != nil || at != -1 {
			t.Fatalf("Resolve(%+v) = %d, %v", p, at, err)
		}
	}
	var buf bytes.Buffer
	sum, err := WriteFolded(&buf, m, -1, "start")
	if err != nil || sum.Bytes != 4096 || buf.String() != noStack+" 4096\n" {
		t.Errorf("folded %q, %+v, %v", buf.String(), sum, err)
	}
	ps, err := WritePProf(&buf, m, -1, "start")
	if err != nil || ps.InuseBytes != 4096 {
		t.Errorf("pprof %+v, %v", ps, err)
	}
	buf.Reset()
	if _, err := WritePerfetto(&buf, []*Memory{m}, PerfettoOptions{}); err != nil {
		t.Fatal(err)
	}
	checkChromeTrace(t, buf.Bytes())
	b, vs := writeViz(t, m, FullWindow(m), 0)
	d := decodeViz(t, b)
	checkVizShape(t, d)
	if vs.Segments != 1 || vs.Blocks != 1 || vs.Entries != 0 {
		t.Errorf("memory-viz %+v", vs)
	}
}

// TestMemVizReadBack: ptscope's own snapshot reader reads the export (a
// JSON snapshot) and its analysis finds the original's peak, entries and
// segments; a window's export analyses to the replay's state there.
func TestMemVizReadBack(t *testing.T) {
	m := testMemory(t)
	b, _ := writeViz(t, m, FullWindow(m), 0)
	s, err := snapshot.Read(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	a := memory.Analyze(s, 0, memory.Options{})
	orig := memory.Analyze(m.Snap, 0, memory.Options{})
	if a.Result.Peak != orig.Result.Peak || a.Result.Entries != orig.Result.Entries || len(s.Segments) != len(m.Snap.Segments) ||
		a.Result.End != orig.Result.End || len(a.Result.Steps) != len(orig.Result.Steps) {
		t.Errorf("read back: peak %+v, %d entries, %d segments; original %+v, %d, %d", a.Result.Peak, a.Result.Entries,
			len(s.Segments), orig.Result.Peak, orig.Result.Entries, len(m.Snap.Segments))
	}

	w, _ := m.StepWindow(1, 1)
	b, _ = writeViz(t, m, w, 0)
	s, err = snapshot.Read(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	r := memory.NewReplay(s, 0)
	tl := &m.Replay.Timeline
	if r.End.Allocated != tl.Allocated[w.Hi] || r.End.Reserved != tl.Reserved[w.Hi] || r.Timeline.Len() != w.Hi-w.Lo+1 {
		t.Errorf("window read back: end %+v, %d entries; replay at %d: %d B allocated, %d B reserved", r.End, r.Timeline.Len(),
			w.Hi, tl.Allocated[w.Hi], tl.Reserved[w.Hi])
	}
	// the window's own peak is the replay's highest allocated in it
	var peak int64
	for _, v := range tl.Allocated[w.Lo : w.Hi+1] {
		peak = max(peak, v)
	}
	var got int64
	for _, v := range r.Timeline.Allocated {
		got = max(got, v)
	}
	if got != peak {
		t.Errorf("window peak read back %d B, replay %d B", got, peak)
	}
}
