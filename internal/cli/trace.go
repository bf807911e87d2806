package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"

	"github.com/ptscope/ptscope/internal/report/rundir"

	"github.com/ptscope/ptscope/internal/perf"
	"github.com/ptscope/ptscope/internal/report"
	"github.com/ptscope/ptscope/internal/report/chart"
	"github.com/ptscope/ptscope/internal/units"
)

const traceUsage = `Usage: ptscope trace [flags] FILE|DIR...

Analyse PyTorch profiler (Kineto) traces: *.pt.trace.json[.gz] written by
torch.profiler (tensorboard_trace_handler or export_chrome_trace), plain or
gzip/xz/zstd compressed, of any size. A folder is searched recursively; one
trace per rank gives a cross-rank comparison (step skew, stragglers).

The overview shows every step with its wall time split in the TensorBoard
plugin's priority order (kernel, memcpy, memset, communication, runtime,
DataLoader, CPU exec, other), GPU utilisation, estimated SM efficiency and
occupancy, tensor-core use, phases, findings with recommendations, then the
top operators and kernels.

Views (--view):
  overview   steps, breakdown, GPU metrics, findings, top operators and kernels
  operators  operator table: calls, host self/total, device self/total
  kernels    kernel table: calls, total/mean/min/max, blocks per SM, occupancy, tensor cores
  steps      per-step breakdown and phases
  idle       GPU idle time (host wait / kernel wait / other), launch delays, copies, syncs
  comm       communication kernels, overlap, collectives, cross-rank skew
  memory     peak allocated/reserved per device from [memory] events

Examples:
  ptscope trace rank0.1700000000.pt.trace.json.gz
  ptscope trace --view operators --top 30 --group-by-shape trace.json
  ptscope trace --view kernels trace.json.gz
  ptscope trace --json traces/ > report.json
  ptscope trace --out runs/ traces/          # run folder with report.json, report.txt and PNG charts
`

type traceFlags struct {
	view         string
	top          int
	groupByShape bool
	annotations  bool
	dropLast     bool
	json         bool
	out          string
	name         string
}

func traceCommand() command {
	c := command{name: "trace", summary: "analyse PyTorch profiler (Kineto) traces: steps, GPU use, operators, kernels", usage: traceUsage}
	c.run = func(e *env, args []string) error {
		var f traceFlags
		fs := newFlagSet(e, c)
		fs.StringVar(&f.view, "view", "overview", "overview|operators|kernels|steps|idle|comm|memory")
		fs.IntVar(&f.top, "top", 0, "rows of operator and kernel tables (default 10 in text, all in --json)")
		fs.BoolVar(&f.groupByShape, "group-by-shape", false, "one operator row per (name, input shapes); needs record_shapes=True")
		fs.BoolVar(&f.annotations, "annotations", false, "include user annotations (record_function, ProfilerStep*) in the operator table")
		fs.BoolVar(&f.dropLast, "drop-last-step", false, "leave out the last profiler step (HTA's default; it may be cut short)")
		fs.BoolVar(&f.json, "json", false, "print one JSON document (see docs/json.md)")
		fs.StringVar(&f.out, "out", "", "write a run folder DIR/YYYYMMDD_HHMMSS_NAME/ with report.json, report.txt and PNG charts")
		fs.StringVar(&f.name, "name", "", "name of the run folder (default: the first input's name)")
		paths, err := parseInterspersed(fs, args)
		if err != nil {
			return err
		}
		if len(paths) == 0 {
			return usagef("trace: no input (run 'ptscope trace -h')")
		}
		switch f.view {
		case "overview", "operators", "kernels", "steps", "idle", "comm", "memory":
		default:
			return usagef("trace: unknown --view %q (overview, operators, kernels, steps, idle, comm, memory)", f.view)
		}
		if f.top < 0 {
			return usagef("trace: --top must be positive")
		}
		// traces are read into compact columns: a tighter GC keeps the peak
		// RSS near the live size (measured: 247 -> under 200 MB on 360 MB).
		if os.Getenv("GOGC") == "" {
			defer debug.SetGCPercent(debug.SetGCPercent(50))
		}
		rep, err := LoadTraceReport(e.ctx, paths, perf.Options{GroupByShape: f.groupByShape, Annotations: f.annotations, DropLastStep: f.dropLast})
		if err != nil {
			return err
		}
		for _, r := range rep.Ranks {
			for _, w := range r.Warnings {
				fmt.Fprintf(e.stderr, "ptscope: warning: %s: %s\n", r.Path, w)
			}
		}
		if f.json {
			return writeTraceJSON(e.stdout, rep, f.top)
		}
		var text bytes.Buffer
		renderTrace(&text, rep, f)
		if _, err := e.stdout.Write(text.Bytes()); err != nil {
			return err
		}
		if f.out != "" {
			name := f.name
			if name == "" {
				name = traceName(paths[0])
			}
			dir, err := writeTraceRun(f.out, name, rep, text.Bytes())
			if err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "\nwrote %s\n", dir)
		}
		return nil
	}
	return c
}

