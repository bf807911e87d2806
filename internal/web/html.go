package web

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"sort"
	"strconv"

	"github.com/ptscope/ptscope/internal/kineto"
	"github.com/ptscope/ptscope/internal/memory"
	"github.com/ptscope/ptscope/internal/perf"
	"github.com/ptscope/ptscope/internal/timeline"
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

// htmlData is window.__PTSCOPE_DATA__: what data.js answers from.
type htmlData struct {
	Inputs []Input              `json:"inputs"`
	Mem    map[string]*htmlMem  `json:"mem,omitempty"`
	Trace  map[string]*htmlTrac `json:"trace,omitempty"`
}

type htmlTile struct {
	X0   int    `json:"x0"`
	X1   int    `json:"x1"`
	Data string `json:"data"` // base64 of the gzip of EncodeView (the page inflates it)
}

type htmlMem struct {
	Summary    *MemSummary                `json:"summary"`
	Tiles      []htmlTile                 `json:"tiles"`
	Levels     int                        `json:"levels"`
	Blocks     *htmlBlocks                `json:"blocks"`
	Stacks     map[string][]Frame         `json:"stacks"`
	States     map[string]*timeline.State `json:"states"`
	Breakdowns map[string]any             `json:"breakdowns"`
}

type htmlTrac struct {
	Summary *TraceSummary   `json:"summary"`
	Tiles   []*TraceViewOut `json:"tiles"`
	Memory  map[string]any  `json:"memory"`
}

// WriteHTML writes one offline page showing the inputs: the page's script
// and styles and, per input, views at a few levels of detail (tiles that
// overlap by half, so any range up to a tile's half fits one tile), the
// details of every block those views draw, breakdowns and the allocator
// state at the peak. No request leaves the page.
func WriteHTML(w io.Writer, title string, mems []HTMLMemory, traces []HTMLTrace, o HTMLOptions) error {
	o.defaults()
	d := htmlData{Mem: map[string]*htmlMem{}, Trace: map[string]*htmlTrac{}}
	for _, hm := range mems {
		id := len(d.Inputs)
		a := hm.Analysis
		tl := timeline.NewMemory(a.Snapshot, a.Result.Device, a.Replay, a.Phases)
		md := &memDevice{result: a.Result, tl: tl, phases: hm.PhaseRows}
		mem, err := htmlMemory(md, o)
		if err != nil {
			return fmt.Errorf("%s: %w", hm.Path, err)
		}
		d.Mem[strconv.Itoa(id)] = mem
		d.Inputs = append(d.Inputs, Input{ID: id, Path: hm.Path, Kind: "snapshot", Status: statusReady,
			Devices: []DeviceInfo{{Device: a.Result.Device, Entries: a.Result.Entries, Peak: a.Result.Peak.AllocatedBytes}}})
	}
	for _, ht := range traces {
		id := len(d.Inputs)
		ti := &traceInput{model: ht.Model, result: ht.Result, tl: timeline.NewTrace(ht.Model)}
		d.Trace[strconv.Itoa(id)] = htmlTraceData(ti, o)
		d.Inputs = append(d.Inputs, Input{ID: id, Path: ht.Path, Kind: "trace", Status: statusReady})
	}
	js, err := json.Marshal(d)
	if err != nil {
		return err
	}
	return page.Execute(w, pageData{Title: title, Inline: true, CSS: template.CSS(asset("app.css")),
		JS: template.JS(asset("app.js")), Data: template.JS(js)})
}

