package view

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/ptscope/ptscope/internal/memory"
	"github.com/ptscope/ptscope/internal/snapshot"
	"github.com/ptscope/ptscope/internal/snapshot/snapgen"
	"github.com/ptscope/ptscope/internal/timeline"
)

// decodedView is EncodeView's output read back as ui/src/data.js reads
// it, in sub-rows (eighths of a pixel row from y0) and columns.
type decodedView struct {
	x0, x1, cols, nblocks, summarized, height int
	y0, y1, minBytes                          float64
	flags                                     byte
	pal                                       []decodedPal
	curves                                    [][]int64
	phase                                     []byte
	timesUS                                   []int64
	blocks                                    []decodedBlock
}

type decodedPal struct {
	cat, flags byte
	key        uint64
	all        []uint64 // with all keys: by keyOrder
}

type decodedBlock struct {
	c0, c1, pal int
	size        int64
	cols        []int
	bots        []int64
	id          int
}

func decodeViewBytes(b []byte) (*decodedView, error) {
	o := 0
	var err error
	need := func(n int) bool {
		if err == nil && o+n > len(b) {
			err = fmt.Errorf("ends at %d, %d more bytes expected", len(b), o+n-len(b))
		}
		return err == nil
	}
	u32 := func() int {
		if !need(4) {
			return 0
		}
		o += 4
		return int(binary.LittleEndian.Uint32(b[o-4:]))
	}
	f64 := func() float64 {
		if !need(8) {
			return 0
		}
		o += 8
		return math.Float64frombits(binary.LittleEndian.Uint64(b[o-8:]))
	}
	u8 := func() byte {
		if !need(1) {
			return 0
		}
		o++
		return b[o-1]
	}
	uv := func() uint64 {
		x, n := binary.Uvarint(b[o:])
		if n <= 0 && err == nil {
			err = fmt.Errorf("bad uvarint at %d", o)
		}
		o += max(n, 0)
		return x
	}
	sv := func() int64 {
		x, n := binary.Varint(b[o:])
		if n <= 0 && err == nil {
			err = fmt.Errorf("bad varint at %d", o)
		}
		o += max(n, 0)
		return x
	}
	if v := u32(); v != viewVersion {
		return nil, fmt.Errorf("version %d", v)
	}
	d := &decodedView{x0: u32(), x1: u32(), cols: u32(), nblocks: u32(), summarized: u32(), height: u32(), y0: f64(), y1: f64(), minBytes: f64()}
	d.flags = u8()
	d.pal = make([]decodedPal, uv())
	for k := range d.pal {
		d.pal[k] = decodedPal{cat: u8(), flags: u8()}
		if d.flags&4 == 0 {
			d.pal[k].key = uv()
			continue
		}
		for range keyOrder {
			d.pal[k].all = append(d.pal[k].all, uv())
		}
	}
	nc := 4
	if d.flags&1 != 0 {
		nc = 5
	}
	for k := 0; k < nc && err == nil; k++ {
		c := make([]int64, d.cols)
		var r int64
		for i := range c {
			r += sv()
			c[i] = r
		}
		d.curves = append(d.curves, c)
	}
	if need(d.cols) {
		d.phase = b[o : o+d.cols]
		o += d.cols
	}
	var us int64
	for c := 0; c < d.cols && err == nil; c++ {
		us += sv()
		d.timesUS = append(d.timesUS, us)
	}
	var c0, id int
	var bot int64
	for k := 0; k < d.nblocks && err == nil; k++ {
		c0 += int(uv())
		bl := decodedBlock{c0: c0, id: -1}
		bl.c1 = c0 + int(uv())
		bl.pal = int(uv())
		bl.size = int64(uv())
		ne := int(uv())
		bot += sv()
		col, r := c0, bot
		bl.cols, bl.bots = []int{col}, []int64{r}
		for e := 1; e < ne && err == nil; e++ {
			col += int(uv())
			r -= int64(uv())
			bl.cols, bl.bots = append(bl.cols, col), append(bl.bots, r)
		}
		if d.flags&2 != 0 {
			id += int(uv())
			bl.id = id
		}
		d.blocks = append(d.blocks, bl)
	}
	if err == nil && o != len(b) {
		err = fmt.Errorf("%d bytes left over", len(b)-o)
	}
	return d, err
}

