package tracereport

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/ptscope/ptscope/internal/perf"
	"github.com/ptscope/ptscope/internal/report"
)

// count formats n with thousands separators.
func count(n int) string {
	s := strconv.Itoa(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		return "-" + s
	}
	return s
}

func stepsTable(p *printer, r *perf.Rank, phases bool) {
	n := len(r.Steps)
	if n == 0 {
		p.Blank()
		p.Line("No steps: the trace holds no host events.")
		return
	}
	idx := pickSteps(r, p.O)
	p.Title(fmt.Sprintf("Steps (%d): wall time with GPU work, split in the plugin's priority order", n))
	name := column{head: "step", min: -1}
	cols := []column{
		{head: "duration"}, {head: "host", drop: 5}, {head: "gpu util"},
		{head: "kernel", drop: 1}, {head: "memcpy", drop: 9}, {head: "memset", drop: 10}, {head: "comm", drop: 2},
		{head: "runtime", drop: 4}, {head: "dataloader", drop: 3}, {head: "cpu exec", drop: 3}, {head: "other", drop: 6},
	}
	add := func(label string, d, host int64, util float64, b perf.Breakdown) {
		name.cells = append(name.cells, label)
		for k, v := range []string{dur(d), dur(host), pct(util), dur(b.KernelNS), dur(b.MemcpyNS), dur(b.MemsetNS),
			dur(b.CommunicationNS), dur(b.RuntimeNS), dur(b.DataLoaderNS), dur(b.CPUExecNS), dur(b.OtherNS)} {
			cols[k].cells = append(cols[k].cells, v)
		}
	}
	for _, i := range idx {
		s := r.Steps[i]
		add(stepLabel(r, i), s.DurationNS, s.HostDurationNS, s.UtilizationRatio, s.Breakdown)
	}
	if n > 1 {
		add("average", r.AverageStepNS, r.AverageHostStepNS, r.GPUUtilizationRatio, r.AverageBreakdown)
		cols[1].cells[len(cols[1].cells)-1] = ""
	}
	p.table(append([]column{name}, cols...))
	if left := n - len(idx); left > 0 {
		p.Para(fmt.Sprintf("%d more steps not listed (--steps all lists every step).", left), "", "")
	}
	if !phases {
		return
	}
	p.Title("Phases (wall time, by priority: data loading, backward, forward, optimizer)")
	name = column{head: "step", min: -1}
	pc := []column{{head: "forward"}, {head: "backward"}, {head: "optimizer"}, {head: "data loading", drop: 2}, {head: "other", drop: 3},
		{head: "host dataloader", drop: 1}, {head: "allocated at start", drop: 4}}
	for _, i := range idx {
		s := r.Steps[i]
		ph := s.Phases
		mem := "-"
		if s.StartAllocatedBytes >= 0 {
			mem = size(s.StartAllocatedBytes)
		}
		name.cells = append(name.cells, stepLabel(r, i))
		for k, v := range []string{dur(ph.ForwardNS), dur(ph.BackwardNS), dur(ph.OptimizerNS), dur(ph.DataLoadingNS), dur(ph.OtherNS), dur(s.HostDataLoaderNS), mem} {
			pc[k].cells = append(pc[k].cells, v)
		}
	}
	p.table(append([]column{name}, pc...))
}

// stepLabel names step i, marking the slowest and the outliers.
func stepLabel(r *perf.Rank, i int) string {
	s := r.Steps[i].Name
	switch {
	case i == r.SlowestStep && len(r.Steps) > 2 && float64(r.Steps[i].DurationNS) > 1.05*float64(r.MedianStepNS):
		s += " (slowest)"
	case slices.Contains(r.OutlierSteps, i):
		s += " (outlier)"
	}
	return s
}

