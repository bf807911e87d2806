package view

import (
	"strconv"
	"strings"

	"github.com/ptscope/ptscope/internal/memory"
	"github.com/ptscope/ptscope/internal/snapshot"
	"github.com/ptscope/ptscope/internal/timeline"
)

// memDeviceOf returns the device named by the "device" parameter (default:
// the input's first device).
func memDeviceOf(it *Input, p params) (*memDevice, error) {
	if len(it.mem) == 0 {
		return nil, notFound("input %d holds no snapshot device", it.ID)
	}
	d, err := p.int("device", int64(it.mem[0].device), false)
	if err != nil {
		return nil, err
	}
	for _, md := range it.mem {
		if int64(md.device) == d {
			return md, nil
		}
	}
	return nil, notFound("input %d has no device %d", it.ID, d)
}

// MemSummary is what the page needs before drawing a device: the analysis
// result (analyze's JSON for the device) and the names of the enums the
// binary views use.
type MemSummary struct {
	Result          *memory.Result `json:"result"`
	Entries         int            `json:"entries"`
	StartNS         int64          `json:"start_ns"`
	EndNS           int64          `json:"end_ns"`
	Categories      []string       `json:"categories"` // by category number
	Phases          []string       `json:"phases"`     // by phase number
	CheckpointEvery int            `json:"checkpoint_every"`
	Blocks          int            `json:"blocks"`
	// PhaseRows is the phases table of the bundle the snapshot came from
	// (ptscope run): allocated bytes before/after each phase of each step.
	PhaseRows []memory.PhaseRow `json:"phase_rows,omitempty"`
}

func categoryNames() []string {
	var out []string
	for c := memory.Category(0); ; c++ {
		n := c.String()
		out = append(out, n)
		if n == memory.CatBeforeRecording.String() {
			return out
		}
	}
}

func phaseNames() []string {
	var out []string
	for p := memory.PhaseUnknown; p <= memory.PhaseOther; p++ {
		out = append(out, p.String())
	}
	return out
}

func summaryOf(md *memDevice) *MemSummary {
	m := md.timeline()
	return &MemSummary{Result: md.result, Entries: m.Len(), StartNS: m.Time(0), EndNS: m.Time(m.Len() - 1),
		Categories: categoryNames(), Phases: phaseNames(), CheckpointEvery: m.CheckpointEvery(), Blocks: len(m.Blocks),
		PhaseRows: md.phases}
}

func memSummary(it *Input, p params) (any, error) {
	md, err := memDeviceOf(it, p)
	if err != nil {
		return nil, err
	}
	return summaryOf(md), nil
}

// viewQuery reads x0, x1, w, h, y0, y1, hl and color.
func viewQuery(p params, m *timeline.Memory) (timeline.ViewQuery, timeline.By, error) {
	var q timeline.ViewQuery
	var vals [6]int64
	for k, x := range []struct {
		name string
		def  int64
	}{{"x0", 0}, {"x1", int64(m.Len())}, {"w", 1000}, {"h", 400}, {"y0", 0}, {"y1", 0}} {
		v, err := p.int(x.name, x.def, false)
		if err != nil {
			return q, 0, err
		}
		vals[k] = v
	}
	if vals[0] < 0 || vals[1] > int64(m.Len()) || vals[0] >= vals[1] {
		return q, 0, badRequest("range x0=%d x1=%d is not within the %d entries", vals[0], vals[1], m.Len())
	}
	if vals[2] < 1 || vals[2] > 1<<14 || vals[3] < 1 || vals[3] > 1<<14 {
		return q, 0, badRequest("viewport %dx%d pixels is out of range (1..16384)", vals[2], vals[3])
	}
	q = timeline.ViewQuery{X0: int(vals[0]), X1: int(vals[1]), Width: int(vals[2]), Height: int(vals[3]), Y0: vals[4], Y1: vals[5]}
	color := timeline.ByCategory
	if c := p.get("color"); c != "" {
		by, err := timeline.ParseBy(c)
		if err != nil {
			return q, 0, badRequest("color: %v", err)
		}
		color = by
	}
	if hl := p.get("hl"); hl != "" {
		by, key, err := parseHighlight(hl)
		if err != nil {
			return q, 0, err
		}
		q.Highlight = func(m *timeline.Memory, id int) bool { return m.Key(by, id) == key }
	}
	return q, color, nil
}

