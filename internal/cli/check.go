package cli

import (
	"fmt"
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
	c.run = func(e *env, args []string) error {
		var mf memoryFlags
		fs := newFlagSet(e, c)
		addInputFlags(e, fs)
		mf.register(fs)
		maxPeak := fs.String("max-peak", "", "highest allowed peak allocated memory, e.g. 70GiB")
		maxReserved := fs.String("max-reserved", "", "highest allowed peak reserved memory")
		minEff := fs.String("min-efficiency", "", "lowest allowed allocated/reserved at the peak, 0..1 or a percentage")
		noLeak := fs.Bool("no-leak", false, "fail when the step pattern is a leak")
		noOOM := fs.Bool("no-oom", false, "fail when the trace holds an out-of-memory event")
		var tc traceChecks
		tc.register(fs)
		var bc baselineChecks
		bc.register(fs)
		var ff fleetFlags
		ff.register(fs)
		paths, err := parseInterspersed(fs, args)
		if err != nil {
			return err
		}
		if len(paths) == 0 {
			return usagef("check: no input")
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
			for _, d := range in.Devices {
				where := fmt.Sprintf("%s device %d", in.Path, d.Device)
				if peak >= 0 && d.Peak.AllocatedBytes > peak {
					fails = append(fails, fmt.Sprintf("%s: peak allocated %s > %s", where, units.Bytes(d.Peak.AllocatedBytes), units.Bytes(peak)))
				}
				if reserved >= 0 && d.Peak.ReservedBytes > reserved {
					fails = append(fails, fmt.Sprintf("%s: peak reserved %s > %s", where, units.Bytes(d.Peak.ReservedBytes), units.Bytes(reserved)))
				}
				if eff >= 0 && d.Fragmentation.EfficiencyAtPeak < eff {
					fails = append(fails, fmt.Sprintf("%s: efficiency at the peak %s < %s", where, units.Percent(d.Fragmentation.EfficiencyAtPeak), units.Percent(eff)))
				}
				if *noLeak && d.Pattern == memory.PatternLeak && d.Leak != nil {
					fails = append(fails, fmt.Sprintf("%s: memory leaks %s per step", where, units.Bytes(d.Leak.PerStepBytes)))
				}
				if *noOOM && len(d.OOMs) > 0 {
					fails = append(fails, fmt.Sprintf("%s: %d out-of-memory events", where, len(d.OOMs)))
				}
				fmt.Fprintf(e.stdout, "%s: peak allocated %s, reserved %s, efficiency %s, pattern %s\n", where,
					units.Bytes(d.Peak.AllocatedBytes), units.Bytes(d.Peak.ReservedBytes), units.Percent(d.Fragmentation.EfficiencyAtPeak), d.Pattern)
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