// checkDecoded holds a decoded view to the timeline's: every block at its
// columns, category, colour key and highlight, every edge at its column and
// its offset within half a sub-row, the curves within half a sub-row.
func checkDecoded(t *testing.T, m *timeline.Memory, v *timeline.View, d *decodedView, color timeline.By, ids bool) {
	t.Helper()
	if d.x0 != v.X0 || d.x1 != v.X1 || d.cols != v.Columns || d.nblocks != len(v.Blocks) || d.summarized != v.Summarized ||
		d.y0 != float64(v.Y0) || d.y1 != float64(v.Y1) || d.minBytes != float64(v.MinBytes) {
		t.Fatalf("header %+v, view [%d,%d) %d columns %d blocks", d, v.X0, v.X1, v.Columns, len(v.Blocks))
	}
	subs := float64(d.height*subRows) / (d.y1 - d.y0) // sub-rows per byte
	near := func(sub int64, bytes int64) bool {
		return math.Abs(float64(sub)-float64(bytes-v.Y0)*subs) <= 0.5+1e-9
	}
	want := [][]int64{v.AllocMin, v.AllocMax, v.ResMin, v.ResMax}
	if v.Highlighted != nil {
		want = append(want, v.Highlighted)
	}
	if len(d.curves) != len(want) {
		t.Fatalf("%d curves, want %d", len(d.curves), len(want))
	}
	lim := float64(4 * d.height * subRows)
	for k := range want {
		for c := range want[k] {
			if x := float64(want[k][c]-v.Y0) * subs; math.Abs(x) > lim {
				if float64(d.curves[k][c]) != math.Copysign(lim, x) {
					t.Fatalf("curve %d column %d: %d sub-rows for %d bytes, outside the plot: want it clamped to %.0f", k, c, d.curves[k][c], want[k][c], lim)
				}
				continue
			}
			if !near(d.curves[k][c], want[k][c]) {
				t.Fatalf("curve %d column %d: %d sub-rows for %d bytes", k, c, d.curves[k][c], want[k][c])
			}
		}
	}
	for c, p := range v.Phase {
		if d.phase[c] != byte(p) {
			t.Fatalf("column %d phase %d, want %d", c, d.phase[c], p)
		}
		want := int64(0)
		if m.Time(0) != 0 {
			want = (m.Time(v.Col(c)) - m.Time(0)) / 1000
		}
		if d.timesUS[c] != want {
			t.Fatalf("column %d at %d us, want %d", c, d.timesUS[c], want)
		}
	}
	for k, b := range v.Blocks {
		db := d.blocks[k]
		p := d.pal[db.pal]
		if p.cat != byte(m.Alloc(int(b.ID)).Category) || (p.flags&1 != 0) != b.Highlighted {
			t.Fatalf("block %d: palette %+v", b.ID, p)
		}
		if d.flags&4 == 0 && p.key != uint64(uint32(m.Key(color, int(b.ID)))) {
			t.Fatalf("block %d: palette key %d, want %d", b.ID, p.key, m.Key(color, int(b.ID)))
		}
		for k, by := range keyOrder {
			if d.flags&4 != 0 && p.all[k] != uint64(uint32(m.Key(by, int(b.ID)))) {
				t.Fatalf("block %d: %s key %d, want %d", b.ID, by, p.all[k], m.Key(by, int(b.ID)))
			}
		}
		// drawn over the columns that hold its entries in range
		first, last := max(int(b.Start), v.X0), min(int(b.End), v.X1)-1
		if v.Col(db.c0) > first || db.c0+1 < v.Columns && v.Col(db.c0+1) <= first || db.c1 <= db.c0 ||
			v.Col(db.c1-1) > last || db.c1 < v.Columns && v.Col(db.c1) <= last {
			t.Fatalf("block %d [%d,%d): columns [%d,%d)", b.ID, b.Start, b.End, db.c0, db.c1)
		}
		if math.Abs(float64(db.size)-float64(b.Size)*subs) > 0.5+1e-9 {
			t.Fatalf("block %d: %d sub-rows for %d bytes", b.ID, db.size, b.Size)
		}
		if len(db.cols) != len(b.Edges) {
			t.Fatalf("block %d: %d edges, want %d", b.ID, len(db.cols), len(b.Edges))
		}
		for e, ed := range b.Edges {
			if db.cols[e] != int(ed.Col) || !near(db.bots[e], ed.OffsetBytes) {
				t.Fatalf("block %d edge %d: column %d at %d sub-rows, want column %d at %d bytes", b.ID, e, db.cols[e], db.bots[e], ed.Col, ed.OffsetBytes)
			}
		}
		if ids && db.id != int(b.ID) || !ids && db.id != -1 {
			t.Fatalf("block %d decoded as id %d (ids %v)", b.ID, db.id, ids)
		}
	}
}

