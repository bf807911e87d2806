package web

import (
	"fmt"
	"net/http"

	"github.com/ptscope/ptscope/internal/kineto"
	"github.com/ptscope/ptscope/internal/perf"
	"github.com/ptscope/ptscope/internal/timeline"
)

func (s *Server) traceOf(r *http.Request) (*traceInput, error) {
	it, err := s.readyInput(r, "trace")
	if err != nil {
		return nil, err
	}
	return it.trace, nil
}

// TraceSummary is the profiler views' data: the analysis of the trace
// (trace's JSON for one rank) and the timeline's lanes and time range.
type TraceSummary struct {
	Result  *perf.Rank      `json:"result"`
	Lanes   []TraceLane     `json:"lanes"`
	StartNS int64           `json:"start_ns"`
	EndNS   int64           `json:"end_ns"`
	Devices []kineto.Device `json:"devices"`
}

// TraceLane is one thread or stream row of the trace timeline.
type TraceLane struct {
	timeline.Lane
	Depth int `json:"depth"`
}

func traceSummaryOf(ti *traceInput) *TraceSummary {
	out := &TraceSummary{Result: ti.result, StartNS: ti.tl.Start, EndNS: ti.tl.End, Devices: ti.model.Meta.Devices}
	for _, l := range ti.tl.Lanes {
		out.Lanes = append(out.Lanes, TraceLane{l, l.Depth()})
	}
	return out
}

func (s *Server) traceSummary(r *http.Request) (any, error) {
	ti, err := s.traceOf(r)
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
func traceRange(r *http.Request, ti *traceInput) (t0, t1 int64, w int, err error) {
	if t0, err = intParam(r, "t0", ti.tl.Start, false); err != nil {
		return
	}
	if t1, err = intParam(r, "t1", ti.tl.End, false); err != nil {
		return
	}
	var w64 int64
	if w64, err = intParam(r, "w", 1000, false); err != nil {
		return
	}
	if t1 <= t0 || w64 < 1 || w64 > 1<<14 {
		err = badRequest("time range [%d, %d) is empty or width %d pixels is out of range (1..16384)", t0, t1, w64)
	}
	return t0, t1, int(w64), err
}

func (s *Server) traceView(r *http.Request) (any, error) {
	ti, err := s.traceOf(r)
	if err != nil {
		return nil, err
	}
	t0, t1, w, err := traceRange(r, ti)
	if err != nil {
		return nil, err
	}
	v, err := ti.tl.View(timeline.TraceQuery{T0: t0, T1: t1, Width: w})
	if err != nil {
		return nil, badRequest("%v", err)
	}
	return encodeTraceView(ti.model, v), nil
}

// TraceEvent is one event of the trace timeline, for the click panel.
type TraceEvent struct {
	Index       int     `json:"index"`
	Name        string  `json:"name"`
	Category    string  `json:"category"`
	Kind        string  `json:"kind"`
	StartNS     int64   `json:"start_ns"`
	DurationNS  int64   `json:"duration_ns"`
	Thread      string  `json:"thread"`
	Shapes      string  `json:"input_shapes,omitempty"`
	Grid        string  `json:"grid,omitempty"`
	Block       string  `json:"block,omitempty"`
	Occupancy   float32 `json:"occupancy_percent,omitempty"`
	BlocksPerSM float32 `json:"blocks_per_sm,omitempty"`
	Correlation int64   `json:"correlation,omitempty"`
}

func (s *Server) traceEvent(r *http.Request) (any, error) {
	ti, err := s.traceOf(r)
	if err != nil {
		return nil, err
	}
	t := ti.model
	i, err := intParam(r, "event", 0, true)
	if err != nil {
		return nil, err
	}
	if i < 0 || i >= int64(t.Events.Len()) {
		return nil, notFound("no event %d (the trace has %d)", i, t.Events.Len())
	}
	ev := &t.Events
	e := &TraceEvent{Index: int(i), Name: t.Name(int(i)), Category: t.Strings[ev.Cat[i]], Kind: ev.Kind[i].String(),
		StartNS: ev.TS[i], DurationNS: ev.Dur[i], Thread: t.PIDString(ev.PID[i]) + "/" + t.PIDString(ev.TID[i])}
	if ev.Corr[i] != kineto.None {
		e.Correlation = ev.Corr[i]
	}
	if a := ev.Aux[i]; a >= 0 {
		switch {
		case ev.Kind[i].IsGPU() && int(a) < len(t.GPU):
			g := t.GPU[a]
			e.Grid = fmtDim(g.Grid)
			e.Block = fmtDim(g.Block)
			if g.Occupancy >= 0 {
				e.Occupancy = g.Occupancy
			}
			if g.BlocksPerSM >= 0 {
				e.BlocksPerSM = g.BlocksPerSM
			}
		case !ev.Kind[i].HasGPUInfo() && int(a) < len(t.Ops):
			e.Shapes = t.Strings[t.Ops[a].Shape]
		}
	}
	return e, nil
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

func (s *Server) traceMemory(r *http.Request) (any, error) {
	ti, err := s.traceOf(r)
	if err != nil {
		return nil, err
	}
	t0, t1, w, err := traceRange(r, ti)
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
