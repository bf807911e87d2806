package tracereport

import (
	"fmt"
	"strings"

	"github.com/ptscope/ptscope/internal/perf"
	"github.com/ptscope/ptscope/internal/report"
)

// The views of the deeper analyses (perf's deep.go): the critical path,
// kernel sequences, modules, streams, and the tables the idle, comm and
// memory views add.

// criticalLine is the overview's one line on the critical path.
func criticalLine(p *printer, r *perf.Rank) {
	c := r.CriticalPath
	n := int64(len(c.Steps))
	if n == 0 || c.LengthNS == 0 {
		return
	}
	text := fmt.Sprintf("%s a step (mean over %d steps); %s", dur(c.LengthNS/n), n, boundText(c.BoundBy, c.LengthNS))
	if len(c.Items) > 0 {
		it := c.Items[0]
		text += fmt.Sprintf("; most on it: %s (%s a step)", KernelName(it.Name), dur(it.CriticalNS/n))
	}
	p.label("crit. path", text+" (--view critical)")
}

func boundText(b perf.CriticalBound, total int64) string {
	var parts []string
	for _, x := range []struct {
		n string
		v int64
	}{{"CPU", b.CPUNS}, {"data loading", b.DataLoadingNS}, {"GPU compute", b.GPUComputeNS}, {"GPU communication", b.GPUCommunicationNS},
		{"kernel gaps", b.KernelKernelNS}, {"launch delays", b.LaunchNS}} {
		if x.v > 0 {
			parts = append(parts, fmt.Sprintf("%s %s", x.n, ratio(x.v, total)))
		}
	}
	if len(parts) == 0 {
		return "nothing on it"
	}
	return strings.Join(parts, ", ")
}

// critical is the critical path view.
func critical(p *printer, r *perf.Rank, top int) {
	c := r.CriticalPath
	n := int64(len(c.Steps))
	if n == 0 || c.LengthNS == 0 {
		p.Blank()
		p.Line("No critical path: the trace has no steps with host operators.")
		return
	}
	p.Title(fmt.Sprintf("Critical path (HTA's): %s a step over %d steps", dur(c.LengthNS/n), n))
	p.Para("The longest chain of host operators, launches, kernels and synchronisations through each step: "+
		"only shortening work on it shortens the step.", "  ", "  ")
	p.label("bound by", boundText(c.BoundBy, c.LengthNS))
	if !c.SyncEvents {
		p.label("note", "the trace has no cuda_sync events (torch.autograd.profiler._enable_cuda_sync_events / experimental_config enable_cuda_sync_events=True): GPU-to-host waits are not edges of the path")
	}
	if c.Windowed {
		p.label("note", "analysed in windows of steps: a step at a window's edge may differ from the whole trace's")
	}
	if len(c.Items) > 0 {
		k := min(top, len(c.Items))
		p.Title(fmt.Sprintf("On the path (%d of %d, per step; saving: what the step gains if it took no time)", k, len(c.Items)))
		cols := []column{{head: "work", min: 40}, {head: "bound by", drop: 2}, {head: "on path"}, {head: "saving"}, {head: "events", drop: 1}}
		for _, it := range c.Items[:k] {
			for i, v := range []string{KernelName(it.Name), strings.TrimSuffix(it.BoundBy, "_bound"), dur(it.CriticalNS / n),
				dur(it.SavingNS / n), count(it.Events)} {
				cols[i].cells = append(cols[i].cells, v)
			}
		}
		p.table(cols)
	}
	idx := pickSteps(r, p.O)
	if len(c.Steps) == len(r.Steps) {
		p.Title("Per step")
		cols := []column{{head: "step", min: -1}, {head: "length"}, {head: "cpu", drop: 1}, {head: "gpu compute"}, {head: "gpu comm", drop: 2},
			{head: "kernel gaps", drop: 3}, {head: "launch", drop: 4}}
		for _, i := range idx {
			s := c.Steps[i]
			if s.Failed != "" {
				cols[0].cells = append(cols[0].cells, s.Step)
				for k := 1; k < len(cols); k++ {
					cols[k].cells = append(cols[k].cells, "-")
				}
				continue
			}
			b := s.BoundBy
			for k, v := range []string{stepLabel(r, i), dur(s.LengthNS), dur(b.CPUNS + b.DataLoadingNS), dur(b.GPUComputeNS),
				dur(b.GPUCommunicationNS), dur(b.KernelKernelNS), dur(b.LaunchNS)} {
				cols[k].cells = append(cols[k].cells, v)
			}
		}
		p.table(cols)
	}
}

