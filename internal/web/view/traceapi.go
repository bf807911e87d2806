package view

import (
	"fmt"

	"github.com/ptscope/ptscope/internal/kineto"
	"github.com/ptscope/ptscope/internal/perf"
	"github.com/ptscope/ptscope/internal/timeline"
)

func traceOf(it *Input) (*traceInput, error) {
	if it.trace == nil {
		return nil, notFound("input %d holds no trace", it.ID)
	}
	return it.trace, nil
}

// TraceSummary is the profiler views' data: the analysis of the trace
// (trace's JSON for one rank, without what trace/critical and trace/gpu
// answer: summaryRank) and the timeline's lanes and time range.
type TraceSummary struct {
	Result  *perf.Rank      `json:"result"`
	Lanes   []TraceLane     `json:"lanes"`
	StartNS int64           `json:"start_ns"`
	EndNS   int64           `json:"end_ns"`
	Devices []kineto.Device `json:"devices"`
	// BaseNS is the trace's baseTimeNanoseconds (0 if absent): the result's
	// times (steps) are BaseNS + the timeline's.
	BaseNS int64 `json:"base_ns"`
	// StepBands are the steps' [start, end) on the timeline's clock (Unix ns
	// are past what a JavaScript number holds exactly).
	StepBands [][2]int64 `json:"step_bands"`
}

// TraceLane is one thread or stream row of the trace timeline.
type TraceLane struct {
	timeline.Lane
	Depth int `json:"depth"`
}

func traceSummaryOf(ti *traceInput) *TraceSummary {
	out := &TraceSummary{Result: summaryRank(ti.result), StartNS: ti.tl.Start, EndNS: ti.tl.End, Devices: ti.model.Meta.Devices,
		BaseNS: ti.model.Meta.BaseTimeNS}
	for _, l := range ti.tl.Lanes {
		out.Lanes = append(out.Lanes, TraceLane{l, l.Depth()})
	}
	out.StepBands = make([][2]int64, len(ti.result.Steps))
	for i, st := range ti.result.Steps {
		t0 := st.StartTimeNS - out.BaseNS
		out.StepBands[i] = [2]int64{t0, t0 + st.DurationNS}
	}
	return out
}

func traceSummary(it *Input, _ params) (any, error) {
	ti, err := traceOf(it)
	if err != nil {
		return nil, err
	}
	return traceSummaryOf(ti), nil
}

// TraceViewOut is a trace viewport as the page draws it: slices as
// [lane, depth, start_ns, duration_ns, name, event] and merged runs as
// [lane, depth, first column, last column, events]; names by number.
type TraceViewOut struct {
	T0      int64            `json:"t0_ns"`
	T1      int64            `json:"t1_ns"`
	Width   int              `json:"width"`
	Slices  [][6]int64       `json:"slices"`
	Merged  [][5]int         `json:"merged"`
	Names   map[int32]string `json:"names"`
	Visited int              `json:"visited"`
}

func encodeTraceView(t *kineto.Trace, v *timeline.TraceView) *TraceViewOut {
	out := &TraceViewOut{T0: v.T0, T1: v.T1, Width: v.Width, Names: map[int32]string{}, Visited: v.Visited,
		Slices: make([][6]int64, 0, len(v.Slices)), Merged: make([][5]int, 0, len(v.Merged))}
	ev := &t.Events
	for _, s := range v.Slices {
		name := ev.Name[s.Event]
		out.Slices = append(out.Slices, [6]int64{int64(s.Lane), int64(s.Depth), ev.TS[s.Event], ev.Dur[s.Event], int64(name), int64(s.Event)})
		if _, ok := out.Names[int32(name)]; !ok {
			out.Names[int32(name)] = t.Strings[name]
		}
	}
	for _, m := range v.Merged {
		out.Merged = append(out.Merged, [5]int{m.Lane, m.Depth, m.Col0, m.Col1, m.Events})
	}
	return out
}

// traceRange reads a trace viewport: t0, t1 (ns of the trace's time base;
// default its whole span) and w (pixels).
func traceRange(p params, ti *traceInput) (t0, t1 int64, w int, err error) {
	if t0, err = p.int("t0", ti.tl.Start, false); err != nil {
		return
	}
	if t1, err = p.int("t1", ti.tl.End, false); err != nil {
		return
	}
	var w64 int64
	if w64, err = p.int("w", 1000, false); err != nil {
		return
	}
	if t1 <= t0 || w64 < 1 || w64 > 1<<14 {
		err = badRequest("time range [%d, %d) is empty or width %d pixels is out of range (1..16384)", t0, t1, w64)
	}
	return t0, t1, int(w64), err
}

func traceView(it *Input, p params) (any, error) {
	ti, err := traceOf(it)
	if err != nil {
		return nil, err
	}
	t0, t1, w, err := traceRange(p, ti)
	if err != nil {
		return nil, err
	}
	v, err := ti.tl.View(timeline.TraceQuery{T0: t0, T1: t1, Width: w})
	if err != nil {
		return nil, badRequest("%v", err)
	}
	return encodeTraceView(ti.model, v), nil
}