// LoadTraceReport reads and analyses Kineto traces (files or folders, one
// trace per rank). `ptscope check` calls it for its trace thresholds.
func LoadTraceReport(ctx context.Context, paths []string, opt perf.Options) (*perf.Report, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	return perf.Load(ctx, paths, opt)
}

func traceName(p string) string {
	b := filepath.Base(filepath.Clean(p))
	for _, s := range []string{".gz", ".xz", ".zst", ".json", ".trace", ".pt"} {
		b = strings.TrimSuffix(b, s)
	}
	return b
}

func writeTraceJSON(w io.Writer, rep *perf.Report, top int) error {
	if top > 0 {
		cp := *rep
		cp.Ranks = append([]perf.Rank(nil), rep.Ranks...)
		for i := range cp.Ranks {
			r := &cp.Ranks[i]
			r.Operators = r.Operators[:min(top, len(r.Operators))]
			r.Kernels = r.Kernels[:min(top, len(r.Kernels))]
		}
		rep = &cp
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

func dur(ns int64) string { return units.Duration(ns) }

func ratio(part, total int64) string {
	if total <= 0 {
		return "-"
	}
	return units.Percent(float64(part) / float64(total))
}

func clip(s string, n int) string {
	if len([]rune(s)) <= n {
		return s
	}
	return string([]rune(s)[:n-3]) + "..."
}

func renderTrace(w io.Writer, rep *perf.Report, f traceFlags) {
	top := f.top
	if top == 0 {
		top = 10
	}
	for i := range rep.Ranks {
		r := &rep.Ranks[i]
		if i > 0 {
			fmt.Fprintln(w)
		}
		renderHeader(w, r)
		switch f.view {
		case "overview":
			renderSteps(w, r, false)
			renderAverages(w, r)
			renderFindings(w, r.Findings)
			renderOperators(w, r, top)
			renderKernels(w, r, top)
		case "operators":
			renderOperators(w, r, top)
		case "kernels":
			renderKernels(w, r, top)
		case "steps":
			renderSteps(w, r, true)
		case "idle":
			renderIdle(w, r)
		case "comm":
			renderComm(w, r)
		case "memory":
			renderMemory(w, r)
		}
	}
	if rep.Cross != nil && (f.view == "overview" || f.view == "comm" || f.view == "steps") {
		renderCross(w, rep)
	}
}

func renderHeader(w io.Writer, r *perf.Rank) {
	var gpus []string
	for _, g := range r.GPUs {
		s := fmt.Sprintf("GPU %d", g.Device)
		if g.Name != "" {
			s += " " + g.Name
		}
		gpus = append(gpus, s)
	}
	rank := fmt.Sprintf("rank %d", r.Rank)
	if r.WorldSize > 0 {
		rank += fmt.Sprintf(" of %d", r.WorldSize)
	}
	if len(gpus) == 0 {
		gpus = []string{"no GPU kernels"}
	}
	fmt.Fprintf(w, "%s  (%s, %d events, %s, %s)\n", r.Path, units.Bytes(r.Bytes), r.Events, rank, strings.Join(gpus, ", "))
}

func renderSteps(w io.Writer, r *perf.Rank, phases bool) {
	fmt.Fprintln(w, "\nSteps (wall time with GPU work; breakdown in the plugin's priority order)")
	t := report.Table{Header: []string{"step", "duration", "host", "kernel", "memcpy", "memset", "comm", "runtime", "dataloader", "cpu exec", "other", "gpu util"}}
	for _, s := range r.Steps {
		b := s.Breakdown
		t.Rows = append(t.Rows, []string{s.Name, dur(s.DurationNS), dur(s.HostDurationNS), dur(b.KernelNS), dur(b.MemcpyNS), dur(b.MemsetNS),
			dur(b.CommunicationNS), dur(b.RuntimeNS), dur(b.DataLoaderNS), dur(b.CPUExecNS), dur(b.OtherNS), units.Percent(s.UtilizationRatio)})
	}
	if len(r.Steps) > 1 {
		b := r.AverageBreakdown
		t.Rows = append(t.Rows, []string{"average", dur(r.AverageStepNS), "", dur(b.KernelNS), dur(b.MemcpyNS), dur(b.MemsetNS),
			dur(b.CommunicationNS), dur(b.RuntimeNS), dur(b.DataLoaderNS), dur(b.CPUExecNS), dur(b.OtherNS), units.Percent(r.GPUUtilizationRatio)})
	}
	t.Write(w)
	if !phases {
		return
	}
	fmt.Fprintln(w, "\nPhases (wall time; priority data loading > optimizer > backward > forward)")
	pt := report.Table{Header: []string{"step", "forward", "backward", "optimizer", "data loading", "other", "host dataloader", "allocated at start"}}
	for _, s := range r.Steps {
		p := s.Phases
		mem := "-"
		if s.StartAllocatedBytes >= 0 {
			mem = units.Bytes(s.StartAllocatedBytes)
		}
		pt.Rows = append(pt.Rows, []string{s.Name, dur(p.ForwardNS), dur(p.BackwardNS), dur(p.OptimizerNS), dur(p.DataLoadingNS), dur(p.OtherNS), dur(s.HostDataLoaderNS), mem})
	}
	pt.Write(w)
	if len(r.UserRanges) > 0 {
		fmt.Fprintln(w, "\nUser annotations (record_function ranges; device = GPU work launched while open, any thread)")
		ut := report.Table{Header: []string{"annotation", "calls", "host total", "device total"}}
		for _, u := range r.UserRanges {
			ut.Rows = append(ut.Rows, []string{clip(u.Name, 70), fmt.Sprint(u.Calls), dur(u.HostTotalNS), dur(u.DeviceTotalNS)})
		}
		ut.Write(w)
	}
}

func renderAverages(w io.Writer, r *perf.Rank) {
	if len(r.Steps) == 0 {
		return
	}
	fmt.Fprintf(w, "\nAverage step %s", dur(r.AverageStepNS))
	if len(r.Steps) > 1 {
		fmt.Fprintf(w, " (variation %s over %d steps)", units.Percent(r.StepTimeVariationRatio), len(r.Steps))
	}
	fmt.Fprintln(w, ":")
	var parts []string
	for _, p := range r.AverageBreakdown.Parts() {
		if p.NS > 0 {
			parts = append(parts, fmt.Sprintf("%s %s", p.Name, ratio(p.NS, r.AverageStepNS)))
		}
	}
	fmt.Fprintf(w, "  breakdown   %s\n", strings.Join(parts, ", "))
	p := r.AveragePhases
	fmt.Fprintf(w, "  phases      forward %s, backward %s, optimizer %s, data loading %s, other %s (DataLoader: %s of host step time)\n",
		ratio(p.ForwardNS, r.AverageStepNS), ratio(p.BackwardNS, r.AverageStepNS), ratio(p.OptimizerNS, r.AverageStepNS),
		ratio(p.DataLoadingNS, r.AverageStepNS), ratio(p.OtherNS, r.AverageStepNS), units.Percent(r.HostDataLoaderRatio))
	if len(r.GPUs) > 0 {
		fmt.Fprintf(w, "  GPU         utilization %s, est. SM efficiency %s, est. achieved occupancy %s, tensor cores %s of kernel time\n",
			units.Percent(r.GPUUtilizationRatio), units.Percent(r.SMEfficiencyRatio), units.Percent(r.AchievedOccupancyRatio), units.Percent(r.TensorCoreRatio))
		fmt.Fprintf(w, "  GPU idle    %s of the GPU span: host wait %s, kernel wait %s, other %s\n",
			units.Percent(r.Idle.IdleRatio), dur(r.Idle.HostWaitNS), dur(r.Idle.KernelWaitNS), dur(r.Idle.OtherNS))
	}
	if r.Memory.PeakAllocatedBytes > 0 {
		fmt.Fprintf(w, "  memory      peak allocated %s, peak reserved %s\n", units.Bytes(r.Memory.PeakAllocatedBytes), units.Bytes(r.Memory.PeakReservedBytes))
	}
	if r.Comm.Kernels > 0 {
		fmt.Fprintf(w, "  comm        %d kernels, %s, %s overlapped with compute\n", r.Comm.Kernels, dur(r.Comm.KernelNS), units.Percent(r.Comm.OverlapRatio))
	}
}

func renderFindings(w io.Writer, fs []perf.Finding) {
	if len(fs) == 0 {
		fmt.Fprintln(w, "\nFindings: none")
		return
	}
	fmt.Fprintln(w, "\nFindings")
	for _, f := range fs {
		fmt.Fprintf(w, "  [%s] %s: %s\n", f.Severity, f.ID, f.Message)
		if f.Recommendation != "" {
			fmt.Fprintf(w, "      -> %s\n", f.Recommendation)
		}
	}
}

func renderOperators(w io.Writer, r *perf.Rank, top int) {
	if len(r.Operators) == 0 {
		return
	}
	fmt.Fprintf(w, "\nTop operators by device self time (%d of %d)\n", min(top, len(r.Operators)), len(r.Operators))
	hdr := []string{"operator", "calls", "device self", "device total", "host self", "host total", "tc eligible"}
	shapes := len(r.Operators) > 0 && r.Operators[0].InputShapes != ""
	for _, o := range r.Operators {
		if o.InputShapes != "" {
			shapes = true
		}
	}
	if shapes {
		hdr = append(hdr, "input shapes")
	}
	t := report.Table{Header: hdr}
	for _, o := range r.Operators[:min(top, len(r.Operators))] {
		tc := ""
		if o.TensorCoreEligible {
			tc = "yes"
		}
		row := []string{clip(o.Name, 60), fmt.Sprint(o.Calls), dur(o.DeviceSelfNS), dur(o.DeviceTotalNS), dur(o.HostSelfNS), dur(o.HostTotalNS), tc}
		if shapes {
			row = append(row, clip(o.InputShapes, 60))
		}
		t.Rows = append(t.Rows, row)
	}
	t.Write(w)
}

func renderKernels(w io.Writer, r *perf.Rank, top int) {
	if len(r.Kernels) == 0 {
		return
	}
	fmt.Fprintf(w, "\nTop kernels by total time (%d of %d)\n", min(top, len(r.Kernels)), len(r.Kernels))
	t := report.Table{Header: []string{"kernel", "calls", "total", "mean", "min", "max", "blocks/SM", "occupancy", "tensor cores"}}
	for _, k := range r.Kernels[:min(top, len(r.Kernels))] {
		tc := "no"
		if k.TensorCore {
			tc = "yes"
		}
		t.Rows = append(t.Rows, []string{clip(k.Name, 70), fmt.Sprint(k.Calls), dur(k.TotalNS), dur(k.MeanNS), dur(k.MinNS), dur(k.MaxNS),
			fmt.Sprintf("%.2f", k.MeanBlocksPerSM), units.Percent(k.MeanOccupancyRatio), tc})
	}
	t.Write(w)
}

func renderIdle(w io.Writer, r *perf.Rank) {
	i := r.Idle
	fmt.Fprintf(w, "\nGPU idle time over %d streams (HTA's rule; kernel wait = gaps under 30 us)\n", i.Streams)
	t := report.Table{Header: []string{"", "time", "share of GPU span"}}
	for _, row := range []struct {
		n string
		v int64
	}{{"GPU span", i.GPUSpanNS}, {"busy", i.BusyNS}, {"idle", i.IdleNS}, {"  host wait", i.HostWaitNS}, {"  kernel wait", i.KernelWaitNS}, {"  other", i.OtherNS}} {
		t.Rows = append(t.Rows, []string{row.n, dur(row.v), ratio(row.v, i.GPUSpanNS)})
	}
	t.Write(w)
	l := r.Launch
	fmt.Fprintf(w, "\nKernel launches: %d kernels, %d launches; delay mean %s, p50 %s, p95 %s, max %s; %d over 100 us; mean launch call %s; %d kernels under 10 us\n",
		l.Kernels, l.Launches, dur(l.MeanDelayNS), dur(l.P50DelayNS), dur(l.P95DelayNS), dur(l.MaxDelayNS), l.LongDelays, dur(l.MeanRuntimeNS), l.TinyKernels)
	if len(r.Copies) > 0 {
		fmt.Fprintln(w, "\nMemcpy / memset")
		ct := report.Table{Header: []string{"kind", "direction", "pageable", "calls", "bytes", "time", "GB/s"}}
		for _, c := range r.Copies {
			pg := "no"
			if c.Pageable {
				pg = "yes"
			}
			ct.Rows = append(ct.Rows, []string{c.Name, c.Direction, pg, fmt.Sprint(c.Calls), units.Bytes(c.Bytes), dur(c.TotalNS), fmt.Sprintf("%.1f", c.BandwidthGBps)})
		}
		ct.Write(w)
	}
	if len(r.Syncs) > 0 {
		fmt.Fprintln(w, "\nSynchronisations")
		st := report.Table{Header: []string{"call", "calls", "host time"}}
		for _, s := range r.Syncs {
			st.Rows = append(st.Rows, []string{s.Name, fmt.Sprint(s.Calls), dur(s.TotalNS)})
		}
		st.Write(w)
	}
}

func renderComm(w io.Writer, r *perf.Rank) {
	c := r.Comm
	if c.Kernels == 0 {
		fmt.Fprintf(w, "\nNo communication kernels (record_param_comms ops: %d)\n", c.RecordParamComm)
		return
	}
	fmt.Fprintf(w, "\nCommunication: %d kernels, %s; %s overlapped with compute, %s exposed\n", c.Kernels, dur(c.KernelNS), units.Percent(c.OverlapRatio), dur(c.ExposedNS))
	t := report.Table{Header: []string{"collective", "calls", "time", "bytes"}}
	for _, x := range c.Collectives {
		t.Rows = append(t.Rows, []string{x.Name, fmt.Sprint(x.Calls), dur(x.TotalNS), units.Bytes(x.Bytes)})
	}
	t.Write(w)
}

func renderCross(w io.Writer, rep *perf.Report) {
	c := rep.Cross
	fmt.Fprintf(w, "\nAcross %d ranks\n", len(c.Ranks))
	t := report.Table{Header: []string{"rank", "steps", "avg step", "gpu util", "comm", "last to join"}}
	for _, r := range c.Ranks {
		t.Rows = append(t.Rows, []string{fmt.Sprint(r.Rank), fmt.Sprint(r.Steps), dur(r.AverageStepNS), units.Percent(r.GPUUtilizationRatio), dur(r.CommunicationNS), fmt.Sprint(c.LateArrivals[r.Rank])})
	}
	t.Write(w)
	if len(c.Steps) > 0 {
		st := report.Table{Header: []string{"step", "skew", "slowest rank"}}
		for _, s := range c.Steps {
			st.Rows = append(st.Rows, []string{s.Name, dur(s.SkewNS), fmt.Sprint(s.SlowestRank)})
		}
		fmt.Fprintln(w)
		st.Write(w)
	}
	if len(c.Collectives) > 0 {
		fmt.Fprintln(w, "\nMost skewed collectives (start skew on the shared clock)")
		ct := report.Table{Header: []string{"collective", "#", "start skew", "last to join", "longest kernel", "on rank"}}
		for _, x := range c.Collectives[:min(10, len(c.Collectives))] {
			ct.Rows = append(ct.Rows, []string{x.Name, fmt.Sprint(x.Index), dur(x.StartSkewNS), fmt.Sprint(x.LastRank), dur(x.MaxDurNS), fmt.Sprint(x.SlowestRank)})
		}
		ct.Write(w)
	}
	renderFindings(w, rep.Findings)
}

func renderMemory(w io.Writer, r *perf.Rank) {
	m := r.Memory
	if len(m.Devices) == 0 {
		fmt.Fprintln(w, "\nNo [memory] events (profile with profile_memory=True)")
		return
	}
	fmt.Fprintln(w, "\nMemory ([memory] events; times from the first step's host start)")
	t := report.Table{Header: []string{"device", "events", "peak allocated", "at", "peak reserved", "at", "capacity"}}
	for _, d := range m.Devices {
		capS := ""
		if d.CapacityBytes > 0 {
			capS = units.Bytes(d.CapacityBytes)
		}
		t.Rows = append(t.Rows, []string{d.Device, fmt.Sprint(d.Events), units.Bytes(d.PeakAllocatedBytes), dur(d.PeakAllocatedAtNS),
			units.Bytes(d.PeakReservedBytes), dur(d.PeakReservedAtNS), capS})
	}
	t.Write(w)
	if m.OOMEvents > 0 {
		fmt.Fprintf(w, "%d out-of-memory events\n", m.OOMEvents)
	}
}

// writeTraceRun writes the run folder: report.json, report.txt and charts.
func writeTraceRun(out, name string, rep *perf.Report, text []byte) (string, error) {
	dir, err := rundir.NewRunDir(out, name)
	if err != nil && dir == "" {
		return "", err
	}
	var js bytes.Buffer
	if err := writeTraceJSON(&js, rep, 0); err != nil {
		return dir, err
	}
	if err := rundir.WriteFileAtomic(filepath.Join(dir, "report.json"), js.Bytes()); err != nil {
		return dir, err
	}
	if err := rundir.WriteFileAtomic(filepath.Join(dir, "report.txt"), text); err != nil {
		return dir, err
	}
	for _, r := range rep.Ranks {
		prefix := ""
		if len(rep.Ranks) > 1 {
			prefix = fmt.Sprintf("rank%d_", r.Rank)
		}
		for file, c := range traceCharts(&r) {
			var b bytes.Buffer
			if err := chart.WritePNG(&b, c); err != nil {
				return dir, fmt.Errorf("chart %s: %w", file, err)
			}
			if err := rundir.WriteFileAtomic(filepath.Join(dir, prefix+file), b.Bytes()); err != nil {
				return dir, err
			}
		}
	}
	return dir, nil
}

// traceCharts lays out the charts of one rank (no computation: the values
// come from the analysis).
func traceCharts(r *perf.Rank) map[string]chart.Chart {
	out := map[string]chart.Chart{}
	if len(r.Steps) > 0 {
		b := chart.Bars{Title: "Step time breakdown", XLabel: "step", Unit: chart.UnitDuration}
		for _, s := range r.Steps {
			b.Labels = append(b.Labels, s.Name)
		}
		for k, p := range r.Steps[0].Breakdown.Parts() {
			ser := chart.Series{Name: p.Name}
			for _, s := range r.Steps {
				ser.Y = append(ser.Y, float64(s.Breakdown.Parts()[k].NS))
			}
			b.Stacks = append(b.Stacks, ser)
		}
		out["step_breakdown.png"] = b
	}
	if len(r.UtilTimeline) > 0 {
		l := chart.Line{Title: "GPU utilization over time", XLabel: "time from first step", XUnit: chart.UnitDuration, YLabel: "busy", YUnit: chart.UnitPercent}
		byDev := map[int]*chart.Series{}
		var devs []int
		for _, p := range r.UtilTimeline {
			s := byDev[p.Device]
			if s == nil {
				s = &chart.Series{Name: fmt.Sprintf("GPU %d", p.Device)}
				byDev[p.Device] = s
				devs = append(devs, p.Device)
			}
			s.X = append(s.X, float64(p.StartNS))
			s.Y = append(s.Y, p.UtilizationRatio)
		}
		for _, d := range devs {
			l.Series = append(l.Series, *byDev[d])
		}
		out["gpu_utilization.png"] = l
	}
	if n := min(15, len(r.Operators)); n > 0 {
		b := chart.Bars{Title: "Top operators by device self time", XLabel: "device self time", Unit: chart.UnitDuration, Horizontal: true}
		s := chart.Series{Name: "device self"}
		for _, o := range r.Operators[:n] {
			b.Labels = append(b.Labels, clip(o.Name, 50))
			s.Y = append(s.Y, float64(o.DeviceSelfNS))
		}
		b.Stacks = []chart.Series{s}
		out["top_operators.png"] = b
	}
	if n := min(15, len(r.Kernels)); n > 0 {
		b := chart.Bars{Title: "Top kernels by total time", XLabel: "total time", Unit: chart.UnitDuration, Horizontal: true}
		s := chart.Series{Name: "total"}
		for _, k := range r.Kernels[:n] {
			b.Labels = append(b.Labels, clip(k.Name, 50))
			s.Y = append(s.Y, float64(k.TotalNS))
		}
		b.Stacks = []chart.Series{s}
		out["top_kernels.png"] = b
	}
	var mem []chart.Series
	for _, d := range r.Memory.Devices {
		if !d.IsGPU || len(d.Curve) == 0 {
			continue
		}
		a := chart.Series{Name: d.Device + " allocated"}
		rs := chart.Series{Name: d.Device + " reserved"}
		for _, p := range d.Curve {
			a.X = append(a.X, float64(p.TNS))
			a.Y = append(a.Y, float64(p.Allocated))
			rs.X = append(rs.X, float64(p.TNS))
			rs.Y = append(rs.Y, float64(p.Reserved))
		}
		mem = append(mem, a, rs)
	}
	if len(mem) > 0 {
		out["memory.png"] = chart.Line{Title: "GPU memory ([memory] events)", XLabel: "time from first step", XUnit: chart.UnitDuration, YLabel: "bytes", YUnit: chart.UnitBytes, Series: mem}
	}
	return out
}
