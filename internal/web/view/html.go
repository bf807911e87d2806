package view

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/ptscope/ptscope/internal/kineto"
	"github.com/ptscope/ptscope/internal/memory"
	"github.com/ptscope/ptscope/internal/perf"
	"github.com/ptscope/ptscope/internal/timeline"
	"github.com/ptscope/ptscope/internal/web/ui"
)

// HTMLMemory is one snapshot device of an --html file.
type HTMLMemory struct {
	Path      string
	Analysis  *memory.Analysis
	PhaseRows []memory.PhaseRow
}

// HTMLTrace is one profiler trace of an --html file.
type HTMLTrace struct {
	Path   string
	Model  *kineto.Trace
	Result *perf.Rank
}

// HTMLOptions size an --html file.
type HTMLOptions struct {
	// Budget is the bytes of memory views (as stored: base64) and block
	// details a file may hold per input; levels of detail are added while
	// they fit (default 6 MB, which keeps a 1M-entry snapshot's file under
	// 10 MB with its result, breakdowns and states).
	Budget int
	// Width and Height are the pixels each inlined view is computed for.
	Width, Height int
}

func (o *HTMLOptions) defaults() {
	if o.Budget <= 0 {
		o.Budget = 6 << 20
	}
	if o.Width <= 0 {
		o.Width = 1200
	}
	if o.Height <= 0 {
		o.Height = 400
	}
}

// htmlData is the page's data (<script id="ptscope-data">): the inputs and the views' answers
// the file holds, recorded by calling each view's one function (views.go)
// with the queries the page will ask; ui/src/data.js answers the page's
// requests from them.
type htmlData struct {
	Inputs []Input `json:"inputs"`
	// Answers are by view name, each with its query (input included).
	Answers map[string][]recorded `json:"answers"`
	// Blocks are the mem/block answers of each input's device (by input
	// id), stored as columns.
	Blocks map[string]*htmlBlocks `json:"blocks,omitempty"`
}

// recorded is one answer of a view: JSON as the server sends it, or a
// binary answer gzipped (the page inflates it with the browser's
// DecompressionStream) in base64.
type recorded struct {
	Q    map[string]string `json:"q"`
	Body any               `json:"body,omitempty"`
	GZ   string            `json:"gz,omitempty"`
}

// gzBody is a binary answer already gzipped and in base64.
type gzBody string

// recorder calls views and keeps their answers.
type recorder struct {
	d *htmlData
}

// ask records view name's answer to p for input it (p gets input=it.ID).
// The parameters named in unkeyed are not kept in the answer's query
// (the page matches without them).
func (r *recorder) ask(it *Input, name string, p params, unkeyed ...string) (any, error) {
	p["input"] = []string{strconv.Itoa(it.ID)}
	v, err := views[name].build(it, p)
	if err != nil {
		return nil, err
	}
	r.put(name, p, v, unkeyed...)
	return v, nil
}

// put records v as view name's answer to p; it returns the bytes it adds.
func (r *recorder) put(name string, p params, v any, unkeyed ...string) int {
	q := map[string]string{}
	for k := range p {
		q[k] = p.get(k)
	}
	for _, k := range unkeyed {
		delete(q, k)
	}
	rec := recorded{Q: q}
	size := 0
	switch b := v.(type) {
	case RawBody:
		rec.GZ = base64.StdEncoding.EncodeToString(Gzip(b))
		size = len(rec.GZ)
	case gzBody:
		rec.GZ, size = string(b), len(b)
	default:
		rec.Body = v
	}
	r.d.Answers[name] = append(r.d.Answers[name], rec)
	return size
}