// sequences is the kernel sequences view.
func sequences(p *printer, r *perf.Rank, top int) {
	s := r.KernelSequences
	if len(s) == 0 {
		p.Blank()
		p.Line("No kernel sequences: no operator launches three or more kernels.")
		return
	}
	k := min(top, len(s))
	p.Title(fmt.Sprintf("Kernel sequences: fusion candidates (%d of %d, by GPU time)", k, len(s)))
	cols := []column{{head: "launched by", min: 32}, {head: "kernels"}, {head: "count"}, {head: "gpu total"}, {head: "gpu mean", drop: 2},
		{head: "cpu total", drop: 1}}
	for _, x := range s[:k] {
		for i, v := range []string{x.Operator, count(len(x.Kernels)), count(x.Count), dur(x.GPUNS), dur(x.GPUNS / int64(x.Count)), dur(x.CPUNS)} {
			cols[i].cells = append(cols[i].cells, v)
		}
	}
	p.table(cols)
	for _, x := range s[:min(3, k)] {
		names := make([]string, len(x.Kernels))
		for i, n := range x.Kernels {
			names[i] = KernelName(n)
		}
		p.Para(fmt.Sprintf("%s: %s", x.Operator, strings.Join(names, " → ")), "  ", "    ")
	}
}

// modules is the module view.
func modules(p *printer, r *perf.Rank, top int) {
	if len(r.Modules) == 0 {
		p.Blank()
		p.Line("No modules: the trace has no nn.Module events (profile with with_stack=True or with_modules=True).")
		return
	}
	k := len(r.Modules)
	if top < k && p.O.Steps != report.StepsAll {
		k = max(top*3, top)
		k = min(k, len(r.Modules))
	}
	p.Title(fmt.Sprintf("Modules (%d of %d; host and GPU time of their calls, self without child modules)", k, len(r.Modules)))
	cols := []column{{head: "module", min: 32}, {head: "calls"}, {head: "host"}, {head: "host self", drop: 2}, {head: "gpu"},
		{head: "gpu self", drop: 1}, {head: "ops", drop: 3}}
	for _, m := range r.Modules[:k] {
		for i, v := range []string{strings.Repeat("  ", m.Depth) + m.Name, count(m.Calls), dur(m.HostNS), dur(m.HostSelfNS), dur(m.DeviceNS),
			dur(m.DeviceSelfNS), count(m.Operators)} {
			cols[i].cells = append(cols[i].cells, v)
		}
	}
	p.table(cols)
}

// streams is the per-stream view: queues, idle gaps, copy bandwidth and
// GPU annotations.
func streams(p *printer, r *perf.Rank, top int) {
	if len(r.Skipped) > 0 {
		p.Blank()
		p.Para("Analysed in windows of steps (larger than memory): "+strings.Join(r.Skipped, "; ")+".", "", "")
	}
	if len(r.Streams) > 0 {
		p.Title("Streams: launch queue (HTA's queue length) and idle gaps between their GPU events")
		cols := []column{{head: "stream"}, {head: "events", drop: 7}, {head: "busy"}, {head: "queue mean"}, {head: "queue max", drop: 6},
			{head: "full queue", drop: 5}, {head: "host wait"}, {head: "kernel wait", drop: 2}, {head: "other wait", drop: 1},
			{head: "gaps", drop: 3}, {head: "typical gap", drop: 4}}
		for _, s := range r.Streams {
			n := s.HostWait.Count + s.KernelWait.Count + s.OtherWait.Count
			med := "-"
			if n > 0 {
				med = dur(medianOf(s))
			}
			for i, v := range []string{fmt.Sprintf("GPU %d stream %d", s.Device, s.Stream), count(s.Events), dur(s.BusyNS),
				fmt.Sprintf("%.1f", s.Queue.TimeMean), count(s.Queue.Max), dur(s.Queue.FullNS), dur(s.HostWait.SumNS),
				dur(s.KernelWait.SumNS), dur(s.OtherWait.SumNS), count(n), med} {
				cols[i].cells = append(cols[i].cells, v)
			}
		}
		p.table(cols)
		p.Para("Gaps between a stream's GPU events: host wait when the launch came after the GPU was done, kernel wait when under 30 us; "+
			"queue: launches not yet started (time mean); a queue of 1,024 blocks the host. --json has each category's statistics.", "  ", "  ")
	}
	if len(r.CopyBandwidth) > 0 {
		p.Title("Copy bandwidth by kind")
		cols := []column{{head: "kind"}, {head: "copies"}, {head: "bytes"}, {head: "busy"}, {head: "GB/s"}, {head: "peak GB/s", drop: 1}}
		for _, b := range r.CopyBandwidth {
			for i, v := range []string{b.Kind, count(b.Copies), size(b.Bytes), dur(b.BusyNS), fmt.Sprintf("%.1f", b.BandwidthBytesPerS/1e9),
				fmt.Sprintf("%.1f", b.Samples.Max/1e9)} {
				cols[i].cells = append(cols[i].cells, v)
			}
		}
		p.table(cols)
	}
	if len(r.GPUAnnotations) > 0 {
		k := min(top, len(r.GPUAnnotations))
		p.Title(fmt.Sprintf("GPU-side annotations (%d of %d; GPU span of record_function ranges, and the GPU work attributed to each)", k, len(r.GPUAnnotations)))
		cols := []column{{head: "annotation", min: 32}, {head: "count"}, {head: "total"}, {head: "mean", drop: 2}, {head: "max", drop: 3},
			{head: "gpu work"}, {head: "events", drop: 1}}
		for _, a := range r.GPUAnnotations[:k] {
			d := a.Durations
			for i, v := range []string{a.Name, count(d.Count), dur(d.SumNS), dur(d.MeanNS), dur(d.MaxNS), dur(a.EventNS), count(a.Events)} {
				cols[i].cells = append(cols[i].cells, v)
			}
		}
		p.table(cols)
	}
	if len(r.Streams) == 0 && len(r.CopyBandwidth) == 0 && len(r.GPUAnnotations) == 0 && len(r.Skipped) == 0 {
		p.Blank()
		p.Line("No GPU streams in this trace.")
	}
}