func averages(p *printer, r *perf.Rank) {
	if len(r.Steps) == 0 {
		return
	}
	head := fmt.Sprintf("Where the step goes (average step %s", dur(r.AverageStepNS))
	if len(r.Steps) > 1 {
		head += fmt.Sprintf(", median %s, variation %s over %d steps", dur(r.MedianStepNS), pct(r.StepTimeVariationRatio), len(r.Steps))
	}
	p.Title(head + ")")
	avg := r.AverageStepNS
	var parts []string
	for _, x := range r.AverageBreakdown.Parts() {
		if x.NS > 0 {
			parts = append(parts, fmt.Sprintf("%s %s", x.Name, ratio(x.NS, avg)))
		}
	}
	p.label("breakdown", strings.Join(parts, ", "))
	ph := r.AveragePhases
	p.label("phases", fmt.Sprintf("forward %s, backward %s, optimizer %s, data loading %s, other %s",
		ratio(ph.ForwardNS, avg), ratio(ph.BackwardNS, avg), ratio(ph.OptimizerNS, avg), ratio(ph.DataLoadingNS, avg), ratio(ph.OtherNS, avg)))
	p.label("DataLoader", fmt.Sprintf("%s of the step with nothing else running; %s of the host's step time", pct(r.DataLoaderRatio), pct(r.HostDataLoaderRatio)))
	for _, g := range r.GPUs {
		i := g.Idle
		idle := []string{}
		for _, x := range []struct {
			n string
			v int64
		}{{"host wait", i.HostWaitNS}, {"communication", i.CommunicationNS}, {"copies", i.CopyNS}, {"kernel wait", i.KernelWaitNS}, {"other", i.OtherNS}} {
			if x.v > 0 {
				idle = append(idle, fmt.Sprintf("%s %s", x.n, ratio(x.v, i.SpanNS)))
			}
		}
		text := fmt.Sprintf("compute %s of the time, idle %s", pct(g.UtilizationRatio), pct(i.IdleRatio))
		if len(idle) > 0 {
			text += " (" + strings.Join(idle, ", ") + ")"
		}
		text += fmt.Sprintf("; est. SM efficiency %s, est. occupancy %s, tensor cores %s of kernel time",
			pct(g.SMEfficiencyRatio), pct(g.AchievedOccupancyRatio), pct(g.TensorCoreRatio))
		p.label(fmt.Sprintf("GPU %d", g.Device), text)
	}
	if m := r.Memory; m.PeakAllocatedBytes > 0 {
		p.label("memory", fmt.Sprintf("peak allocated %s, peak reserved %s", size(m.PeakAllocatedBytes), size(m.PeakReservedBytes)))
	}
	if c := r.Comm; c.Kernels > 0 {
		p.label("comm", fmt.Sprintf("%s kernels, %s; %s overlapped with compute, %s exposed", count(c.Kernels), dur(c.KernelNS), pct(c.OverlapRatio), dur(c.ExposedNS)))
	}
	if h := r.HTA; h.KernelTimeNS > 0 {
		// HTA's definitions, for a user who compares with HTA
		win := "first to last GPU event"
		if h.LastStepDropped {
			win += " launched before the last step"
		}
		text := fmt.Sprintf("compute %s, non-compute %s, idle %s of %s (%s); idle per stream: host wait %s, kernel wait %s, other %s",
			pct(h.ComputeRatio), pct(h.NonComputeRatio), pct(h.IdleRatio), dur(h.KernelTimeNS), win,
			dur(h.HostWaitNS), dur(h.KernelWaitNS), dur(h.OtherWaitNS))
		if r.Comm.Kernels > 0 {
			text += fmt.Sprintf("; comm/compute overlap %s", pct(h.CommCompOverlapRatio))
		}
		p.label("as HTA", text)
	}
	criticalLine(p, r)
	if o := r.Overhead; o != nil {
		p.label("profiling", fmt.Sprintf("profiled steps %s, unprofiled steps of the same run %s (median of %d): %s slower",
			dur(o.ProfiledStepNS), dur(o.UnprofiledStepNS), len(o.UnprofiledSteps), pct(o.SlowdownRatio)))
	}
}