// WriteHTML writes one offline page showing the inputs: the page's script
// and styles and, per input, the views' answers for what the page asks
// first (summary, breakdowns, states at the peak and the end) and views at
// a few levels of detail (tiles that overlap by half, so that any range up
// to a tile's half fits one tile), with the details of every block they
// draw. No request leaves the page.
func WriteHTML(w io.Writer, title string, mems []HTMLMemory, traces []HTMLTrace, o HTMLOptions) error {
	o.defaults()
	d := &htmlData{Answers: map[string][]recorded{}, Blocks: map[string]*htmlBlocks{}}
	r := &recorder{d: d}
	for _, hm := range mems {
		a := hm.Analysis
		tl := timeline.NewMemory(a.Snapshot, a.Result.Device, a.Replay, a.Phases)
		it := &Input{ID: len(d.Inputs), Path: hm.Path, Kind: "snapshot", Status: statusReady,
			Devices: []DeviceInfo{{Device: a.Result.Device, Entries: a.Result.Entries, Peak: a.Result.Peak.AllocatedBytes}},
			mem:     []*memDevice{{result: a.Result, tl: tl, phases: hm.PhaseRows}}}
		if err := recordMemory(r, it, o); err != nil {
			return fmt.Errorf("%s: %w", hm.Path, err)
		}
		d.Inputs = append(d.Inputs, *it)
	}
	var traceInputs []*Input
	peers := &peerSet{ready: func() []*Input { return traceInputs }}
	for _, ht := range traces {
		it := &Input{ID: len(d.Inputs), Path: ht.Path, Kind: "trace", Status: statusReady, peers: peers,
			trace: &traceInput{model: ht.Model, result: ht.Result, tl: timeline.NewTrace(ht.Model)}}
		if err := recordTrace(r, it, o); err != nil {
			return fmt.Errorf("%s: %w", ht.Path, err)
		}
		traceInputs = append(traceInputs, it)
		d.Inputs = append(d.Inputs, *it)
	}
	// the distributed view compares the file's traces
	for _, it := range traceInputs {
		if _, err := r.ask(it, "trace/distributed", params{}); err != nil {
			return fmt.Errorf("%s: %w", it.Path, err)
		}
	}
	js, err := json.Marshal(d)
	if err != nil {
		return err
	}
	return writePage(w, pageData{Title: title, Inline: true, CSS: ui.Asset("app.css"), JS: ui.Asset("app.js"), Data: js})
}

// htmlBreakdowns are the breakdowns an --html file holds at the peak.
var htmlBreakdowns = []timeline.By{timeline.ByCategory, timeline.ByGroup, timeline.BySource, timeline.ByModuleGroup, timeline.ByModule, timeline.ByStack}

// recordMemory records a snapshot device's views: the summary, the tiles,
// the details of every block they and the states draw, the names of their
// keys in every colouring, the breakdowns at the peak and, at the peak,
// the end and each OOM, the allocator state, its entry and its breakdown
// by category.
func recordMemory(r *recorder, it *Input, o HTMLOptions) error {
	md := it.mem[0]
	m := md.timeline()
	dev := int(m.Device)
	if _, err := r.ask(it, "mem/summary", query("device", dev)); err != nil {
		return err
	}
	blocks := newHTMLBlocks()
	r.d.Blocks[strconv.Itoa(it.ID)] = blocks
	n := m.Len()
	seen := map[int32]bool{}
	addBlock := func(id int32) {
		if seen[id] {
			return
		}
		seen[id] = true
		bd := blockDetails(m, int(id))
		a := m.Alloc(int(id))
		blocks.Stacks[strconv.Itoa(int(a.Stack))] = bd.Frames
		bd.StackID = int(a.Stack)
		if bd.FreeFrames != nil {
			blocks.Stacks[strconv.Itoa(int(a.FreeStack))] = bd.FreeFrames
			bd.FreeStackID = int(a.FreeStack)
		}
		blocks.add(bd, m.Time(0))
	}
	if n > 0 {
		if err := recordTiles(r, it, md, o, addBlock); err != nil {
			return err
		}
		peak := md.result.Peak.EventIndex
		entries := []int{peak, n - 1}
		for _, x := range md.result.OOMs {
			if x.EventIndex >= 0 && x.EventIndex < n {
				entries = append(entries, x.EventIndex)
			}
		}
		done := map[int]bool{}
		for _, e := range entries {
			if done[e] {
				continue
			}
			done[e] = true
			st, err := r.ask(it, "mem/state", query("device", dev, "event", e))
			if err != nil {
				return err
			}
			for _, sg := range st.(*timeline.State).Segments {
				for _, b := range sg.Blocks {
					addBlock(b.ID)
				}
			}
			if e >= 0 {
				if _, err := r.ask(it, "mem/event", query("device", dev, "event", e)); err != nil {
					return err
				}
			}
			if _, err := r.ask(it, "mem/breakdown", query("device", dev, "by", "category", "event", e)); err != nil {
				return err
			}
		}
	}
	blocks.sort()
	for _, by := range htmlBreakdowns {
		if _, err := r.ask(it, "mem/breakdown", query("device", dev, "by", by.String())); err != nil {
			return err
		}
	}
	// the names of every key the tiles' blocks have, in every colouring
	ids := blocks.Cols["id"]
	for _, by := range keyOrder {
		var keys []string
		have := map[int32]bool{}
		for _, id := range ids {
			if k := m.Key(by, int(id)); !have[k] {
				have[k] = true
				keys = append(keys, strconv.Itoa(int(k)))
			}
		}
		if _, err := r.ask(it, "mem/names", query("device", dev, "by", by.String(), "keys", strings.Join(keys, ",")), "keys"); err != nil {
			return err
		}
	}
	return nil
}