func htmlMemory(md *memDevice, o HTMLOptions) (*htmlMem, error) {
	m := md.tl
	out := &htmlMem{Summary: summaryOf(md), Blocks: newHTMLBlocks(), Stacks: map[string][]Frame{},
		States: map[string]*timeline.State{}, Breakdowns: map[string]any{}}
	n := m.Len()
	if n == 0 {
		return out, nil
	}
	used := 0
	seen := map[int32]bool{}
	for level := 0; ; level++ {
		var tiles []htmlTile
		var ids []int32
		size := 0
		span := n
		step := n
		if level > 0 {
			step = max(1, n>>level)
			span = min(n, 2*step)
		}
		for x0 := 0; x0 < n; x0 += step {
			x1 := min(n, x0+span)
			v, err := m.View(timeline.ViewQuery{X0: x0, X1: x1, Width: o.Width, Height: o.Height})
			if err != nil {
				return nil, err
			}
			enc := base64.StdEncoding.EncodeToString(gzipped(EncodeView(m, v, ViewEncoding{Color: timeline.ByCategory, Height: o.Height, IDs: true})))
			size += len(enc)
			tiles = append(tiles, htmlTile{x0, x1, enc})
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
				newBlocks++
			}
		}
		// a block's details cost about htmlBlockBytes of JSON besides its stack
		if level > 0 && used+size+htmlBlockBytes*newBlocks > o.Budget {
			break
		}
		used += size + htmlBlockBytes*newBlocks
		out.Tiles = append(out.Tiles, tiles...)
		out.Levels = level + 1
		for _, id := range ids {
			if seen[id] {
				continue
			}
			seen[id] = true
			bd := blockDetails(m, int(id))
			a := m.Alloc(int(id))
			out.Stacks[strconv.Itoa(int(a.Stack))] = bd.Frames
			bd.StackID = int(a.Stack)
			if bd.FreeFrames != nil {
				out.Stacks[strconv.Itoa(int(a.FreeStack))] = bd.FreeFrames
				bd.FreeStackID = int(a.FreeStack)
			}
			out.Blocks.add(bd, out.Summary.StartNS)
		}
		if span <= o.Width || level >= 16 {
			break
		}
	}
	out.Blocks.sort()
	peak := md.result.Peak.EventIndex
	for _, e := range []int{peak, n - 1} {
		out.States[strconv.Itoa(e)] = m.State(e)
	}
	for _, by := range []timeline.By{timeline.ByCategory, timeline.ByGroup, timeline.BySource, timeline.ByModuleGroup, timeline.ByModule, timeline.ByStack} {
		out.Breakdowns[by.String()] = map[string]any{"by": by.String(), "event_index": peak, "rows": m.Breakdown(peak, by)}
	}
	return out, nil
}

func htmlTraceData(ti *traceInput, o HTMLOptions) *htmlTrac {
	out := &htmlTrac{Summary: traceSummaryOf(ti), Memory: traceMemoryOf(ti, ti.tl.Start, ti.tl.End, 900)}
	span := ti.tl.End - ti.tl.Start
	if span <= 0 {
		return out
	}
	used := 0
	for level := 0; level < 8; level++ {
		step, w := span, span
		if level > 0 {
			step = max(1, span>>level)
			w = min(span, 2*step)
		}
		var tiles []*TraceViewOut
		size := 0
		for t0 := ti.tl.Start; t0 < ti.tl.End; t0 += step {
			t1 := min(ti.tl.End, t0+w)
			v, err := ti.tl.View(timeline.TraceQuery{T0: t0, T1: t1, Width: o.Width})
			if err != nil {
				break
			}
			tv := encodeTraceView(ti.model, v)
			size += 40*len(tv.Slices) + 20*len(tv.Merged)
			tiles = append(tiles, tv)
			if t1 == ti.tl.End {
				break
			}
		}
		if level > 0 && used+size > o.Budget {
			break
		}
		used += size
		out.Tiles = append(out.Tiles, tiles...)
	}
	return out
}

// htmlBlockBytes is about what a block's row of htmlBlocks costs in the
// file (measured: 117 on the 31,685 blocks of a 1M-entry GPT-2 training's).
const htmlBlockBytes = 120

// htmlBlocks are the details of the blocks an --html file's views draw, as
// columns with a row per block, in id order (ui/src/data.js rebuilds a
// BlockDetails from a row): a fifth of the bytes of one JSON object per
// block. Columns are named as BlockDetails' JSON fields; text fields are
// indices into Strings, and times are nanoseconds since the snapshot's
// first entry (summary.start_ns), -1 for none.
type htmlBlocks struct {
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
	t := &htmlBlocks{Cols: map[string][]int64{}, index: map[string]int64{},
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
