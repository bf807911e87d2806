package cli

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"

	"github.com/ptscope/ptscope/internal/input"
	"github.com/ptscope/ptscope/internal/load"
	"github.com/ptscope/ptscope/internal/perf"
	"github.com/ptscope/ptscope/internal/report/tracereport"
	"github.com/ptscope/ptscope/internal/term"
)

const traceUsage = `Usage: ptscope trace [flags] FILE|DIR...

Analyse PyTorch profiler (Kineto) traces: *.pt.trace.json[.gz] written by
torch.profiler (tensorboard_trace_handler or export_chrome_trace), plain or
gzip/xz/zstd compressed, of any size, and the traces of ptscope run bundles.
A folder is searched recursively; one trace per rank gives a cross-rank
comparison (step skew, stragglers). More than 8 ranks give a fleet summary:
the distribution of step time, GPU utilisation and DataLoader share across
ranks, stragglers and collective skew (docs/fleet.md); --rank N opens one
rank's report.

The overview lists the steps (the first, the last, the slowest and outliers;
--steps all for every one) with their wall time split in the TensorBoard
plugin's priority order (kernel, memcpy, memset, communication, runtime,
DataLoader, CPU exec, other), where the average step goes (breakdown,
phases, DataLoader share, GPU compute and idle time, memory, communication),
findings with recommendations, then the top operators and kernels.

Views (--view):
  overview   steps, where the step goes, findings, top operators and kernels
  operators  operator table: calls, host self/total, device self/total
  kernels    kernel table: calls, total/mean/min/max, blocks per SM, occupancy,
             tensor cores
  steps      per-step breakdown and phases, user annotations
  idle       GPU compute vs idle (host wait, communication, copies, kernel
             wait), launch delays and launch-bound steps, copies,
             synchronisations
  comm       communication kernels, overlap, collectives, communication
             operators, cross-rank skew
  memory     peak allocated/reserved per device from [memory] events, memory
             by operator (profile_memory=True)
  critical   HTA's critical path per step: what bounds it, what shortening
             each piece of work would save
  sequences  kernel sequences launched by one operator: fusion candidates
  modules    the nn.Module hierarchy (with_stack or with_modules traces)
  streams    per stream: launch queue, idle gaps; copy bandwidth, GPU-side
             annotations

Examples:
  ptscope trace rank0.1700000000.pt.trace.json.gz
  ptscope trace --view operators --top 30 --group-by-shape trace.json
  ptscope trace --view steps --steps all trace.json.gz
  ptscope trace --view critical trace.json.gz  # what bounds each step
  ptscope trace --json traces/ > report.json
  ptscope trace --out runs/ traces/   # a run folder: report, JSON, charts
  ptscope trace --rank 77 job_traces/ # one rank of a fleet
`

func traceCommand() command {
	c := command{name: "trace", summary: "analyse PyTorch profiler (Kineto) traces: steps, GPU use, operators, kernels", usage: traceUsage}
	c.run = func(e *env, args []string) error {
		var out outputFlags
		var view string
		var top int
		var opt perf.Options
		fs := newFlagSet(e, c)
		addInputFlags(e, fs)
		out.folder = "report.txt, report.json, README.md, charts"
		out.register(fs)
		out.registerSteps(fs)
		out.registerHTML(fs)
		fs.StringVar(&view, "view", "overview", "text view: overview|operators|kernels|steps|idle|comm|memory|critical|sequences|modules|streams")
		fs.IntVar(&top, "top", 10, "rows of the operator, kernel and collective tables in text (--json holds every row)")
		fs.BoolVar(&opt.GroupByShape, "group-by-shape", false, "one operator row per (name, input shapes); needs record_shapes=True")
		fs.BoolVar(&opt.Annotations, "annotations", false, "include user annotations (record_function, ProfilerStep*) in the operator table")
		fs.BoolVar(&opt.DropLastStep, "drop-last-step", false, "leave out the last step (HTA's default; it may be cut short)")
		fs.StringVar(&opt.SequenceOp, "kernel-sequences-op", "", "list the kernel sequences of the shallowest operators whose names contain this (HTA's operator_name); default: the innermost operators or modules launching 3 or more")
		var ff fleetFlags
		ff.register(fs)
		paths, err := parseInterspersed(fs, args)
		if err != nil {
			return err
		}
		if len(paths) == 0 {
			return usagef("trace: no input (run 'ptscope help trace')")
		}
		v, err := tracereport.ParseView(view)
		if err != nil {
			return usagef("trace: --view: %v", err)
		}
		if top <= 0 {
			return usagef("trace: --top must be at least 1, not %d", top)
		}
		t, err := out.text(e.stdout)
		if err != nil {
			return err
		}
		t.Top = top
		// traces are read into compact columns: a tighter GC keeps the peak
		// RSS near the live size (docs/trace.md, Performance)
		if os.Getenv("GOGC") == "" {
			defer debug.SetGCPercent(debug.SetGCPercent(50))
		}
		done, paths, err := ff.trace(e, paths, opt, &out, t)
		if done || err != nil {
			return err
		}
		prog := term.StartProgress(e.stderr, "trace: reading")
		set, err := load.Traces(e.ctx, paths, load.TraceOptions{Analysis: opt, Source: e.source(), KeepModels: out.html != "", Ranks: ff.ranks(), Progress: func(p string, i, n int) {
			label := "trace: reading " + filepath.Base(p)
			if n > 1 {
				label += fmt.Sprintf(" (%d of %d)", i+1, n)
			}
			prog.SetLabel(label)
		}, Notify: func(msg string) {
			prog.Stop()
			fmt.Fprintf(e.stderr, "ptscope: %s\n", input.Escape(msg))
		}})
		prog.Stop()
		if err != nil {
			return err
		}
		for _, r := range set.Report.Ranks {
			for _, w := range r.Warnings {
				fmt.Fprintf(e.stderr, "ptscope: warning: %s: %s\n", input.Name(r.Path), input.Escape(w))
			}
		}
		for _, w := range set.Report.Warnings {
			fmt.Fprintf(e.stderr, "ptscope: warning: %s\n", input.Escape(w))
		}
		out.writeHTML = func(w io.Writer) error { return htmlTraces(w, set) }
		doc := tracereport.New(set.Report, v)
		if out.name == "" && len(paths) > 0 {
			doc.Name = baseName(paths[0])
		}
		return e.emit(doc, &out, t)
	}
	return c
}

// loadTraceReport reads and analyses Kineto traces (files, folders or
// bundles, one trace per rank). `ptscope check` calls it for its trace
// thresholds.
func loadTraceReport(e *env, paths []string, opt perf.Options) (*perf.Report, error) {
	set, err := load.Traces(e.ctx, paths, load.TraceOptions{Analysis: opt, Source: e.source()})
	if err != nil {
		return nil, err
	}
	return set.Report, nil
}