// recordTiles records the memory views of the tiles: the whole trace, then
// halves, quarters, ... overlapping by half, while the levels fit the
// budget (each level's tiles and the details of the blocks it adds).
func recordTiles(r *recorder, it *Input, md *memDevice, o HTMLOptions, addBlock func(int32)) error {
	m := md.timeline()
	n := m.Len()
	used := 0
	seen := map[int32]bool{}
	for level := 0; ; level++ {
		type tile struct {
			p  params
			gz gzBody
		}
		var tiles []tile
		var ids []int32
		size := 0
		span, step := n, n
		if level > 0 {
			step = max(1, n>>level)
			span = min(n, 2*step)
		}
		for x0 := 0; x0 < n; x0 += step {
			x1 := min(n, x0+span)
			p := query("input", it.ID, "device", int(m.Device), "x0", x0, "x1", x1, "w", o.Width, "h", o.Height, "keys", "all")
			v, enc, err := memViewOf(md, p)
			if err != nil {
				return err
			}
			gz := gzBody(base64.StdEncoding.EncodeToString(Gzip(enc)))
			size += len(gz)
			tiles = append(tiles, tile{p, gz})
			for _, bl := range v.Blocks {
				ids = append(ids, bl.ID)
			}
			if x1 == n {
				break
			}
		}
		newBlocks := 0
		for _, id := range ids {
			if !seen[id] {
				seen[id] = true
				newBlocks++
			}
		}
		// a block's details cost about htmlBlockBytes of JSON besides its stack
		if level > 0 && used+size+htmlBlockBytes*newBlocks > o.Budget {
			return nil
		}
		for _, t := range tiles {
			used += r.put("mem/view", t.p, t.gz)
		}
		used += htmlBlockBytes * newBlocks
		for _, id := range ids {
			addBlock(id)
		}
		if span <= o.Width || level >= 16 {
			return nil
		}
	}
}

// recordTrace records a trace's views: the summary, the critical path, the
// GPU view, the memory curve, the timeline's tiles at levels of detail
// while they fit the budget, and the details of the critical path's events
// and of the events the tiles draw while those fit a tenth of it.
func recordTrace(r *recorder, it *Input, o HTMLOptions) error {
	ti := it.trace
	for _, name := range []string{"trace/summary", "trace/gpu"} {
		if _, err := r.ask(it, name, params{}); err != nil {
			return err
		}
	}
	cp, err := r.ask(it, "trace/critical", params{})
	if err != nil {
		return err
	}
	var events []int64
	for _, sg := range cp.(*TraceCritical).Path {
		if sg.Event >= 0 {
			events = append(events, sg.Event)
		}
	}
	span := ti.tl.End - ti.tl.Start
	if span <= 0 {
		return nil
	}
	if _, err := r.ask(it, "trace/memory", query("t0", ti.tl.Start, "t1", ti.tl.End, "w", o.Width)); err != nil {
		return err
	}
	used := 0
	for level := 0; level < 8; level++ {
		step, w := span, span
		if level > 0 {
			step = max(1, span>>level)
			w = min(span, 2*step)
		}
		var tiles []params
		var outs []*TraceViewOut
		size := 0
		for t0 := ti.tl.Start; t0 < ti.tl.End; t0 += step {
			t1 := min(ti.tl.End, t0+w)
			p := query("input", it.ID, "t0", t0, "t1", t1, "w", o.Width)
			v, err := traceView(it, p)
			if err != nil {
				break
			}
			tv := v.(*TraceViewOut)
			size += 40*len(tv.Slices) + 20*len(tv.Merged)
			tiles, outs = append(tiles, p), append(outs, tv)
			if t1 == ti.tl.End {
				break
			}
		}
		if level > 0 && used+size > o.Budget {
			break
		}
		used += size
		for k, p := range tiles {
			r.put("trace/view", p, outs[k])
			for _, sl := range outs[k].Slices {
				events = append(events, sl[5])
			}
		}
	}
	// the events' details, the widest levels' first
	budget, done := o.Budget/10, map[int64]bool{}
	for _, e := range events {
		if done[e] || budget <= 0 {
			continue
		}
		done[e] = true
		v, err := r.ask(it, "trace/event", query("event", e))
		if err != nil {
			return err
		}
		ev := v.(*TraceEvent)
		budget -= 160 + 120*(len(ev.Stack)+len(ev.Linked)) + len(ev.Shapes) + len(ev.Types)
	}
	return nil
}

