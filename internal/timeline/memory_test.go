package timeline

import (
	"bytes"
	"math/rand/v2"
	"path/filepath"
	"sort"
	"sync"
	"testing"

	"github.com/ptscope/ptscope/internal/memory"
	"github.com/ptscope/ptscope/internal/snapshot"
	"github.com/ptscope/ptscope/internal/snapshot/snapgen"
	"github.com/ptscope/ptscope/internal/testfixture"
)

func TestPyramidBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 2, 15, 16, 17, 31, 33, 100, 1000, 4097} {
		v := make([]int64, n)
		for i := range v {
			v[i] = rng.Int64N(1000) - 500
		}
		p := NewPyramid(v)
		for q := 0; q < 2000; q++ {
			lo := rng.IntN(n)
			hi := lo + 1 + rng.IntN(n-lo)
			mn, mx := v[lo], v[lo]
			for _, x := range v[lo:hi] {
				mn, mx = min(mn, x), max(mx, x)
			}
			if gmn, gmx := p.MinMax(lo, hi); gmn != mn || gmx != mx {
				t.Fatalf("n=%d [%d,%d): got %d..%d, want %d..%d", n, lo, hi, gmn, gmx, mn, mx)
			}
		}
	}
}

// inputs are the indexes the property tests run on: a committed real
// snapshot, a generated step-structured one with segment entries, and the
// shared real fixtures when present.
type input struct {
	name string
	m    *Memory
}

var (
	inputsOnce sync.Once
	inputsAll  []input
)

func load(t testing.TB, s *snapshot.Snapshot, name string) input {
	t.Helper()
	d := s.Devices()[0]
	a := memory.Analyze(s, d, memory.Options{})
	return input{name, NewMemory(s, d, a.Replay, a.Phases)}
}

func inputs(t *testing.T) []input {
	t.Helper()
	inputsOnce.Do(func() {
		root := testfixture.Root(t)
		for _, f := range []string{"validate_gpt2tiny_fp32.pickle.xz", "expandable_gpt2_2l.pickle.xz", "oom_fragmentation.pickle.xz"} {
			s, err := snapshot.ReadFile(filepath.Join(root, "testdata", "snapshots", f))
			if err != nil {
				t.Fatal(err)
			}
			inputsAll = append(inputsAll, load(t, s, f))
		}
		var buf bytes.Buffer
		if err := snapgen.Write(&buf, snapgen.Options{Entries: 60_000, Seed: 3, SegmentEvery: 997}); err != nil {
			t.Fatal(err)
		}
		s, err := snapshot.Read(&buf)
		if err != nil {
			t.Fatal(err)
		}
		inputsAll = append(inputsAll, load(t, s, "snapgen60k"))
		// GPT-2 small at batch 8: blocks of 12-785 MiB, pixels tall in
		// every view, freed under drawn ones in backward
		buf.Reset()
		if err := snapgen.Write(&buf, snapgen.Options{Entries: 8000, Seed: 1, Model: snapgen.ModelGPT2Small}); err != nil {
			t.Fatal(err)
		}
		if s, err = snapshot.Read(&buf); err != nil {
			t.Fatal(err)
		}
		inputsAll = append(inputsAll, load(t, s, "gpt2s8k"))
	})
	if len(inputsAll) == 0 {
		t.Fatal("no inputs")
	}
	return inputsAll
}

// bruteActive lists the blocks active after entry i from the blocks alone.
func bruteActive(m *Memory, i int) []int32 {
	var out []int32
	for id, b := range m.Blocks {
		if int(b.Start) <= i && int(b.ActiveEnd) > i {
			out = append(out, int32(id))
		}
	}
	return out
}

// bruteOffset is the bytes of allocated blocks under block id after entry i.
func bruteOffset(m *Memory, id int32, i int) int64 {
	var s int64
	for k := int32(0); k < id; k++ {
		b := &m.Blocks[k]
		if int(b.Start) <= i && int(b.End) > i {
			s += b.Size
		}
	}
	return s
}

