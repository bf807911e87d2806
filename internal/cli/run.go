package cli

import (
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/ptscope/ptscope/internal/capture"
	"github.com/ptscope/ptscope/internal/units"
)

const runUsage = `Usage: ptscope run [flags] [--] CMD [ARGS...]

Runs CMD (python script.py, python -m pkg, torchrun ..., or any launcher that
starts Python) unchanged, with ptscope's Python companion on PYTHONPATH, and
records what happens in the GPU memory of every process that uses CUDA
through PyTorch into a bundle OUT/YYYYMMDD_HHMMSS_<name>/ (OUT/latest points
at it; layout in docs/bundle.md):

  manifest.json          device, versions, world size, command, times, files
  rankN/process.json     per process facts and peaks
  rankN/snapshot_*.pickle  allocator snapshots (end, step:N, SIGUSR1, OOM)
  rankN/trace_stepN.pt.trace.json.gz  profiler traces (--trace)
  rankN/phases.jsonl     forward/backward/optimizer per step, memory before/after
  rankN/live.jsonl       samples every --interval: allocated, reserved, peak,
                         device used (what nvidia-smi sees), host RSS

CMD's exit code, stdout, stderr and signals pass through unchanged. Send
SIGUSR1 to ptscope to take a snapshot in every captured rank. Without torch or
CUDA the command still runs and ptscope prints one warning.

Traces follow torch.profiler.schedule, one step per optimizer step (or per
forward when there is no optimizer), e.g. wait=1,warmup=2,active=3,repeat=2:

  step:   1    2    3    4    5    6  | 7    8    9    10   11   12
          wait warm warm ACT  ACT  ACT| wait warm warm ACT  ACT  ACT
                                  ^trace_step6         ^trace_step12

Examples:
  ptscope run -- python train.py --epochs 1
  ptscope run --trace --schedule wait=1,warmup=2,active=3,repeat=2 -- python train.py
  ptscope run --snapshot-at end,step:20 --stacks all -- torchrun --nproc-per-node 8 train.py
  ptscope run --ranks 0 --out runs --name baseline -- torchrun --nproc-per-node 2 train.py
  ptscope analyze ptscope-runs/latest
`

func runCommand() command {
	c := command{name: "run", summary: "capture snapshots, traces, phases and live memory from a PyTorch command", usage: runUsage}
	c.run = func(e *env, args []string) error { return runCapture(e, c, args, capture.ExitLike) }
	return c
}

// runCapture parses flags, runs the command and, when the command failed or
// was killed, ends ptscope the same way through exit.
func runCapture(e *env, c command, args []string, exit func(*capture.Result)) error {
	o := capture.DefaultOptions()
	fs := newFlagSet(e, c)
	fs.StringVar(&o.OutDir, "out", o.OutDir, "folder for bundles (OUT/<timestamp>_<name>, OUT/latest)")
	fs.StringVar(&o.Name, "name", "", "bundle name (default: the script or module name)")
	ranks := fs.String("ranks", "all", "ranks to capture: all, or a list such as 0 or 0,2-3 (from RANK, else LOCAL_RANK)")
	fs.BoolVar(&o.Memory, "memory", o.Memory, "record allocator history (needed for snapshots)")
	fs.StringVar(&o.Stacks, "stacks", o.Stacks, "stack traces of allocations: python, all (C++ too) or none")
	fs.IntVar(&o.MaxEntries, "max-entries", o.MaxEntries, "allocator history entries kept (ring buffer)")
	snapAt := fs.String("snapshot-at", "end", "when to take snapshots besides OOM and SIGUSR1: end, step:N (after the N-th step), none; comma-separated")
	fs.BoolVar(&o.OOM, "oom", o.OOM, "take a snapshot when CUDA runs out of memory, before the exception propagates")
	maxSnap := fs.String("max-snapshot-size", "4GiB", "per-rank disk budget for snapshots; past it ptscope warns and writes no more (0 = none)")
	fs.BoolVar(&o.Trace, "trace", false, "record torch.profiler traces on a schedule")
	sched := fs.String("schedule", capture.DefaultSchedule().String(), "profiler schedule: wait=,warmup=,active=,repeat=[,skip_first=]")
	fs.BoolVar(&o.ProfileMemory, "profile-memory", o.ProfileMemory, "profiler: record tensor allocations")
	fs.BoolVar(&o.RecordShapes, "record-shapes", o.RecordShapes, "profiler: record operator input shapes")
	fs.BoolVar(&o.WithStack, "with-stack", o.WithStack, "profiler: record Python stacks (larger traces)")
	fs.BoolVar(&o.Phases, "phases", o.Phases, "track forward/backward/optimizer phases per step")
	fs.BoolVar(&o.Modules, "modules", o.Modules, "attribute allocations to module paths (where PyTorch supports allocation metadata)")
	interval := fs.String("interval", "1s", "live sample period")
	live := fs.Bool("live", true, "show a live status line when stderr is a terminal")
	fs.BoolVar(&o.Quiet, "quiet", false, "no live status and no summary (warnings still print)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return &usageError{err.Error()}
	}
	argv := fs.Args()
	if len(argv) > 0 && argv[0] == "--" {
		argv = argv[1:]
	}
	if len(argv) == 0 {
		return usagef("run: no command given (ptscope run [flags] -- CMD ARGS...)")
	}
	var err error
	if o.Ranks, err = capture.ParseRanks(*ranks); err != nil {
		return usagef("run: --%v", err)
	}
	if o.SnapshotAt, err = capture.ParseSnapshotAt(*snapAt); err != nil {
		return usagef("run: --%v", err)
	}
	if o.Schedule, err = capture.ParseSchedule(*sched); err != nil {
		return usagef("run: --%v", err)
	}
	if o.MaxSnapshotBytes, err = units.ParseBytes(*maxSnap); err != nil {
		return usagef("run: --max-snapshot-size %q: %v", *maxSnap, err)
	}
	d, err := units.ParseDuration(*interval)
	if err != nil {
		return usagef("run: --interval %q: %v", *interval, err)
	}
	o.Interval = d
	o.Stdin, o.Stdout, o.Stderr = e.stdin, e.stdout, e.stderr
	o.Status = e.stderr
	o.StatusTTY = *live && isTerminal(e.stderr)
	o.Version = Version
	res, err := capture.Run(e.ctx, o, argv)
	if err != nil {
		if errors.Is(err, capture.ErrNotFound) {
			fmt.Fprintf(e.stderr, "ptscope: %v\n", err)
			exit(&capture.Result{ExitCode: 127})
			return nil
		}
		return usagef("run: %v", err)
	}
	if res.ExitCode != 0 || res.Signal != 0 {
		exit(res)
	}
	return nil
}

func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