// htmlBlockBytes is about what a block's row of htmlBlocks costs in the
// file (measured: 117 on the 31,685 blocks of a 1M-entry GPT-2 training's).
const htmlBlockBytes = 120

// htmlBlocks are the details of the blocks an --html file's views draw
// (the mem/block answers of blockDetails, the view's one function), as
// columns with a row per block, in id order (ui/src/data.js rebuilds a
// BlockDetails from a row): a fifth of the bytes of one JSON object per
// block. Columns are named as BlockDetails' JSON fields; text fields are
// indices into Strings, and times are nanoseconds since the snapshot's
// first entry (summary.start_ns), -1 for none.
type htmlBlocks struct {
	Stacks   map[string][]Frame `json:"stacks"` // frames by stack id
	Strings  []string           `json:"strings"`
	Cols     map[string][]int64 `json:"cols"`
	TextCols []string           `json:"text_cols"` // columns of indices into Strings
	TimeCols []string           `json:"time_cols"` // columns of times since the first entry
	index    map[string]int64
}

// htmlCols are htmlBlocks' columns, in the order add appends a row's
// values.
var htmlCols = []string{"id", "address", "size_bytes", "requested_bytes", "stream", "alloc_event_index",
	"free_requested_event_index", "free_event_index", "allocated_after_alloc_bytes", "stack_id", "free_stack_id",
	"category", "origin", "module", "source", "step", "phase", "alloc_time_ns", "free_time_ns"}

func newHTMLBlocks() *htmlBlocks {
	t := &htmlBlocks{Stacks: map[string][]Frame{}, Cols: map[string][]int64{}, index: map[string]int64{},
		TextCols: []string{"category", "origin", "module", "source", "step", "phase"},
		TimeCols: []string{"alloc_time_ns", "free_time_ns"}}
	for _, k := range htmlCols {
		t.Cols[k] = []int64{}
	}
	return t
}

func (t *htmlBlocks) add(b *BlockDetails, startNS int64) {
	str := func(s string) int64 {
		i, ok := t.index[s]
		if !ok {
			i = int64(len(t.Strings))
			t.index[s] = i
			t.Strings = append(t.Strings, s)
		}
		return i
	}
	since := func(ns int64) int64 {
		if ns == 0 {
			return -1
		}
		return ns - startNS
	}
	row := [...]int64{int64(b.ID), int64(b.Address), b.SizeBytes, b.RequestedBytes, b.Stream, int64(b.AllocEvent),
		int64(b.FreeRequestedEvent), int64(b.FreeEvent), b.AllocatedAfterBytes, int64(b.StackID), int64(b.FreeStackID),
		str(b.Category), str(b.Origin), str(b.Module), str(b.Source), str(b.Step), str(b.Phase),
		since(b.AllocTimeNS), since(b.FreeTimeNS)}
	for i, k := range htmlCols {
		t.Cols[k] = append(t.Cols[k], row[i])
	}
}

// sort puts the rows in id order (the page finds a row by binary search).
func (t *htmlBlocks) sort() {
	ids := t.Cols["id"]
	order := make([]int, len(ids))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool { return ids[order[a]] < ids[order[b]] })
	for k, col := range t.Cols {
		c := make([]int64, len(col))
		for i, j := range order {
			c[i] = col[j]
		}
		t.Cols[k] = c
	}
}
