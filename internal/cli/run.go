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
  rankN/phases.jsonl     each step's phases, memory before and after each
  rankN/live.jsonl       samples every --interval: allocated, reserved, peak,
                         device used (what nvidia-smi sees), host RSS
  rankN/tensors.jsonl    parameters, gradients, optimizer state and buffers by
                         address and size, at a few moments (to label blocks)

The allocator history (every allocation and free, with a module path and a
Python stack per allocation) costs CPU-bound steps a few percent even without
stacks, so by default (--history windows) it records only in stack windows,
and each window is saved as a snapshot of its own (snapshot_windowK.pickle):
the set-up and the first 3 steps, the step after one that raised the peak or
came near the memory limit, and sparse steady-state steps while they cost
under 1% of the run (--record-steps auto). Every step keeps its phases and
peaks. --record-steps all (or 0-2,50) records every (or those) steps,
--free-stacks stacks of frees too, --history run the whole run without stacks
between the windows (the earlier default).

CMD's stdout, stderr and signals pass through unchanged (a signal sent to the
whole process group or job reaches CMD once), and ptscope exits as a shell
would: CMD's exit code, 128+N when signal N killed it, 126/127 when it cannot
start. If ptscope is killed, so are CMD and the processes it started (Linux).
Send SIGUSR1 to ptscope to take a snapshot in every captured rank. Without
torch or CUDA, or without a writable --out, the command still runs and ptscope
prints one warning.

Traces follow torch.profiler.schedule, one step per optimizer step (without an
optimizer, per call of the step's first root module), e.g.
wait=1,warmup=2,active=3,repeat=2:

  step:   1    2    3    4    5    6  | 7    8    9    10   11   12
          wait warm warm ACT  ACT  ACT| wait warm warm ACT  ACT  ACT
                                  ^trace_step6         ^trace_step12

Simulation (docs/simulate.md): --simulate-world-size N runs the command as
one rank (--simulate-rank, default 0) of an N-rank job on this one GPU:
torch.distributed.init_process_group uses PyTorch's "fake" backend (no torchrun
needed; RANK, WORLD_SIZE, LOCAL_RANK=0 are set), so DDP, FSDP2, DeviceMesh
tensor parallelism, pipeline stages and expert parallelism allocate what that
rank would, while collectives exchange nothing: every rank is taken to be like
the simulated one (all-to-alls give every source this rank's own chunk,
received tensors read zeros; the run lists each faked collective's rule).
--simulate-rank all (or 0,2-3) runs the ranks one after another into one
bundle, a folder per rank (pipeline stages pass their shapes on through it).
--simulate-imbalance F: the hottest expert receives F times the mean tokens.
Not counted: NCCL buffers, communication time, data-dependent imbalance.
--no-gpu (or --fake-tensors) runs the command without a GPU: CUDA tensors
become fake tensors and a tracker counts their memory with the caching
allocator's 512-byte rounding, per phase and per module (not counted: CUDA
context, cuBLAS workspaces, allocator cache); with --simulate-world-size it
simulates one rank of that world. Bundles are marked simulated.

Examples:
  ptscope run -- python train.py --epochs 1
  ptscope run --trace --schedule wait=1,warmup=2,active=3,repeat=2 -- \
      python train.py
  ptscope run --snapshot-at end,step:20 --stacks all -- \
      torchrun --nproc-per-node 8 train.py
  ptscope run --record-steps 0-2,100-101 -- python train.py
  ptscope run --ranks 0 --out runs --name baseline -- \
      torchrun --nproc-per-node 2 train.py
  ptscope run --simulate-world-size 64 -- python train.py --fsdp
  ptscope run --simulate-world-size 8 --simulate-rank 7 -- \
      python train.py --pp 8
  ptscope run --simulate-world-size 4 --simulate-rank all -- \
      python pretrain_gpt.py --tensor-model-parallel-size 2 ...
  ptscope run --simulate-world-size 8 --simulate-imbalance 1.3 -- \
      python train_moe.py --ep 8
  CUDA_VISIBLE_DEVICES= ptscope run --no-gpu --simulate-world-size 8 -- \
      python train.py --fsdp
  CUDA_VISIBLE_DEVICES= ptscope run --no-gpu -- python train.py --steps 2
  ptscope analyze ptscope-runs/latest