func TestCheckpointReplayEqualsFullReplay(t *testing.T) {
	for _, in := range inputs(t) {
		m := in.m
		if m.ckpt.k >= m.n && m.n > 1000 {
			t.Errorf("%s: a single checkpoint for %d entries", in.name, m.n)
		}
		rng := rand.New(rand.NewPCG(5, 6))
		pts := []int{-1, 0, m.n - 1, m.ckpt.k - 1, m.ckpt.k, m.n / 2}
		for q := 0; q < 40; q++ {
			pts = append(pts, rng.IntN(m.n))
		}
		for _, i := range pts {
			got, want := m.LiveAt(i), bruteActive(m, i)
			if !equal32(got, want) {
				t.Fatalf("%s: LiveAt(%d): %d blocks, full replay %d", in.name, i, len(got), len(want))
			}
			// the live blocks add up to the replay's allocated and active bytes
			var alloc, active int64
			for _, id := range got {
				active += m.Blocks[id].Size
				if int(m.Blocks[id].End) > i {
					alloc += m.Blocks[id].Size
				}
			}
			if i >= 0 && (alloc != m.Replay.Timeline.Allocated[i] || active != m.Replay.Timeline.Active[i]) {
				t.Fatalf("%s: after entry %d blocks hold %d allocated / %d active, the timeline %d / %d",
					in.name, i, alloc, active, m.Replay.Timeline.Allocated[i], m.Replay.Timeline.Active[i])
			}
		}
	}
}