func operators(p *printer, r *perf.Rank, top int) {
	if len(r.Operators) == 0 {
		return
	}
	n := min(top, len(r.Operators))
	p.Title(fmt.Sprintf("Top operators by device self time (%d of %d)", n, len(r.Operators)))
	cols := []column{{head: "operator", min: 32}, {head: "calls"}, {head: "device self"}, {head: "device total", drop: 2},
		{head: "host self", drop: 3}, {head: "host total", drop: 1}, {head: "tc eligible", drop: 4}}
	shapes := false
	for _, o := range r.Operators[:n] {
		shapes = shapes || o.InputShapes != ""
	}
	if shapes {
		cols = append(cols, column{head: "input shapes", min: 24})
	}
	for _, o := range r.Operators[:n] {
		tc := ""
		if o.TensorCoreEligible {
			tc = "yes"
		}
		row := []string{o.Name, count(o.Calls), dur(o.DeviceSelfNS), dur(o.DeviceTotalNS), dur(o.HostSelfNS), dur(o.HostTotalNS), tc, o.InputShapes}
		for k := range cols {
			cols[k].cells = append(cols[k].cells, row[k])
		}
	}
	p.table(cols)
}

func kernels(p *printer, r *perf.Rank, top int) {
	if len(r.Kernels) == 0 {
		return
	}
	n := min(top, len(r.Kernels))
	p.Title(fmt.Sprintf("Top kernels by total time (%d of %d)", n, len(r.Kernels)))
	cols := []column{{head: "kernel", min: 40}, {head: "calls"}, {head: "total"}, {head: "mean", drop: 3}, {head: "min", drop: 6}, {head: "max", drop: 5},
		{head: "blocks/SM", drop: 4}, {head: "occupancy", drop: 2}, {head: "tensor cores", drop: 1}}
	for _, k := range r.Kernels[:n] {
		tc := "no"
		switch {
		case k.TensorCore:
			tc = "yes"
		case k.Communication:
			tc = "comm"
		}
		row := []string{KernelName(k.Name), count(k.Calls), dur(k.TotalNS), dur(k.MeanNS), dur(k.MinNS), dur(k.MaxNS),
			fmt.Sprintf("%.2f", k.MeanBlocksPerSM), pct(k.MeanOccupancyRatio), tc}
		for c := range cols {
			cols[c].cells = append(cols[c].cells, row[c])
		}
	}
	p.table(cols)
}

func userRanges(p *printer, r *perf.Rank, top int) {
	if len(r.UserRanges) == 0 {
		return
	}
	n := min(top, len(r.UserRanges))
	p.Title(fmt.Sprintf("User annotations (record_function ranges, %d of %d; device = GPU work launched while open, any thread)", n, len(r.UserRanges)))
	cols := []column{{head: "annotation"}, {head: "calls"}, {head: "host total"}, {head: "device total"}}
	for _, u := range r.UserRanges[:n] {
		for k, v := range []string{u.Name, count(u.Calls), dur(u.HostTotalNS), dur(u.DeviceTotalNS)} {
			cols[k].cells = append(cols[k].cells, v)
		}
	}
	p.table(cols)
}

