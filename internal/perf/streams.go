package perf

import (
	"cmp"
	"slices"
)

// StreamStats describes one GPU stream: its work, its launch queue (HTA's
// queue length) and its idle gaps by HTA's categories, with their
// statistics (HTA's get_idle_time_breakdown with show_idle_interval_stats).
// As in HTA, GPU events whose launch is not in the trace (queued before the
// profiler started) are left out.
type StreamStats struct {
	Device int   `json:"device"`
	Stream int   `json:"stream"`
	Events int   `json:"events"`  // kernels, copies and memsets
	BusyNS int64 `json:"busy_ns"` // the union of their spans
	Queue  Queue `json:"queue"`
	// The gaps between consecutive events of the stream (HTA: the next
	// event's start minus the previous one's end, negative when they
	// overlap): host wait when the next event's launch started after the
	// previous event ended, else kernel wait when shorter than 30 us, else
	// other.
	HostWait   DurationStats `json:"host_wait"`
	KernelWait DurationStats `json:"kernel_wait"`
	OtherWait  DurationStats `json:"other_wait"`
}

// Queue is a stream's launch queue, HTA's queue length (trace_counters.py):
// the launches (cudaLaunchKernel, cudaMemcpyAsync, cuLaunchKernel, ...)
// whose GPU work has not started, +1 at a launch call's start and -1 at
// its GPU event's start.
type Queue struct {
	// Samples describes the length after each change (HTA's
	// get_queue_length_summary: every change counts once, however long it
	// lasts).
	Samples ValueStats `json:"samples"`
	// TimeMean is the mean length over time, from the first change to the
	// last.
	TimeMean float64 `json:"time_mean"`
	Max      int     `json:"max"`
	// FullNS is the time with 1024 launches or more outstanding, the
	// depth at which a launch blocks the host (HTA's
	// get_time_spent_blocked_on_full_queue).
	FullNS int64         `json:"full_ns"`
	Series []SeriesPoint `json:"series"` // the length over time, decimated
}

// cudaMaxLaunchQueue is the launch queue depth at which the host blocks
// (HTA's CUDA_MAX_LAUNCH_QUEUE_PER_STREAM).
const cudaMaxLaunchQueue = 1024

// streamStats computes every stream's row from the queues p computed and
// g's GPU events.
func streamStats(p *cpPrep) []StreamStats {
	g, ev := p.g, p.g.ev
	base := g.t.Meta.BaseTimeNS
	type acc struct {
		events  int
		busy    spans
		prevEnd int64
		has     bool
		gaps    [3][]int64 // by gapKind
	}
	by := map[streamKey]*acc{}
	for _, i := range g.gpu { // by start
		if !g.owned(i) || g.launch[i] < 0 {
			continue
		}
		k := streamOf(g, i)
		a := by[k]
		if a == nil {
			a = &acc{}
			by[k] = a
		}
		a.events++
		a.busy = append(a.busy, span{ev.TS[i], ev.End(int(i))})
		if a.has {
			gap := ev.TS[i] - a.prevEnd
			l := g.launch[i] // >= 0: events without a launch are skipped above
			c := classifyGap(gap, a.prevEnd, true, ev.TS[l])
			a.gaps[c] = append(a.gaps[c], gap)
		}
		a.prevEnd, a.has = ev.End(int(i)), true
	}
	for k := range p.series {
		if by[k] == nil {
			by[k] = &acc{}
		}
	}
	out := make([]StreamStats, 0, len(by))
	for k, a := range by {
		s := StreamStats{Device: int(k.dev), Stream: int(k.stream), Events: a.events, BusyNS: union(a.busy).total(),
			HostWait: describeNS(a.gaps[0]), KernelWait: describeNS(a.gaps[1]), OtherWait: describeNS(a.gaps[2]),
			Queue: Queue{Series: []SeriesPoint{}}}
		if q := p.series[k]; q != nil && len(q.t) > 0 {
			s.Queue = queueStats(q, base)
		}
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b StreamStats) int {
		return cmp.Or(cmp.Compare(a.Device, b.Device), cmp.Compare(a.Stream, b.Stream))
	})
	return out
}

// queueStats describes a queue's series.
func queueStats(q *queueSeries, base int64) Queue {
	n := len(q.t)
	vals := make([]float64, n)
	var area float64
	out := Queue{}
	for i, v := range q.q {
		vals[i] = float64(v)
		out.Max = max(out.Max, int(v))
		if i+1 < n {
			d := q.t[i+1] - q.t[i]
			area += float64(v) * float64(d)
			if v >= cudaMaxLaunchQueue {
				out.FullNS += d
			}
		}
	}
	if span := q.t[n-1] - q.t[0]; span > 0 {
		out.TimeMean = area / float64(span)
	}
	out.Series = stepSeries(q.t, vals, base)
	out.Samples = describe(vals)
	return out
}