func equal32(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestHit(t *testing.T) {
	for _, in := range inputs(t) {
		m := in.m
		rng := rand.New(rand.NewPCG(7, 8))
		for q := 0; q < 30; q++ {
			i := rng.IntN(m.n)
			alloc := m.Replay.Timeline.Allocated[i]
			y := rng.Int64N(alloc + alloc/10 + 1)
			want := -1
			for id, b := range m.Blocks {
				if int(b.Start) <= i && int(b.End) > i {
					off := bruteOffset(m, int32(id), i)
					if y >= off && y < off+b.Size {
						want = id
						break
					}
				}
			}
			if got := m.Hit(i, y); got != want {
				t.Fatalf("%s: Hit(%d, %d) = %d, want %d", in.name, i, y, got, want)
			}
		}
	}
}

func TestViewBlocksAndEdges(t *testing.T) {
	for _, in := range inputs(t) {
		m := in.m
		rng := rand.New(rand.NewPCG(9, 10))
		type vp struct{ x0, x1, w, h int }
		vps := []vp{{0, m.n, 1200, 500}, {0, m.n, 300, 200}, {m.n / 3, m.n/3 + min(m.n/3, 5000), 800, 400}}
		for q := 0; q < 4; q++ {
			x0 := rng.IntN(m.n - 1)
			vps = append(vps, vp{x0, x0 + 1 + rng.IntN(min(m.n-x0, 3000)), 100 + rng.IntN(1500), 100 + rng.IntN(600)})
		}
		vps = append(vps, vp{m.n / 2, m.n/2 + 1, 500, 300}) // a single entry
		for _, p := range vps {
			v, err := m.View(ViewQuery{X0: p.x0, X1: p.x1, Width: p.w, Height: p.h})
			if err != nil {
				t.Fatal(err)
			}
			checkView(t, in.name, m, v, p.w)
		}
	}
}

func checkView(t *testing.T, name string, m *Memory, v *View, width int) {
	t.Helper()
	span := v.X1 - v.X0
	drawn := map[int32]bool{}
	for _, b := range v.Blocks {
		drawn[b.ID] = true
	}
	// exactly the blocks at least one pixel wide and tall are drawn, the
	// others alive in the range are counted in the band
	alive := 0
	for _, b := range m.Blocks {
		if b.Start < int32(v.X1) && b.End > int32(v.X0) {
			alive++
		}
	}
	if v.Summarized != alive-len(v.Blocks) {
		t.Fatalf("%s [%d,%d): %d blocks in the band, want %d", name, v.X0, v.X1, v.Summarized, alive-len(v.Blocks))
	}
	for id, b := range m.Blocks {
		wide := int64(b.End-max(b.Start, -1))*int64(width) >= int64(span)
		want := b.Start < int32(v.X1) && b.End > int32(v.X0) && b.Size >= v.MinBytes && wide
		if want != drawn[int32(id)] {
			t.Fatalf("%s [%d,%d) w=%d: block %d (size %d, [%d,%d)) drawn=%v, want %v (min %d bytes)",
				name, v.X0, v.X1, width, id, b.Size, b.Start, b.End, drawn[int32(id)], want, v.MinBytes)
		}
	}
	half := max(1, v.MinBytes/2)
	for _, b := range v.Blocks {
		if len(b.Edges) == 0 {
			t.Fatalf("%s: block %d has no edge", name, b.ID)
		}
		first := 0
		if int(b.Start) > v.X0 {
			first = sort.Search(v.Columns, func(c int) bool { return v.Col(c+1) > int(b.Start) })
		}
		if int(b.Edges[0].Col) != first {
			t.Fatalf("%s: block %d starts at entry %d, first edge at column %d, want %d", name, b.ID, b.Start, b.Edges[0].Col, first)
		}
		e := 0
		for c := first; c < v.Columns; c++ {
			at := v.Col(c)
			if c == first {
				at = max(at, int(b.Start))
			}
			if int(b.End) <= at {
				break
			}
			for e+1 < len(b.Edges) && int(b.Edges[e+1].Col) <= c {
				e++
			}
			got, want := b.Edges[e].OffsetBytes, bruteOffset(m, b.ID, at)
			if int(b.Edges[e].Col) == c && got != want {
				t.Fatalf("%s: block %d column %d: edge %d, exact offset %d", name, b.ID, c, got, want)
			}
			if got < want || got-want >= half {
				t.Fatalf("%s: block %d column %d (entry %d): drawn at %d, exact %d (half a pixel %d)", name, b.ID, c, at, got, want, half)
			}
		}
	}
	// the band: column min/max of the curves
	for c := 0; c < v.Columns; c++ {
		mn, mx := int64(1<<62), int64(-1)
		for i := v.Col(c); i < v.Col(c+1); i++ {
			mn, mx = min(mn, m.Replay.Timeline.Allocated[i]), max(mx, m.Replay.Timeline.Allocated[i])
		}
		if v.AllocMin[c] != mn || v.AllocMax[c] != mx {
			t.Fatalf("%s: column %d allocated %d..%d, want %d..%d", name, c, v.AllocMin[c], v.AllocMax[c], mn, mx)
		}
	}
}

func TestViewHighlight(t *testing.T) {
	for _, in := range inputs(t) {
		m := in.m
		acc := func(m *Memory, id int) bool { return m.Alloc(id).Category == memory.CatActivation }
		x0 := m.n / 4
		v, err := m.View(ViewQuery{X0: x0, X1: min(m.n, x0+4000), Width: 700, Height: 300, Highlight: acc})
		if err != nil {
			t.Fatal(err)
		}
		for c := 0; c < v.Columns; c++ {
			i := v.Col(c)
			var want int64
			for id, b := range m.Blocks {
				if int(b.Start) <= i && int(b.End) > i && acc(m, id) {
					want += b.Size
				}
			}
			if v.Highlighted[c] != want {
				t.Fatalf("%s: column %d highlighted %d, want %d", in.name, c, v.Highlighted[c], want)
			}
		}
		for _, b := range v.Blocks {
			if b.Highlighted != acc(m, int(b.ID)) {
				t.Fatalf("%s: block %d highlight flag wrong", in.name, b.ID)
			}
		}
	}
}

func TestViewBadQueries(t *testing.T) {
	m := inputs(t)[0].m
	for _, q := range []ViewQuery{
		{X0: -1, X1: 10, Width: 10, Height: 10},
		{X0: 0, X1: m.n + 1, Width: 10, Height: 10},
		{X0: 5, X1: 5, Width: 10, Height: 10},
		{X0: 0, X1: 10, Width: 0, Height: 10},
		{X0: 0, X1: 10, Width: 10, Height: 1 << 20},
	} {
		if _, err := m.View(q); err == nil {
			t.Errorf("%+v accepted", q)
		}
	}
}

func TestStateMatchesDump(t *testing.T) {
	for _, in := range inputs(t) {
		m := in.m
		// after the last entry the state is the dump's segments and blocks
		st := m.State(m.n - 1)
		want := m.Snap.DeviceSegments(m.Device)
		if len(st.Segments) > len(want) {
			t.Fatalf("%s: %d segments at the end, the dump has %d", in.name, len(st.Segments), len(want))
		}
		var dumpActive int64
		var dumpBlocks int
		for _, g := range want {
			for _, b := range g.Blocks {
				if b.State != snapshot.BlockInactive {
					dumpActive += b.Size
					dumpBlocks++
				}
			}
		}
		var active int64
		for _, g := range st.Segments {
			for _, b := range g.Blocks {
				active += b.SizeBytes
			}
		}
		consistent := m.Replay.End.Active == m.Replay.Timeline.Active[m.n-1]
		if !consistent && in.name != "snapgen60k" {
			t.Fatalf("%s: the replay ends at %d active bytes, the dump holds %d", in.name, m.Replay.Timeline.Active[m.n-1], m.Replay.End.Active)
		}
		// (snapgen's final segments are not derived from its trace)
		if consistent && (active != dumpActive || st.ActiveBlocks != dumpBlocks || len(st.Unplaced) != 0) {
			t.Fatalf("%s: end state %d active bytes in %d blocks (%d unplaced), the dump %d in %d", in.name, active, st.ActiveBlocks, len(st.Unplaced), dumpActive, dumpBlocks)
		}
		if consistent && st.SegmentBytes != st.ReservedBytes {
			t.Fatalf("%s: end segments %d bytes, reserved %d", in.name, st.SegmentBytes, st.ReservedBytes)
		}
		// at any entry the segments add up to the replay's reserved bytes and
		// free space is what the active blocks leave
		rng := rand.New(rand.NewPCG(11, 12))
		for q := 0; q < 20; q++ {
			i := rng.IntN(m.n)
			st := m.State(i)
			if st.Replayed > m.ckpt.k || st.Replayed < 0 {
				t.Fatalf("%s: replayed %d entries (K=%d)", in.name, st.Replayed, m.ckpt.k)
			}
			if consistent && st.SegmentBytes != st.ReservedBytes {
				t.Fatalf("%s: after entry %d segments hold %d bytes, the replay reserves %d", in.name, i, st.SegmentBytes, st.ReservedBytes)
			}
			var placed int64
			for _, g := range st.Segments {
				for _, b := range g.Blocks {
					placed += b.SizeBytes
				}
			}
			if placed+st.InactiveBytes != st.SegmentBytes {
				t.Fatalf("%s: after entry %d blocks %d + free %d != segments %d", in.name, i, placed, st.InactiveBytes, st.SegmentBytes)
			}
		}
	}
}

// The breakdown at the peak is analyze's: same categories and bytes.
func TestBreakdownAtPeakMatchesAnalysis(t *testing.T) {
	for _, in := range inputs(t)[:3] {
		m := in.m
		s := m.Snap
		a := memory.Analyze(s, m.Device, memory.Options{}).Result
		got := m.Breakdown(a.Peak.EventIndex, ByCategory)
		want := map[string]int64{}
		for _, g := range a.Categories {
			want[g.Category.String()] = g.Bytes
		}
		if len(got) != len(want) {
			t.Fatalf("%s: %d categories, analyze %d", in.name, len(got), len(want))
		}
		var total int64
		for _, r := range got {
			if want[r.Name] != r.Bytes {
				t.Fatalf("%s: %s %d bytes, analyze %d", in.name, r.Name, r.Bytes, want[r.Name])
			}
			total += r.Bytes
		}
		if total != a.Peak.AllocatedBytes {
			t.Fatalf("%s: breakdown total %d, peak %d", in.name, total, a.Peak.AllocatedBytes)
		}
		// keyword groups: analyze's (none of these inputs has bundle labels)
		grp := m.Breakdown(a.Peak.EventIndex, ByGroup)
		wantGrp := map[string]int64{}
		for _, g := range a.Groups {
			wantGrp[g.Name] = g.Bytes
		}
		if len(grp) != len(wantGrp) {
			t.Fatalf("%s: %d groups, analyze %d", in.name, len(grp), len(wantGrp))
		}
		for _, r := range grp {
			if wantGrp[r.Name] != r.Bytes {
				t.Fatalf("%s: group %s %d bytes, analyze %d", in.name, r.Name, r.Bytes, wantGrp[r.Name])
			}
		}
		// sources: analyze's names and bytes (stacks without a module path)
		src := m.Breakdown(a.Peak.EventIndex, BySource)
		wantSrc := map[string]int64{}
		for _, g := range a.Sources {
			wantSrc[g.Name] = g.Bytes
		}
		if len(src) != len(wantSrc) {
			t.Fatalf("%s: %d sources, analyze %d", in.name, len(src), len(wantSrc))
		}
		for _, r := range src {
			if wantSrc[r.Name] != r.Bytes {
				t.Fatalf("%s: source %s %d bytes, analyze %d", in.name, r.Name, r.Bytes, wantSrc[r.Name])
			}
		}
	}
}

func TestModuleGroupName(t *testing.T) {
	for in, want := range map[string]string{
		"model.layers.3.mlp":           "model.layers.*.mlp",
		"transformer.h.11.attn.c_attn": "transformer.h.*.attn.c_attn",
		"0.1":                          "*.*",
		"layer2x.conv":                 "layer2x.conv",
	} {
		if got := moduleGroupName(in); got != want {
			t.Errorf("%s: %s, want %s", in, got, want)
		}
	}
}