// parseHighlight reads "by:key" (a breakdown row: category:4, source:12).
func parseHighlight(s string) (timeline.By, int32, error) {
	name, k, ok := strings.Cut(s, ":")
	by, err := timeline.ParseBy(name)
	if !ok || err != nil {
		return 0, 0, badRequest("hl=%q: want BREAKDOWN:KEY (category, stack, source, module, module_group)", s)
	}
	key, err := strconv.ParseInt(k, 10, 32)
	if err != nil {
		return 0, 0, badRequest("hl=%q: key is not an integer", s)
	}
	return by, int32(key), nil
}

func memView(it *Input, p params) (any, error) {
	md, err := memDeviceOf(it, p)
	if err != nil {
		return nil, err
	}
	_, enc, err := memViewOf(md, p)
	return enc, err
}

// memViewOf answers a memory view: the timeline's view of the viewport
// and its encoding (EncodeView), with each block's id (a click asks for
// the block by id: measured, ids add 1-3% to a gzipped view); keys=all
// adds each block's key in every colouring (--html files, whose page
// colours offline).
func memViewOf(md *memDevice, p params) (*timeline.View, RawBody, error) {
	q, color, err := viewQuery(p, md.timeline())
	if err != nil {
		return nil, nil, err
	}
	v, err := md.timeline().View(q)
	if err != nil {
		return nil, nil, badRequest("%v", err)
	}
	enc := ViewEncoding{Color: color, Height: q.Height, IDs: true, AllKeys: p.get("keys") == "all"}
	return v, RawBody(EncodeView(md.timeline(), v, enc)), nil
}

// Frame is a stack frame with whether it is the user's own (the first
// frame outside PyTorch, which the page highlights).
type Frame struct {
	memory.Frame
	User bool `json:"user,omitempty"`
}

// frames returns a stack's frames, innermost first, marking the user's.
func frames(m *timeline.Memory, id snapshot.StackID) []Frame {
	st := m.Stacks.Stack(id)
	out := make([]Frame, len(st.Frames))
	for i, f := range st.Frames {
		out[i] = Frame{Frame: f, User: i == st.UserFrame}
	}
	return out
}

// BlockDetails is one block as the click panel shows it.
type BlockDetails struct {
	ID                  int     `json:"id"`
	Address             uint64  `json:"address"`
	SizeBytes           int64   `json:"size_bytes"`
	RequestedBytes      int64   `json:"requested_bytes"`
	Category            string  `json:"category"`
	Origin              string  `json:"origin"`
	Stream              int64   `json:"stream"`
	Module              string  `json:"module,omitempty"`
	Source              string  `json:"source"`
	AllocEvent          int     `json:"alloc_event_index"` // -1: before the recording
	FreeRequestedEvent  int     `json:"free_requested_event_index"`
	FreeEvent           int     `json:"free_event_index"` // -1: never (still alive or pending)
	AllocTimeNS         int64   `json:"alloc_time_ns,omitempty"`
	FreeTimeNS          int64   `json:"free_time_ns,omitempty"`
	LifetimeNS          int64   `json:"lifetime_ns,omitempty"`
	Step                string  `json:"step,omitempty"`
	Phase               string  `json:"phase"`
	AllocatedAfterBytes int64   `json:"allocated_after_alloc_bytes"`
	Frames              []Frame `json:"frames"`
	FreeFrames          []Frame `json:"free_frames,omitempty"`
	// in --html files the frames are shared: stacks[stack_id]
	StackID     int `json:"stack_id,omitempty"`
	FreeStackID int `json:"free_stack_id,omitempty"`
}