func idle(p *printer, r *perf.Rank) {
	if len(r.GPUs) == 0 {
		p.Blank()
		p.Line("No GPU work in this trace.")
	}
	for _, g := range r.GPUs {
		i := g.Idle
		streams := fmt.Sprintf("%d streams", g.Streams)
		if g.Streams == 1 {
			streams = "1 stream"
		}
		p.Title(fmt.Sprintf("GPU %d during the steps (%s): compute vs idle; idle split by what the GPU waited for", g.Device, streams))
		cols := []column{{head: ""}, {head: "time"}, {head: "share"}}
		for _, x := range []struct {
			n string
			v int64
		}{{"steps", i.SpanNS}, {"compute", i.ComputeNS}, {"idle", i.IdleNS}, {"  host wait", i.HostWaitNS}, {"  communication only", i.CommunicationNS},
			{"  copies only", i.CopyNS}, {"  kernel wait (< 30 us)", i.KernelWaitNS}, {"  other", i.OtherNS}} {
			cols[0].cells = append(cols[0].cells, x.n)
			cols[1].cells = append(cols[1].cells, dur(x.v))
			cols[2].cells = append(cols[2].cells, ratio(x.v, i.SpanNS))
		}
		p.table(cols)
	}
	l := r.Launch
	p.Title("Kernel launches")
	p.Para(fmt.Sprintf("%s kernels, %s launches; delay from launch to start mean %s, p50 %s, p95 %s, max %s; %s over 100 us; mean launch call %s; %s kernels under 10 us, %s shorter than their launch call.",
		count(l.Kernels), count(l.Launches), dur(l.MeanDelayNS), dur(l.P50DelayNS), dur(l.P95DelayNS), dur(l.MaxDelayNS), count(l.LongDelays), dur(l.MeanRuntimeNS),
		count(l.TinyKernels), count(l.ShortKernels)), "  ", "  ")
	launchDetail(p, r)
	if len(r.Copies) > 0 {
		p.Title("Memcpy / memset")
		cols := []column{{head: "kind"}, {head: "direction"}, {head: "pageable"}, {head: "calls"}, {head: "bytes"}, {head: "time"}, {head: "GB/s", drop: 1}}
		for _, c := range r.Copies {
			pg := "no"
			if c.Pageable {
				pg = "yes"
			}
			for k, v := range []string{c.Name, c.Direction, pg, count(c.Calls), size(c.Bytes), dur(c.TotalNS), fmt.Sprintf("%.1f", c.BandwidthBytesPerS/1e9)} {
				cols[k].cells = append(cols[k].cells, v)
			}
		}
		p.table(cols)
	}
	if len(r.Syncs) > 0 {
		p.Title("Synchronisations")
		cols := []column{{head: "call"}, {head: "calls"}, {head: "host time"}}
		for _, s := range r.Syncs {
			for k, v := range []string{s.Name, count(s.Calls), dur(s.TotalNS)} {
				cols[k].cells = append(cols[k].cells, v)
			}
		}
		p.table(cols)
	}
}

func comm(p *printer, r *perf.Rank) {
	c := r.Comm
	if c.Kernels == 0 {
		p.Blank()
		p.Line(fmt.Sprintf("No communication kernels (record_param_comms ops: %d)", c.RecordParamComm))
		return
	}
	p.Title(fmt.Sprintf("Communication: %s kernels, %s; %s overlapped with compute, %s exposed", count(c.Kernels), dur(c.KernelNS), pct(c.OverlapRatio), dur(c.ExposedNS)))
	cols := []column{{head: "collective"}, {head: "calls"}, {head: "time"}, {head: "bytes"}}
	for _, x := range c.Collectives {
		for k, v := range []string{x.Name, count(x.Calls), dur(x.TotalNS), size(x.Bytes)} {
			cols[k].cells = append(cols[k].cells, v)
		}
	}
	p.table(cols)
}

func memory(p *printer, r *perf.Rank) {
	m := r.Memory
	if len(m.Devices) == 0 {
		p.Blank()
		p.Line("No [memory] events (profile with profile_memory=True)")
		return
	}
	p.Title("Memory ([memory] events; times from the first step's start)")
	var t0 int64
	if len(r.Steps) > 0 {
		t0 = r.Steps[0].HostStartTimeNS
	}
	cols := []column{{head: "device"}, {head: "events"}, {head: "peak allocated"}, {head: "at", drop: 1}, {head: "peak reserved"}, {head: "at", drop: 1}, {head: "capacity", drop: 2}}
	for _, d := range m.Devices {
		capS := ""
		if d.CapacityBytes > 0 {
			capS = size(d.CapacityBytes)
		}
		at := func(b, ns int64) string {
			if b <= 0 {
				return "-" // never above 0: no peak to place
			}
			return dur(ns - t0)
		}
		for k, v := range []string{d.Device, count(d.Events), size(d.PeakAllocatedBytes), at(d.PeakAllocatedBytes, d.PeakAllocatedTimeNS),
			size(d.PeakReservedBytes), at(d.PeakReservedBytes, d.PeakReservedTimeNS), capS} {
			cols[k].cells = append(cols[k].cells, v)
		}
	}
	p.table(cols)
	if m.OOMEvents > 0 {
		p.Line(fmt.Sprintf("%d out-of-memory events", m.OOMEvents))
	}
}