// The binary view decodes to the timeline's view, as the page reads it.
func TestViewEncoding(t *testing.T) {
	s := loadSet(t, testSnapshot(t))
	it, _ := s.inputs.get(0)
	m := it.mem[0].timeline()
	for _, c := range []struct {
		path  string
		q     timeline.ViewQuery
		color timeline.By
	}{
		{"x0=100&x1=2000&w=300&h=200&hl=category:4", timeline.ViewQuery{X0: 100, X1: 2000, Width: 300, Height: 200,
			Highlight: func(m *timeline.Memory, id int) bool { return m.Key(timeline.ByCategory, id) == 4 }}, timeline.ByCategory},
		{"w=1200&h=500&color=source", timeline.ViewQuery{X0: 0, X1: m.Len(), Width: 1200, Height: 500}, timeline.BySource},
		{"x0=700&x1=760&w=900&h=300&y0=100000000&y1=900000000", timeline.ViewQuery{X0: 700, X1: 760, Width: 900, Height: 300, Y0: 1e8, Y1: 9e8}, timeline.ByCategory},
		// zoomed in bytes far below the curves
		{"x0=700&x1=900&w=900&h=300&y0=1000&y1=2000", timeline.ViewQuery{X0: 700, X1: 900, Width: 900, Height: 300, Y0: 1000, Y1: 2000}, timeline.ByCategory},
	} {
		body := ask(t, s, "mem/view?input=0&"+c.path)
		v, err := m.View(c.q)
		if err != nil {
			t.Fatal(err)
		}
		d, err := decodeViewBytes(body)
		if err != nil {
			t.Fatalf("%s: %v", c.path, err)
		}
		if len(v.Blocks) == 0 {
			t.Fatalf("%s: no block drawn", c.path)
		}
		checkDecoded(t, m, v, d, c.color, true)
		// without ids
		d, err = decodeViewBytes(EncodeView(m, v, ViewEncoding{Color: c.color, Height: c.q.Height}))
		if err != nil {
			t.Fatal(err)
		}
		checkDecoded(t, m, v, d, c.color, false)
		// and every block's key in every colouring
		d, err = decodeViewBytes(EncodeView(m, v, ViewEncoding{Color: c.color, Height: c.q.Height, IDs: true, AllKeys: true}))
		if err != nil {
			t.Fatal(err)
		}
		checkDecoded(t, m, v, d, c.color, true)
	}
}

// gpt2Memory indexes a generated GPT-2 small training (batch 8 x 512),
// whose blocks of 12-785 MiB are pixels tall in every view.
func gpt2Memory(tb testing.TB, entries int) *timeline.Memory {
	tb.Helper()
	var buf bytes.Buffer
	if err := snapgen.Write(&buf, snapgen.Options{Entries: entries, Seed: 1, Model: snapgen.ModelGPT2Small}); err != nil {
		tb.Fatal(err)
	}
	s, err := snapshot.Read(&buf)
	if err != nil {
		tb.Fatal(err)
	}
	a := memory.Analyze(s, 0, memory.Options{})
	return timeline.NewMemory(s, 0, a.Replay, a.Phases)
}

// Encoded views of a training that draws thousands of blocks decode to the
// timeline's views at every zoom.
func TestViewEncodingManyBlocks(t *testing.T) {
	t.Parallel()
	m := gpt2Memory(t, 100_000)
	n := m.Len()
	for _, span := range []int{n, n / 3, 7000, 500, 3} {
		x0 := (n - span) / 2
		for _, color := range []timeline.By{timeline.ByCategory, timeline.ByStack} {
			v, err := m.View(timeline.ViewQuery{X0: x0, X1: x0 + span, Width: 1500, Height: 600})
			if err != nil {
				t.Fatal(err)
			}
			if span == n && len(v.Blocks) < 1000 {
				t.Fatalf("the whole trace draws %d blocks", len(v.Blocks))
			}
			d, err := decodeViewBytes(EncodeView(m, v, ViewEncoding{Color: color, Height: 600}))
			if err != nil {
				t.Fatal(err)
			}
			checkDecoded(t, m, v, d, color, false)
		}
	}
}