var originNames = map[memory.Origin]string{memory.FromTrace: "trace", memory.BeforeUnmatched: "freed_without_recorded_alloc",
	memory.BeforeGhost: "alive_since_before_recording"}

func blockDetails(m *timeline.Memory, id int) *BlockDetails {
	a := m.Alloc(id)
	b := &m.Blocks[id]
	d := &BlockDetails{ID: id, Address: a.Addr, SizeBytes: a.Size, RequestedBytes: a.Requested, Category: a.Category.String(),
		Origin: originNames[a.Origin], Stream: streamValue(m.Snap, a.Stream), Source: m.KeyName(timeline.BySource, m.Key(timeline.BySource, id)),
		AllocEvent: int(a.AllocIdx), FreeRequestedEvent: int(a.FreeReqIdx), FreeEvent: int(a.FreeIdx),
		Frames: frames(m, a.Stack), Phase: m.PhaseAt(int(a.AllocIdx)).String()}
	if a.Metadata > 0 && int(a.Metadata) < len(m.Snap.Strings) {
		d.Module = m.Snap.Strings[a.Metadata]
	}
	if a.FreeStack != 0 && a.FreeStack != a.Stack {
		d.FreeFrames = frames(m, a.FreeStack)
	}
	if a.AllocIdx >= 0 {
		d.AllocTimeNS = m.Time(int(a.AllocIdx))
		d.AllocatedAfterBytes = m.AllocatedAt(int(a.AllocIdx))
		if st := m.StepAt(int(a.AllocIdx)); st >= 0 {
			d.Step = m.Phases.Steps[st].Name
		}
	}
	if b.End < int32(m.Len()) {
		d.FreeTimeNS = m.Time(int(b.End))
		if d.AllocTimeNS > 0 && d.FreeTimeNS > 0 {
			d.LifetimeNS = d.FreeTimeNS - d.AllocTimeNS
		}
	}
	return d
}

func streamValue(s *snapshot.Snapshot, i uint32) int64 {
	if int(i) < len(s.Streams) {
		return s.Streams[i]
	}
	return 0
}

func memBlock(it *Input, p params) (any, error) {
	md, err := memDeviceOf(it, p)
	if err != nil {
		return nil, err
	}
	id, err := p.int("id", 0, true)
	if err != nil {
		return nil, err
	}
	if id < 0 || id >= int64(len(md.timeline().Blocks)) {
		return nil, notFound("no block %d (the device has %d)", id, len(md.timeline().Blocks))
	}
	return blockDetails(md.timeline(), int(id)), nil
}

// eventParam reads the "event" parameter (an entry index in range) or,
// without it, "time" (Unix ns: the last entry at or before it).
func eventParam(p params, m *timeline.Memory) (int, error) {
	if !p.has("event") && p.has("time") {
		t, err := p.int("time", 0, true)
		if err != nil {
			return 0, err
		}
		if m.Time(0) == 0 {
			return 0, badRequest("the snapshot records no times: give event=N")
		}
		return m.EntryAt(t), nil
	}
	i, err := p.int("event", 0, true)
	if err != nil {
		return 0, err
	}
	if i < -1 || i >= int64(m.Len()) {
		return 0, notFound("no event %d (the trace has %d entries)", i, m.Len())
	}
	return int(i), nil
}

// memHit finds the block covering bytes y after entry event (a click on
// the band, where blocks too small to be drawn on their own are).
func memHit(it *Input, p params) (any, error) {
	md, err := memDeviceOf(it, p)
	if err != nil {
		return nil, err
	}
	i, err := eventParam(p, md.timeline())
	if err != nil {
		return nil, err
	}
	y, err := p.int("y", 0, true)
	if err != nil {
		return nil, err
	}
	id := md.timeline().Hit(i, y)
	if id < 0 {
		return map[string]any{"id": -1}, nil
	}
	return map[string]any{"id": id, "block": blockDetails(md.timeline(), id)}, nil
}

