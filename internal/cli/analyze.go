package cli

import (
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"

	"github.com/ptscope/ptscope/internal/load"
	"github.com/ptscope/ptscope/internal/memory"
	"github.com/ptscope/ptscope/internal/report"
	"github.com/ptscope/ptscope/internal/report/memreport"
	"github.com/ptscope/ptscope/internal/term"
	"github.com/ptscope/ptscope/internal/units"
	"github.com/ptscope/ptscope/internal/whatif"
)

const analyzeUsage = `Usage: ptscope analyze [flags] FILE|DIR...

Analyse CUDA caching-allocator snapshots (torch.cuda.memory._dump_snapshot
pickles, JSON snapshots, gzip/xz/zstd compressed, or ptscope run bundles):
the peak and what was alive then (by category, stack, source line, module
and keyword group), steps and the leak/spike pattern, fragmentation,
out-of-memory explanations and findings with recommendations.

A folder is searched recursively for snapshots (by content, not by name).
Several inputs (ranks, iterations, runs) also print a comparison table.
More than 8 ranks (bundles' rankN folders, rankN file or folder names) give
a fleet summary instead: the distribution of peaks across ranks, outlier
ranks, imbalance, ranks that ran out of memory or leak (docs/fleet.md);
--rank N opens one rank's full report.

Examples:
  ptscope analyze snapshot.pickle
  ptscope analyze --top 20 --stacks full rank0.pickle
  ptscope analyze --json snapshot.pickle > report.json
  ptscope analyze --out runs/ --device-memory 80GiB snapshots/
  ptscope analyze --steps all --rules my_groups.txt snapshot.pickle
  ptscope analyze --print-rules > my_groups.txt
  ptscope analyze job_snapshots/             # 1,000 ranks: one fleet summary
  ptscope analyze --rank 17 job_snapshots/   # rank 17's full report
`

// memoryFlags are the analysis flags analyze, check and demo share.
type memoryFlags struct {
	device       int
	deviceMemory string
	rules        string
}

func (f *memoryFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&f.device, "device", -1, "analyse only this device `ordinal` (-1: every device with data)")
	fs.StringVar(&f.deviceMemory, "device-memory", "", "device capacity for capacity findings, e.g. 80GiB (bundles know it)")
	fs.StringVar(&f.rules, "rules", "", "keyword-group rules `FILE` (\"group: regexp\" lines); see --print-rules")
}

// options turns the flags into load options.
func (f *memoryFlags) options() (load.SnapshotOptions, error) {
	var o load.SnapshotOptions
	if f.device >= 0 {
		o.Devices = []int{f.device}
	}
	if f.deviceMemory != "" {
		n, err := units.ParseBytes(f.deviceMemory)
		if err != nil {
			return o, usagef("--device-memory: %v", err)
		}
		o.Memory.DeviceMemory = n
	}
	if f.rules != "" {
		fh, err := os.Open(f.rules)
		if err != nil {
			return o, err
		}
		defer fh.Close()
		rules, err := memory.ParseRules(fh)
		if err != nil {
			return o, fmt.Errorf("%s: %w", f.rules, err)
		}
		o.Memory.Rules = rules
	}
	// The decoder leaves garbage about as large as the snapshot; collect it
	// before the analysis piles up on top (tuneGC raised GOGC).
	o.AfterRead = runtime.GC
	return o, nil
}

// reportFlags are the text flags of the memory report.
type reportFlags struct {
	top    int
	stacks string
}

func (f *reportFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&f.top, "top", 10, "rows of ranked tables (largest allocations, sources, modules, ...)")
	fs.StringVar(&f.stacks, "stacks", "short", "stack display: short (a few frames and always the user's own) or full (every frame)")
}

// apply sets the text options from the flags.
func (f *reportFlags) apply(t *report.TextOptions) error {
	if f.top <= 0 {
		return usagef("--top must be at least 1, not %d", f.top)
	}
	t.Top = f.top
	switch f.stacks {
	case "short":
		t.Stacks = report.StacksShort
	case "full":
		t.Stacks = report.StacksFull
	default:
		return usagef("--stacks must be short or full, not %q", f.stacks)
	}
	return nil
}

func analyzeCommand() command {
	c := command{name: "analyze", summary: "analyse CUDA memory snapshots: peak, who, steps, leaks, fragmentation, OOMs", usage: analyzeUsage}
	c.run = func(e *env, args []string) error {
		var mf memoryFlags
		var rf reportFlags
		var out outputFlags
		fs := newFlagSet(e, c)
		addInputFlags(e, fs)
		mf.register(fs)
		rf.register(fs)
		out.folder = "report.txt, report.json, README.md, charts"
		out.register(fs)
		out.registerSteps(fs)
		out.registerHTML(fs)
		var ff fleetFlags
		ff.register(fs)
		printRules := fs.Bool("print-rules", false, "print the built-in keyword-group rules and exit")
		paths, err := parseInterspersed(fs, args)
		if err != nil {
			return err
		}
		if *printRules {
			_, err := io.WriteString(e.stdout, memory.DefaultRulesText())
			return err
		}
		if len(paths) == 0 {
			return usagef("analyze: no input (give snapshot files or folders; see ptscope help analyze)")
		}
		t, err := out.text(e.stdout)
		if err != nil {
			return err
		}
		if err := rf.apply(&t); err != nil {
			return err
		}
		o, err := mf.options()
		if err != nil {
			return err
		}
		done, paths, err := ff.analyze(e, paths, &o, &out, t)
		if done || err != nil {
			return err
		}
		tuneGC()
		set, loadErr := loadSnapshots(e, paths, o)
		if set == nil {
			return loadErr
		}
		adviseBundles(set)
		out.writeHTML = func(w io.Writer) error { return htmlSnapshots(w, set) }
		if err := e.emit(memreport.New(set.Report), &out, t); err != nil {
			return err
		}
		return loadErr
	}
	return c
}

// loadSnapshots loads and analyses the snapshots under paths with a
// progress line on a terminal's stderr.
func loadSnapshots(e *env, paths []string, o load.SnapshotOptions) (*load.SnapshotSet, error) {
	p := term.StartProgress(e.stderr, "analyze")
	defer p.Stop()
	o.Progress = func(label string) { p.SetLabel("analyze: " + label) }
	o.Notify = func(msg string) {
		p.Stop()
		fmt.Fprintf(e.stderr, "ptscope: %s\n", msg)
	}
	o.Source = e.source()
	return load.Snapshots(e.ctx, paths, o)
}

// adviseBundles adds, to each bundle rank that ran out of memory or came
// near its device's limit, the peak its job needs and the cheapest changes
// that fit (internal/whatif), predicted from the run's own measurements:
// from the bundle load already read, once per rank however many of its
// snapshots are inputs.
func adviseBundles(set *load.SnapshotSet) {
	type rankKey struct {
		dir  string
		rank int
	}
	advice := map[rankKey]*whatif.Advice{}
	for k, in := range set.Report.Inputs {
		if k >= len(set.Inputs) || in.Error != "" {
			continue
		}
		si := set.Inputs[k]
		if si.Bundle == nil || si.Rank == nil {
			continue
		}
		key := rankKey{si.Bundle.Dir, si.Rank.Rank}
		a, ok := advice[key]
		if !ok {
			run := whatif.FromBundle(si.Bundle, si.Rank)
			if _, want := whatif.WantsAdvice(run); want {
				a = whatif.Advise(run, whatif.Given{})
			}
			advice[key] = a
		}
		if a != nil {
			in.Advice = a
		}
	}
}
