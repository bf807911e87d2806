package cli

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/ptscope/ptscope/internal/memory"
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
		maxPeak := fs.String("max-peak", "", "highest allowed peak allocated memory, e.g. 70GiB")
		maxReserved := fs.String("max-reserved", "", "highest allowed peak reserved memory")
		minEff := fs.String("min-efficiency", "", "lowest allowed allocated/reserved at the peak, 0..1 or a percentage")
		noLeak := fs.Bool("no-leak", false, "fail when the step pattern is a leak")
		noOOM := fs.Bool("no-oom", false, "fail when the run ran out of memory (an OOM in the trace, or one ptscope run recorded)")
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
			// the text lines go nowhere; the records make the document,
			// written when the inputs were read (passed or not)
			stdout, log := e.stdout, &checkLog{}
			ee := *e
			ee.stdout, ee.checks = io.Discard, log
			e = &ee
			defer func() {
				var te *thresholdError
				if err == nil || errors.As(err, &te) {
					var fails []string
					if te != nil {
						fails = te.failures
					}
					if werr := log.write(stdout, fails); werr != nil && err == nil {
						err = werr
					}
				}
			}()
		}
		var peak, reserved int64 = -1, -1
		if *maxPeak != "" {
			if peak, err = units.ParseBytes(*maxPeak); err != nil {
				return usagef("--max-peak: %v", err)
			}
		}
		if *maxReserved != "" {
			if reserved, err = units.ParseBytes(*maxReserved); err != nil {
				return usagef("--max-reserved: %v", err)
			}
		}
		eff, err := parseRatio("--min-efficiency", *minEff)
		if err != nil {
			return err
		}
		if err := tc.parse(); err != nil {
			return err
		}
		if err := bc.parse(); err != nil {
			return err
		}
		memChecks := peak >= 0 || reserved >= 0 || eff >= 0 || *noLeak || *noOOM
		if !memChecks && !tc.any() && !bc.any() {
			return usagef("check: give at least one threshold (--max-peak, --max-reserved, --min-efficiency, --no-leak, --no-oom, --min-gpu-util, --max-dataloader, --baseline with --max-peak-increase or --max-step-time-increase)")
		}
		if !bc.any() {
			l := fleetLimits{peak: peak, reserved: reserved, eff: eff, noLeak: *noLeak, noOOM: *noOOM, trace: &tc}
			if done, err := ff.check(e, paths, &mf, l); done {
				return err
			}
		}
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
		if !memChecks {
			if len(fails) > 0 {
				return &thresholdError{fails}
			}
			fmt.Fprintln(e.stdout, "check passed")
			return nil
		}
		o, err := mf.options()
		if err != nil {
			return err
		}
		tuneGC()
		set, err := loadSnapshots(e, paths, o)
		if err != nil {
			return err
		}
		for _, in := range set.Report.Inputs {
			if len(in.Devices) == 0 {
				// nothing silently passes: a bundle of phases alone is
				// checked against torch's counters where they suffice
				fails = append(fails, checkPhasesOnly(e, in, fleetLimits{peak: peak, reserved: reserved, eff: eff, noLeak: *noLeak, noOOM: *noOOM})...)
				continue
			}
			for _, d := range in.Devices {
				where := fmt.Sprintf("%s device %d", in.Path, d.Device)
				rank := -1
				if in.Bundle != nil {
					rank = in.Bundle.Rank
				}
				rec := func(metric string, v *float64, limit float64, ok bool) {
					e.checks.add(in.Path, d.Device, rank, metric, v, limit, ok)
				}
				top := in.RunPeakAllocatedBytes(d)
				if peak >= 0 {
					ok := top <= peak
					rec("peak_allocated_bytes", num(top), float64(peak), ok)
					if !ok {
						fails = append(fails, fmt.Sprintf("%s: peak allocated %s > %s", where, units.Bytes(top), units.Bytes(peak)))
					}
				}
				if reserved >= 0 {
					ok := d.Peak.ReservedBytes <= reserved
					rec("peak_reserved_bytes", num(d.Peak.ReservedBytes), float64(reserved), ok)
					if !ok {
						fails = append(fails, fmt.Sprintf("%s: peak reserved %s > %s", where, units.Bytes(d.Peak.ReservedBytes), units.Bytes(reserved)))
					}
				}
				if eff >= 0 {
					ok := d.Fragmentation.EfficiencyAtPeak >= eff
					rec("efficiency_at_peak_ratio", num(d.Fragmentation.EfficiencyAtPeak), eff, ok)
					if !ok {
						fails = append(fails, fmt.Sprintf("%s: efficiency at the peak %s < %s", where, units.Percent(d.Fragmentation.EfficiencyAtPeak), units.Percent(eff)))
					}
				}
				if *noLeak {
					var leak int64
					if d.Pattern == memory.PatternLeak && d.Leak != nil {
						leak = d.Leak.PerStepBytes
						fails = append(fails, fmt.Sprintf("%s: memory leaks %s per step", where, units.Bytes(d.Leak.PerStepBytes)))
					}
					rec("leak_per_step_bytes", num(leak), 0, leak == 0)
				}
				if *noOOM {
					n := d.OOMCount()
					rec("oom_count", num(n), 0, n == 0)
					if n > 0 {
						fails = append(fails, fmt.Sprintf("%s: %d out-of-memory events", where, n))
					}
				}
				fmt.Fprintf(e.stdout, "%s: peak allocated %s, reserved %s, efficiency %s, pattern %s\n", where,
					units.Bytes(top), units.Bytes(d.Peak.ReservedBytes), units.Percent(d.Fragmentation.EfficiencyAtPeak), d.Pattern)
			}
		}
		if len(fails) > 0 {
			return &thresholdError{fails}
		}
		fmt.Fprintln(e.stdout, "check passed")
		return nil
	}
	return c
}