// medianOf is the median gap of the category with the most gaps (the
// categories' medians are what the result keeps).
func medianOf(s perf.StreamStats) int64 {
	best := s.HostWait
	for _, c := range []perf.DurationStats{s.KernelWait, s.OtherWait} {
		if c.Count > best.Count {
			best = c
		}
	}
	return best.P50NS
}

// launchDetail adds the launch histogram and launch-bound steps to the idle
// view.
func launchDetail(p *printer, r *perf.Rank) {
	l := r.Launch
	if l.Launches == 0 {
		return
	}
	var parts []string
	lo := int64(0)
	for i, c := range l.DelayHistogram {
		hi := l.DelayBucketsNS[i]
		if c > 0 {
			if hi < 0 {
				parts = append(parts, fmt.Sprintf("over %s: %s", dur(lo), count(c)))
			} else {
				parts = append(parts, fmt.Sprintf("%s-%s: %s", dur(lo), dur(hi), count(c)))
			}
		}
		lo = hi
	}
	p.label("delays", strings.Join(parts, ", "))
	h := l.HTA
	p.label("as HTA", fmt.Sprintf("%s launches (cudaLaunchKernel, cudaMemcpyAsync, ...): %s short (kernel shorter than a launch call under 50 us), %s launch calls over 50 us, %s delays over 100 us",
		count(h.Launches), count(h.ShortKernels), count(h.RuntimeOutliers), count(h.DelayOutliers)))
	if l.LaunchBoundSteps > 0 {
		p.label("bound", fmt.Sprintf("%d of %d steps are launch-bound: their launch calls outlast their kernels (CUDA graphs or fused kernels help)",
			l.LaunchBoundSteps, len(l.Steps)))
	}
}

// commOps is the plugin's communication operations table (comm view).
func commOps(p *printer, r *perf.Rank) {
	if len(r.CommOps) == 0 {
		return
	}
	p.Title("Communication operators (the plugin's table: nccl:* / gloo:* calls; latency from the call to its last kernel's end)")
	cols := []column{{head: "operator"}, {head: "calls"}, {head: "total size"}, {head: "mean size", drop: 3}, {head: "latency"},
		{head: "mean latency", drop: 2}, {head: "GB/s", drop: 1}, {head: "transfer", drop: 4}}
	for _, c := range r.CommOps {
		tr := "-"
		if c.TransferNS >= 0 {
			tr = dur(c.TransferNS)
		}
		for i, v := range []string{c.Name, count(c.Calls), size(c.Bytes), size(c.MeanBytes), dur(c.LatencyNS), dur(c.MeanLatencyNS),
			fmt.Sprintf("%.2f", c.BandwidthBytesPerS/1e9), tr} {
			cols[i].cells = append(cols[i].cells, v)
		}
	}
	p.table(cols)
}

// memoryOps is the plugin's memory table (memory view).
func memoryOps(p *printer, r *perf.Rank, top int) {
	if len(r.MemoryOps) == 0 {
		return
	}
	k := min(top, len(r.MemoryOps))
	p.Title(fmt.Sprintf("Memory by operator (%d of %d, by bytes allocated; with the operators each called)", k, len(r.MemoryOps)))
	cols := []column{{head: "operator", min: 32}, {head: "device"}, {head: "calls", drop: 3}, {head: "allocs"}, {head: "allocated"},
		{head: "increase", drop: 1}, {head: "self allocated", drop: 2}, {head: "peak", drop: 4}}
	for _, m := range r.MemoryOps[:k] {
		for i, v := range []string{m.Operator, m.Device, count(m.Calls), count(m.Allocations), size(m.AllocatedBytes), size(m.IncreaseBytes),
			size(m.SelfAllocatedBytes), size(m.PeakAllocatedBytes)} {
			cols[i].cells = append(cols[i].cells, v)
		}
	}
	p.table(cols)
}

// workers is the plugin's computation/communication bars per rank.
func workers(p *printer, c *perf.CrossRank) {
	if len(c.Workers) == 0 {
		return
	}
	p.Title("Average step per rank (the plugin's distributed view)")
	cols := []column{{head: "rank"}, {head: "compute only"}, {head: "overlap"}, {head: "comm only"}, {head: "other"}, {head: "", drop: 1}}
	for _, w := range c.Workers {
		mark := ""
		if w.Straggler {
			mark = "straggler"
		}
		for i, v := range []string{fmt.Sprint(w.Rank), dur(w.ComputeOnlyNS), dur(w.OverlapNS), dur(w.CommunicationOnlyNS), dur(w.OtherNS), mark} {
			cols[i].cells = append(cols[i].cells, v)
		}
	}
	p.table(cols)
}