func cross(p *printer, rep *perf.Report, top int) {
	c := rep.CrossRank
	p.Title(fmt.Sprintf("Across %d ranks", len(c.Ranks)))
	cols := []column{{head: "rank"}, {head: "steps", drop: 5}, {head: "avg step"}, {head: "gpu util", drop: 4}, {head: "comm"},
		{head: "waiting", drop: 3}, {head: "exposed", drop: 2}, {head: "others wait", drop: 1}, {head: "last to join", drop: 6}}
	for _, r := range c.Ranks {
		for k, v := range []string{fmt.Sprint(r.Rank), count(r.Steps), dur(r.AverageStepNS), pct(r.GPUUtilizationRatio), dur(r.CommunicationNS),
			dur(r.CommunicationWaitNS), dur(r.ExposedWaitNS), dur(r.CausedWaitNS), count(r.LateArrivals)} {
			cols[k].cells = append(cols[k].cells, v)
		}
	}
	p.table(cols)
	skewed := 0
	for _, x := range c.Collectives {
		if x.StartSkewNS > 0 {
			skewed++
		}
	}
	if c.MaxSkewNS == 0 && skewed == 0 {
		p.Para(fmt.Sprintf("No skew: every step takes as long on every rank, and the %d matched collectives start together.", len(c.Collectives)), "", "")
		p.findings(rep.Findings)
		return
	}
	if len(c.Steps) > 0 && c.MaxSkewNS > 0 {
		// the most skewed steps
		idx := make([]int, len(c.Steps))
		for i := range idx {
			idx[i] = i
		}
		slices.SortStableFunc(idx, func(a, b int) int {
			return int(min(max(c.Steps[b].SkewNS-c.Steps[a].SkewNS, -1), 1))
		})
		n := min(top, len(idx))
		if p.O.Steps == report.StepsAll {
			n = len(idx)
		}
		p.Title(fmt.Sprintf("Step skew across ranks (%d most skewed of %d steps; max %s)", n, len(c.Steps), dur(c.MaxSkewNS)))
		sc := []column{{head: "step"}, {head: "skew"}, {head: "slowest rank"}}
		for _, i := range idx[:n] {
			s := c.Steps[i]
			for k, v := range []string{s.Name, dur(s.SkewNS), fmt.Sprint(s.SlowestRank)} {
				sc[k].cells = append(sc[k].cells, v)
			}
		}
		p.table(sc)
	}
	if skewed > 0 {
		n := min(top, skewed)
		p.Title(fmt.Sprintf("Most skewed collectives (%d of %d matched; start skew on the shared clock)", n, len(c.Collectives)))
		cc := []column{{head: "collective"}, {head: "#"}, {head: "start skew"}, {head: "last to join"}, {head: "longest kernel", drop: 1}, {head: "on rank", drop: 1}}
		for _, x := range c.Collectives[:n] {
			for k, v := range []string{x.Name, fmt.Sprint(x.Index), dur(x.StartSkewNS), fmt.Sprint(x.LastRank), dur(x.MaxDurNS), fmt.Sprint(x.SlowestRank)} {
				cc[k].cells = append(cc[k].cells, v)
			}
		}
		p.table(cc)
	}
	p.findings(rep.Findings)
}

// KernelName shortens a kernel's name for display: without a leading
// "void " and without its parameter list.
func KernelName(name string) string {
	n := strings.TrimPrefix(name, "void ")
	if strings.HasSuffix(n, ")") {
		depth := 0
		for i := len(n) - 1; i >= 0; i-- {
			switch n[i] {
			case ')':
				depth++
			case '(':
				depth--
				if depth == 0 {
					if i > 0 {
						return n[:i]
					}
					return n
				}
			}
		}
	}
	return n
}