// An --html file holds, for every block its tiles draw, a row of details
// equal to what the server's block endpoint answers; its tiles are gzipped
// views with ids, of the ranges they say.
func TestHTMLTilesAndBlocks(t *testing.T) {
	t.Parallel()
	m := gpt2Memory(t, 30_000)
	r := memory.Analyze(m.Snap, 0, memory.Options{})
	var page bytes.Buffer
	if err := WriteHTML(&page, "t", []HTMLMemory{{Path: "g.pickle", Analysis: r}}, nil, HTMLOptions{Budget: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	s := page.String()
	const open = `<script type="application/json" id="ptscope-data">`
	j := strings.Index(s, open) + len(open)
	k := strings.Index(s[j:], "</script>") + j
	var d htmlData
	if err := json.Unmarshal([]byte(s[j:k]), &d); err != nil {
		t.Fatal(err)
	}
	tiles := d.Answers["mem/view"]
	widths := map[string]bool{}
	for _, tile := range tiles {
		widths[fmt.Sprint(atoi(t, tile.Q["x1"])-atoi(t, tile.Q["x0"]))] = true
	}
	if len(widths) < 3 || len(tiles) < 7 {
		t.Fatalf("%d levels in %d tiles within 1 MB", len(widths), len(tiles))
	}
	hm := d.Blocks["0"]
	var sum MemSummary
	if b, _ := json.Marshal(d.Answers["mem/summary"][0].Body); json.Unmarshal(b, &sum) != nil || sum.Entries != m.Len() {
		t.Fatalf("summary %+v", d.Answers["mem/summary"])
	}
	row := map[int64]int{}
	for k, id := range hm.Cols["id"] {
		row[id] = k
	}
	text := map[string]bool{}
	for _, c := range hm.TextCols {
		text[c] = true
	}
	tl := timeline.NewMemory(m.Snap, 0, r.Replay, r.Phases)
	for _, tile := range tiles {
		raw, err := base64.StdEncoding.DecodeString(tile.GZ)
		if err != nil {
			t.Fatal(err)
		}
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(zr)
		if err != nil {
			t.Fatal(err)
		}
		dv, err := decodeViewBytes(body)
		if err != nil {
			t.Fatal(err)
		}
		v, err := tl.View(timeline.ViewQuery{X0: atoi(t, tile.Q["x0"]), X1: atoi(t, tile.Q["x1"]), Width: 1200, Height: 400})
		if err != nil {
			t.Fatal(err)
		}
		checkDecoded(t, tl, v, dv, timeline.ByCategory, true)
		for _, b := range dv.blocks {
			k, ok := row[int64(b.id)]
			if !ok {
				t.Fatalf("tile [%s,%s) draws block %d, which has no details", tile.Q["x0"], tile.Q["x1"], b.id)
			}
			want, _ := json.Marshal(blockDetails(tl, b.id))
			var w map[string]any
			json.Unmarshal(want, &w)
			for c, col := range hm.Cols {
				got := any(float64(col[k]))
				switch {
				case text[c]:
					got = hm.Strings[col[k]]
				case c == "alloc_time_ns" || c == "free_time_ns":
					if col[k] < 0 {
						got = nil
					} else {
						got = float64(col[k] + sum.StartNS)
					}
				case c == "stack_id" || c == "free_stack_id":
					continue // frames are shared by stack: checked below
				}
				if wv, ok := w[c]; (ok || got != nil && got != "" && got != float64(0)) && fmt.Sprint(wv) != fmt.Sprint(got) {
					t.Fatalf("block %d %s: %v, the server %v", b.id, c, got, wv)
				}
			}
			a := tl.Alloc(b.id)
			if st := hm.Stacks[fmt.Sprint(hm.Cols["stack_id"][k])]; len(st) != len(frames(tl, a.Stack)) {
				t.Fatalf("block %d: %d frames, the server %d", b.id, len(st), len(frames(tl, a.Stack)))
			}
		}
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