// TraceEvent is one event of the trace timeline, for the details panel.
type TraceEvent struct {
	TraceRef
	Category    string  `json:"category"`
	Thread      string  `json:"thread"`
	Shapes      string  `json:"input_shapes,omitempty"`
	Types       string  `json:"input_types,omitempty"`
	Grid        string  `json:"grid,omitempty"`
	Block       string  `json:"block,omitempty"`
	Occupancy   float32 `json:"occupancy_percent,omitempty"`
	BlocksPerSM float32 `json:"blocks_per_sm,omitempty"`
	Registers   int32   `json:"registers_per_thread,omitempty"`
	SharedMem   int32   `json:"shared_memory_bytes,omitempty"`
	Bytes       int64   `json:"bytes,omitempty"` // memcpy/memset
	Stream      int32   `json:"stream,omitempty"`
	Correlation int64   `json:"correlation,omitempty"`
	ExternalID  int64   `json:"external_id,omitempty"`
	// Stack: the events it runs in, outermost first (python_function
	// frames of with_stack traces, operators, annotations).
	Stack []TraceRef `json:"stack"`
	// Linked: GPU work launched inside a host event, or the launch and
	// operator of GPU work (the first timeline.MaxLinked by start).
	Linked      []TraceRef `json:"linked"`
	LinkedTotal int        `json:"linked_total"`
}

// TraceRef names an event.
type TraceRef struct {
	Index      int    `json:"index"`
	Name       string `json:"name"`
	Kind       string `json:"kind"`
	StartNS    int64  `json:"start_ns"` // of the trace's time base, as trace/view's
	DurationNS int64  `json:"duration_ns"`
}

func traceRef(t *kineto.Trace, i int) TraceRef {
	ev := &t.Events
	return TraceRef{Index: i, Name: t.Name(i), Kind: ev.Kind[i].String(), StartNS: ev.TS[i], DurationNS: ev.Dur[i]}
}

func traceEvent(it *Input, p params) (any, error) {
	ti, err := traceOf(it)
	if err != nil {
		return nil, err
	}
	i, err := p.int("event", 0, true)
	if err != nil {
		return nil, err
	}
	if i < 0 || i >= int64(ti.model.Events.Len()) {
		return nil, notFound("no event %d (the trace has %d)", i, ti.model.Events.Len())
	}
	return traceEventOf(ti, int(i)), nil
}

func traceEventOf(ti *traceInput, i int) *TraceEvent {
	t := ti.model
	ev := &t.Events
	e := &TraceEvent{TraceRef: traceRef(t, i), Category: t.Strings[ev.Cat[i]],
		Thread: t.PIDString(ev.PID[i]) + "/" + t.PIDString(ev.TID[i]), Stack: []TraceRef{}, Linked: []TraceRef{}}
	if ev.Corr[i] != kineto.None {
		e.Correlation = ev.Corr[i]
	}
	if ev.Ext[i] != kineto.None {
		e.ExternalID = ev.Ext[i]
	}
	if a := ev.Aux[i]; a >= 0 {
		switch {
		case ev.Kind[i].IsGPU() && int(a) < len(t.GPU):
			g := t.GPU[a]
			e.Grid, e.Block, e.Stream = fmtDim(g.Grid), fmtDim(g.Block), g.Stream
			if ev.Kind[i] != kineto.KindKernel {
				e.Grid, e.Block = "", ""
			}
			if g.Occupancy >= 0 {
				e.Occupancy = g.Occupancy
			}
			if g.BlocksPerSM >= 0 {
				e.BlocksPerSM = g.BlocksPerSM
			}
			if g.Bytes > 0 {
				e.Bytes = g.Bytes
			}
			e.Registers, e.SharedMem = g.Registers, g.SharedMem
		case !ev.Kind[i].HasGPUInfo() && int(a) < len(t.Ops):
			e.Shapes = t.Strings[t.Ops[a].Shape]
			e.Types = t.Strings[t.Ops[a].Types]
		}
	}
	r := ti.tl.Related(i)
	for _, j := range r.Stack {
		e.Stack = append(e.Stack, traceRef(t, int(j)))
	}
	for _, j := range r.Linked {
		e.Linked = append(e.Linked, traceRef(t, int(j)))
	}
	e.LinkedTotal = r.LinkedTotal
	return e
}

func fmtDim(d [3]int32) string {
	return fmt.Sprintf("%dx%dx%d", d[0], d[1], d[2])
}

// MemCurveOut is one GPU's memory curve over a viewport, per column:
// [allocated min, allocated max, reserved min, reserved max, events].
type MemCurveOut struct {
	Device  int32      `json:"device"`
	Columns [][5]int64 `json:"columns"`
}

func traceMemory(it *Input, p params) (any, error) {
	ti, err := traceOf(it)
	if err != nil {
		return nil, err
	}
	t0, t1, w, err := traceRange(p, ti)
	if err != nil {
		return nil, err
	}
	return traceMemoryOf(ti, t0, t1, w), nil
}

func traceMemoryOf(ti *traceInput, t0, t1 int64, w int) map[string]any {
	out := []MemCurveOut{}
	for k := range ti.tl.Memory {
		c := &ti.tl.Memory[k]
		o := MemCurveOut{Device: c.Device}
		for _, p := range c.Curve(t0, t1, w) {
			o.Columns = append(o.Columns, [5]int64{p.AllocMin, p.AllocMax, p.ResMin, p.ResMax, int64(p.Events)})
		}
		out = append(out, o)
	}
	return map[string]any{"t0_ns": t0, "t1_ns": t1, "width": w, "devices": out}
}
