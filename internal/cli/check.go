package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/ptscope/ptscope/internal/check"
	"github.com/ptscope/ptscope/internal/units"
)

const checkUsage = `Usage: ptscope check [flags] FILE|DIR...

Check snapshots and profiler traces against thresholds, for CI. Exit
status 0 when every threshold holds, 1 when one is exceeded (each failure is
printed), 2 when an input cannot be read.

Memory thresholds apply to snapshots (and bundles); trace thresholds to Kineto
traces (and bundles). Ratios are given as 0..1 or as percentages. More
than 8 ranks are checked as a fleet: each threshold is applied to every
rank and one line per exceeded threshold names the ranks (docs/fleet.md).

Examples:
  ptscope check --max-peak 70GiB snapshot.pickle
  ptscope check --max-peak 20GiB --min-efficiency 0.9 --no-leak run_bundle/
  ptscope check --min-gpu-util 80% --max-dataloader 10% rank0.pt.trace.json.gz
  ptscope check --baseline base.pickle --max-peak-increase 5% new.pickle
  ptscope check --baseline base_bundle/ --max-step-time-increase 10% new_bundle/
  ptscope check --max-peak 70GiB --no-oom job_snapshots/  # each rank of a fleet
`

func checkCommand() command {
	c := command{name: "check", summary: "fail (exit 1) when a snapshot or trace exceeds thresholds, for CI", usage: checkUsage}
	c.run = func(e *env, args []string) (err error) {
		var mf memoryFlags
		fs := newFlagSet(e, c)
		addInputFlags(e, fs)
		mf.register(fs)
		var mc memoryChecks
		mc.register(fs)
		var tc traceChecks
		tc.register(fs)
		var bc baselineChecks
		bc.register(fs)
		var ff fleetFlags
		ff.register(fs)
		jsonOut := fs.Bool("json", false, "write the thresholds applied, each input's value and the verdict as JSON on stdout instead of text (exit status as without)")
		paths, err := parseInterspersed(fs, args)
		if err != nil {
			return err
		}
		if len(paths) == 0 {
			return usagef("check: no input")
		}
		if *jsonOut {
			var finish func(*error)
			e, finish = checkJSON(e)
			defer finish(&err)
		}
		l, err := mc.limits()
		if err != nil {
			return err
		}
		if err := tc.parse(); err != nil {
			return err
		}
		if err := bc.parse(); err != nil {
			return err
		}
		if !mc.any(l) && !tc.any() && !bc.any() {
			return usagef("check: give at least one threshold (--max-peak, --max-reserved, --min-efficiency, --no-leak, --no-oom, --min-gpu-util, --max-dataloader, --baseline with --max-peak-increase or --max-step-time-increase)")
		}
		l.MinGPUUtil, l.MaxDataLoader = tc.minUtil, tc.maxDL
		if !bc.any() {
			if done, err := ff.check(e, paths, &mf, l); done {
				return err
			}
		}
		return runChecks(e, paths, &mf, l, mc.any(l), &tc, &bc)
	}
	return c
}

// memoryChecks are check's memory thresholds as given.
type memoryChecks struct {
	maxPeak, maxReserved, minEff *string
	noLeak, noOOM                *bool
}

func (mc *memoryChecks) register(fs *flag.FlagSet) {
	mc.maxPeak = fs.String("max-peak", "", "highest allowed peak allocated memory, e.g. 70GiB")
	mc.maxReserved = fs.String("max-reserved", "", "highest allowed peak reserved memory")
	mc.minEff = fs.String("min-efficiency", "", "lowest allowed allocated/reserved at the peak, 0..1 or a percentage")
	mc.noLeak = fs.Bool("no-leak", false, "fail when the step pattern is a leak")
	mc.noOOM = fs.Bool("no-oom", false, "fail when the run ran out of memory (an OOM in the trace, or one ptscope run recorded)")
}

// limits are the memory thresholds (-1: unset); bad values are bad usage.
func (mc *memoryChecks) limits() (check.Limits, error) {
	l := check.Limits{Peak: -1, Reserved: -1, NoLeak: *mc.noLeak, NoOOM: *mc.noOOM}
	var err error
	if *mc.maxPeak != "" {
		if l.Peak, err = units.ParseBytes(*mc.maxPeak); err != nil {
			return l, usagef("--max-peak: %v", err)
		}
	}
	if *mc.maxReserved != "" {
		if l.Reserved, err = units.ParseBytes(*mc.maxReserved); err != nil {
			return l, usagef("--max-reserved: %v", err)
		}
	}
	l.Efficiency, err = parseRatio("--min-efficiency", *mc.minEff)
	return l, err
}

// any says whether l has a memory threshold.
func (mc *memoryChecks) any(l check.Limits) bool {
	return l.Peak >= 0 || l.Reserved >= 0 || l.Efficiency >= 0 || l.NoLeak || l.NoOOM
}

// checkJSON makes check --json's environment: the text lines go nowhere,
// the records make the document, which finish writes when the inputs were
// read (passed or not) and which sets *err if writing it fails.
func checkJSON(e *env) (*env, func(err *error)) {
	stdout, log := e.stdout, &check.Log{}
	ee := *e
	ee.stdout, ee.checks = io.Discard, log
	return &ee, func(err *error) {
		var te *thresholdError
		if *err == nil || errors.As(*err, &te) {
			var fails []string
			if te != nil {
				fails = te.failures
			}
			if werr := log.Write(stdout, fails); werr != nil && *err == nil {
				*err = werr
			}
		}
	}
}

// runChecks applies the baseline, trace and memory thresholds to the
// inputs; a failed threshold is a *thresholdError.
func runChecks(e *env, paths []string, mf *memoryFlags, l check.Limits, memChecks bool, tc *traceChecks, bc *baselineChecks) error {
	var fails []string
	if bc.any() {
		bf, err := bc.check(e, paths)
		if err != nil {
			return err
		}
		fails = append(fails, bf...)
	}
	if tc.any() {
		tf, err := tc.check(e, paths)
		if err != nil {
			return err
		}
		fails = append(fails, tf...)
	}
	if memChecks {
		o, err := mf.options()
		if err != nil {
			return err
		}
		tuneGC()
		set, err := loadSnapshots(e, paths, o)
		if err != nil {
			return err
		}
		fails = append(fails, check.Memory(e.stdout, set.Report, l, e.checks)...)
	}
	if len(fails) > 0 {
		return &thresholdError{fails}
	}
	fmt.Fprintln(e.stdout, "check passed")
	return nil
}

// parseRatio reads "0.9", "90%" or "" (unset: -1): check.ParseRatio,
// whose error is bad usage.
func parseRatio(flagName, v string) (float64, error) {
	x, err := check.ParseRatio(flagName, v)
	if err != nil {
		return 0, usagef("%v", err)
	}
	return x, nil
}