`

func runCommand() command {
	c := command{name: "run", summary: "capture snapshots, traces, phases and live memory from a PyTorch command", usage: runUsage, ownSignals: true}
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
	fs.StringVar(&o.History, "history", o.History, "when the allocator history records: windows (only in the stack windows, each saved as a snapshot; cheap) or run (the whole run, stacks in the windows; +2-5% on CPU-bound steps)")
	fs.StringVar(&o.Stacks, "stacks", o.Stacks, "stack traces of allocations: python, all (C++ too) or none")
	recordSteps := fs.String("record-steps", "auto", "steps whose allocations record a stack: auto (set-up and first 3 steps, the step after one that raised the peak or neared capacity, sparse steady-state steps), all, or 0-based steps such as 0-2,50")
	fs.BoolVar(&o.FreeStacks, "free-stacks", false, "record a stack with every free too (the default records them with allocations only)")
	fs.IntVar(&o.MaxEntries, "max-entries", o.MaxEntries, "allocator history entries kept (ring buffer)")
	snapAt := fs.String("snapshot-at", "end", "when to take snapshots besides OOM and SIGUSR1: end, step:N (after the N-th step), none; comma-separated")
	fs.BoolVar(&o.OOM, "oom", o.OOM, "take a snapshot when CUDA runs out of memory, before the exception propagates")
	maxSnap := fs.String("max-snapshot-size", "4GiB", "per-rank disk budget for snapshots; past it ptscope warns and writes no more (0 = none)")
	fs.BoolVar(&o.Trace, "trace", false, "record torch.profiler traces on a schedule")
	sched := fs.String("schedule", capture.DefaultSchedule().String(), "profiler schedule: wait=,warmup=,active=,repeat=[,skip_first=]")
	fs.BoolVar(&o.ProfileMemory, "profile-memory", o.ProfileMemory, "profiler: record tensor allocations (slows profiled steps; the bundle's snapshots hold memory)")
	fs.BoolVar(&o.RecordShapes, "record-shapes", o.RecordShapes, "profiler: record operator input shapes (slows profiled steps)")
	fs.BoolVar(&o.WithStack, "with-stack", o.WithStack, "profiler: record Python stacks (larger traces)")
	fs.BoolVar(&o.Phases, "phases", o.Phases, "track forward/backward/optimizer phases per step")
	fs.BoolVar(&o.Modules, "modules", o.Modules, "attribute allocations to module paths (where PyTorch supports allocation metadata)")
	interval := fs.String("interval", "1s", "live sample period")
	live := fs.Bool("live", true, "show a live status line when stderr is a terminal")
	fs.BoolVar(&o.Quiet, "quiet", false, "no live status and no summary (warnings still print)")
	fs.BoolVar(&o.KeepArgv, "keep-argv", false, "keep the command line in the bundle as it is (default: values that look like secrets, as in --hf-token X, HF_TOKEN=X, sk-..., https://user:pass@host, are masked as ***)")
	fs.IntVar(&o.Simulate.WorldSize, "simulate-world-size", 0, "run the command as one rank of an N-rank job on one GPU (fake process group)")
	simRank := fs.String("simulate-rank", "0", "the rank(s) simulated by --simulate-world-size: a rank, a list such as 0,2-3, or all (one after another, one bundle)")
	fs.Float64Var(&o.Simulate.Imbalance, "simulate-imbalance", 0, "MoE routing imbalance: the hottest expert of the simulated rank receives F times the mean tokens per expert (F >= 1)")
	fs.BoolVar(&o.Simulate.NoGPU, "no-gpu", false, "run without a GPU: fake CUDA tensors, memory counted by a tracker")
	fs.BoolVar(&o.Simulate.NoGPU, "fake-tensors", false, "same as --no-gpu")
	if err := parseFlags(fs, args); err != nil {
		return err
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
	if o.RecordSteps, err = capture.ParseRecordSteps(*recordSteps); err != nil {
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
	if o.Simulate.WorldSize < 0 || (o.Simulate.WorldSize == 0 && flagSet(fs, "simulate-world-size")) {
		return usagef("run: --simulate-world-size must be at least 1")
	}
	if flagSet(fs, "simulate-rank") {
		rs, err := capture.ParseSimulateRanks(*simRank, o.Simulate.WorldSize)
		if err != nil {
			return usagef("run: --%v", err)
		}
		if o.Simulate.Rank = rs[0]; len(rs) > 1 {
			o.Simulate.Ranks = rs
		}
	}
	o.Stdin, o.Stdout, o.Stderr = e.stdin, e.raw(), e.stderr // the training's output, as it is
	o.Status = e.stderr
	o.StatusTTY = *live && isTerminal(e.stderr)
	o.Version = Version
	res, err := capture.Run(e.ctx, o, argv)
	var se *capture.StartError
	if errors.As(err, &se) {
		// as a shell: 127 not found, 126 found but not executable
		fmt.Fprintf(e.stderr, "ptscope: %v\n", se)
		exit(&capture.Result{ExitCode: se.Code})
		return nil
	}
	if err != nil {
		return usagef("run: %v", err)
	}
	if res.ExitCode != 0 || res.Signal != 0 {
		exit(res)
	}
	return nil
}

func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) {
		if f.Name == name {
			set = true
		}
	})
	return set
}

func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