func memState(it *Input, p params) (any, error) {
	md, err := memDeviceOf(it, p)
	if err != nil {
		return nil, err
	}
	i, err := eventParam(p, md.timeline())
	if err != nil {
		return nil, err
	}
	return md.timeline().State(i), nil
}

// Event is one trace entry.
type Event struct {
	Index     int     `json:"index"`
	Action    string  `json:"action"`
	Address   uint64  `json:"address"`
	SizeBytes int64   `json:"size_bytes"`
	Stream    int64   `json:"stream"`
	TimeNS    int64   `json:"time_ns,omitempty"`
	Phase     string  `json:"phase"`
	Step      string  `json:"step,omitempty"`
	Block     int     `json:"block"` // the block it allocates or frees, -1 if none
	Frames    []Frame `json:"frames"`
}

func memEvent(it *Input, p params) (any, error) {
	md, err := memDeviceOf(it, p)
	if err != nil {
		return nil, err
	}
	m := md.timeline()
	i, err := eventParam(p, m)
	if err != nil {
		return nil, err
	}
	if i < 0 {
		return nil, notFound("event -1 is the state before the first entry, not an entry")
	}
	tr := m.Snap.Trace(m.Device)
	e := &Event{Index: i, Action: tr.Action[i].String(), Address: tr.Addr[i], SizeBytes: tr.Size[i],
		Stream: streamValue(m.Snap, tr.Stream[i]), TimeNS: m.Time(i), Phase: m.PhaseAt(i).String(),
		Frames: frames(m, tr.Stack[i]), Block: m.BlockAt(i)}
	if st := m.StepAt(i); st >= 0 {
		e.Step = m.Phases.Steps[st].Name
	}
	return e, nil
}

func memBreakdown(it *Input, p params) (any, error) {
	md, err := memDeviceOf(it, p)
	if err != nil {
		return nil, err
	}
	by, err := timeline.ParseBy(p.get("by"))
	if err != nil {
		return nil, badRequest("by: %v", err)
	}
	i := md.result.Peak.EventIndex
	if p.has("event") {
		if i, err = eventParam(p, md.timeline()); err != nil {
			return nil, err
		}
	}
	return &Breakdown{By: by.String(), EventIndex: i, Rows: md.timeline().Breakdown(i, by)}, nil
}

// Breakdown is the blocks allocated after an entry grouped by a key,
// largest first (every group: the page trims).
type Breakdown struct {
	By         string         `json:"by"`
	EventIndex int            `json:"event_index"`
	Rows       []timeline.Row `json:"rows"`
}

// Names are the names of a colouring's keys (the legend's).
type Names struct {
	By    string           `json:"by"`
	Names map[int32]string `json:"names"`
}

// maxNames bounds the keys one names request may ask for.
const maxNames = 4096

// memNames names keys of a colouring: ?by=source&keys=3,17,40.
func memNames(it *Input, p params) (any, error) {
	md, err := memDeviceOf(it, p)
	if err != nil {
		return nil, err
	}
	by, err := timeline.ParseBy(p.get("by"))
	if err != nil {
		return nil, badRequest("by: %v", err)
	}
	var keys []int32
	for _, k := range strings.Split(p.get("keys"), ",") {
		if k == "" {
			continue
		}
		n, err := strconv.ParseInt(k, 10, 32)
		if err != nil {
			return nil, badRequest("keys: %q is not an integer", k)
		}
		keys = append(keys, int32(n))
	}
	if len(keys) > maxNames {
		return nil, badRequest("keys: %d keys, at most %d", len(keys), maxNames)
	}
	return namesOf(md.timeline(), by, keys)
}

// namesOf names the keys of breakdown by; a key no block has is a 404.
func namesOf(m *timeline.Memory, by timeline.By, keys []int32) (*Names, error) {
	out := &Names{By: by.String(), Names: map[int32]string{}}
	for _, k := range keys {
		if !m.ValidKey(by, k) {
			return nil, notFound("no %s key %d", by, k)
		}
		out.Names[k] = m.KeyName(by, k)
	}
	return out, nil
}