// parseRatio reads "0.9", "90%" or "" (unset: -1).
func parseRatio(flagName, v string) (float64, error) {
	if v == "" {
		return -1, nil
	}
	t := strings.TrimSuffix(strings.TrimSpace(v), "%")
	x, err := strconv.ParseFloat(t, 64)
	if err != nil || x < 0 {
		return 0, usagef("%s: %q is not a ratio (use 0..1 or a percentage)", flagName, v)
	}
	if strings.HasSuffix(strings.TrimSpace(v), "%") || x > 1 {
		x /= 100
	}
	return x, nil
}

// checkPhasesOnly checks an input without a snapshot device: a bundle rank
// recorded without allocator snapshots (ptscope run --memory=false, or
// --no-gpu) has only the counters of its phases (phasesOnly). It returns
// the failures.
func checkPhasesOnly(e *env, in *memory.Input, l fleetLimits) []string {
	rank := -1
	if in.Bundle != nil {
		rank = in.Bundle.Rank
	}
	top, res := memory.PhasePeaks(in.Phases)
	what := "no snapshot device and no phases"
	if len(in.Phases) > 0 {
		what = "phases only, no allocator snapshot"
	}
	var fails []string
	for _, t := range phasesOnly(l, top, res, len(in.Phases) > 0) {
		e.checks.add(in.Path, -1, rank, t.metric, t.value, t.limit, t.ok)
		switch {
		case t.value == nil:
			fails = append(fails, fmt.Sprintf("%s: %s cannot be checked: %s", in.Path, t.flag, what))
		case !t.ok:
			fails = append(fails, fmt.Sprintf("%s: %s %s > %s (from the phases)", in.Path, t.what, units.Bytes(int64(*t.value)), units.Bytes(int64(t.limit))))
		}
	}
	if len(in.Phases) > 0 {
		fmt.Fprintf(e.stdout, "%s: peak allocated %s, reserved %s (from the phases: %s)\n", in.Path, units.Bytes(top), units.Bytes(res), what)
	}
	return fails
}

// phaseCheck is one memory threshold applied to a rank without a snapshot
// device.
type phaseCheck struct {
	metric, flag, what string
	value              *float64 // nil: it cannot be checked without a snapshot
	limit              float64
	ok                 bool
}

// phasesOnly applies the memory thresholds of l to a rank without a
// snapshot device whose phases (when it has any) peaked at allocated and
// reserved bytes, torch's running maxima as they read them (memory.
// PhasePeaks): --max-peak and --max-reserved against those; efficiency,
// leaks and OOMs need a snapshot, so they cannot be checked, and fail,
// as every threshold does on a rank with no phases either. One rank and a
// fleet's ranks are checked by it alike.
func phasesOnly(l fleetLimits, allocated, reserved int64, phases bool) []phaseCheck {
	var out []phaseCheck
	for _, c := range []struct {
		on                 bool
		metric, flag, what string
		v, limit           int64
	}{
		{l.peak >= 0, "peak_allocated_bytes", "--max-peak", "peak allocated", allocated, l.peak},
		{l.reserved >= 0, "peak_reserved_bytes", "--max-reserved", "peak reserved", reserved, l.reserved},
	} {
		switch {
		case !c.on:
		case phases:
			out = append(out, phaseCheck{c.metric, c.flag, c.what, num(c.v), float64(c.limit), c.v <= c.limit})
		default:
			out = append(out, phaseCheck{metric: c.metric, flag: c.flag, what: c.what})
		}
	}
	for _, c := range []struct {
		on                 bool
		metric, flag, what string
	}{
		{l.eff >= 0, "efficiency_at_peak_ratio", "--min-efficiency", "efficiency at the peak"},
		{l.noLeak, "leak_per_step_bytes", "--no-leak", "leak"},
		{l.noOOM, "oom_count", "--no-oom", "out-of-memory events"},
	} {
		if c.on {
			out = append(out, phaseCheck{metric: c.metric, flag: c.flag, what: c.what})
		}
	}
	return out
}
