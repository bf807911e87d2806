package view

import (
	"github.com/ptscope/ptscope/internal/perf"
)

// The trace's deeper analyses each have a view of their own, so that the
// summary every trace tab reads first stays small: the critical path's
// chain (hundreds of segments per step) and the streams' and copies'
// series over time are left out of trace/summary and answered by
// trace/critical and trace/gpu.

// summaryRank is the rank's result as trace/summary sends it: everything
// but the critical path's chain and per-step items (criticalWithout) and
// the per-stream and per-copy-kind series (trace/gpu).
func summaryRank(r *perf.Rank) *perf.Rank {
	c := *r
	c.CriticalPath = criticalWithout(r.CriticalPath)
	c.Streams = make([]perf.StreamStats, len(r.Streams))
	for i, s := range r.Streams {
		s.Queue.Series = nil
		c.Streams[i] = s
	}
	c.CopyBandwidth = make([]perf.CopyBandwidth, len(r.CopyBandwidth))
	for i, b := range r.CopyBandwidth {
		b.Series = nil
		c.CopyBandwidth[i] = b
	}
	return &c
}

// criticalWithout is the critical path without its chain of segments and
// its steps' items (tens per step; the page shows the rank's items, summed
// over the steps, and each step's length and bounds).
func criticalWithout(cp perf.CriticalPath) perf.CriticalPath {
	cp.Path = nil
	steps := make([]perf.StepCriticalPath, len(cp.Steps))
	for i, s := range cp.Steps {
		s.Items = nil
		steps[i] = s
	}
	cp.Steps = steps
	return cp
}

// TraceCritical is the critical path view: the rank's critical path, the
// chain of the step with the longest path (perf.CriticalPath.Path) with
// each segment's start on the timeline's clock. Segments name the events
// of the trace timeline (their index, as trace/event takes).
type TraceCritical struct {
	perf.CriticalPath
	Path   []CritSegment `json:"path"`
	BaseNS int64         `json:"base_ns"`
}

// CritSegment is a piece of the chain with its start on the trace
// timeline's clock (trace/view's): Unix ns are past the 2^53 a JavaScript
// number holds exactly, so the page cannot subtract BaseNS itself.
type CritSegment struct {
	perf.CriticalSegment
	TimelineNS int64 `json:"timeline_ns"`
}

func traceCritical(it *Input, _ params) (any, error) {
	ti, err := traceOf(it)
	if err != nil {
		return nil, err
	}
	cp := ti.result.CriticalPath
	base := ti.model.Meta.BaseTimeNS
	out := &TraceCritical{CriticalPath: criticalWithout(cp), Path: make([]CritSegment, len(cp.Path)), BaseNS: base}
	for i, sg := range cp.Path {
		out.Path[i] = CritSegment{sg, sg.StartNS - base}
	}
	return out, nil
}

// TraceGPU is the GPU view: launch statistics, per-stream queue length and
// idle intervals, copy bandwidth over time and the GPU-side annotations
// (perf's results, series included).
type TraceGPU struct {
	Launch        perf.Launch          `json:"launch"`
	Streams       []perf.StreamStats   `json:"streams"`
	CopyBandwidth []perf.CopyBandwidth `json:"copy_bandwidth"`
	Annotations   []perf.GPUAnnotation `json:"gpu_annotations"`
	Skipped       []string             `json:"skipped_analyses,omitempty"`
}

func traceGPU(it *Input, _ params) (any, error) {
	ti, err := traceOf(it)
	if err != nil {
		return nil, err
	}
	r := ti.result
	return &TraceGPU{Launch: r.Launch, Streams: r.Streams, CopyBandwidth: r.CopyBandwidth, Annotations: r.GPUAnnotations,
		Skipped: r.Skipped}, nil
}
