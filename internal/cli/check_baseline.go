package cli

import (
	"flag"
	"fmt"

	"github.com/ptscope/ptscope/internal/units"
)

// baselineChecks are check's thresholds on the change against a baseline:
// `ptscope check --baseline A B --max-peak-increase 5%` compares B with A
// as `ptscope diff A B` does. Ratios are -1 when unset.
type baselineChecks struct {
	baseline                string
	peakFlag, stepFlag      string
	maxPeakInc, maxStepTime float64
}

func (c *baselineChecks) register(fs *flag.FlagSet) {
	fs.StringVar(&c.baseline, "baseline", "", "compare the input with this baseline `A` (snapshot, trace, bundle or folder of ranks), as ptscope diff A B does")
	fs.StringVar(&c.peakFlag, "max-peak-increase", "", "with --baseline: highest allowed growth of peak allocated memory (e.g. 5%)")
	fs.StringVar(&c.stepFlag, "max-step-time-increase", "", "with --baseline: highest allowed growth of the average step time of a trace (e.g. 10%)")
}

// parse reads the flags' values; call it after the flag set is parsed.
func (c *baselineChecks) parse() error {
	var err error
	if c.maxPeakInc, err = parseRatio("--max-peak-increase", c.peakFlag); err != nil {
		return err
	}
	if c.maxStepTime, err = parseRatio("--max-step-time-increase", c.stepFlag); err != nil {
		return err
	}
	limits := c.maxPeakInc >= 0 || c.maxStepTime >= 0
	switch {
	case c.baseline != "" && !limits:
		return usagef("check: --baseline needs --max-peak-increase or --max-step-time-increase")
	case c.baseline == "" && limits:
		return usagef("check: --max-peak-increase and --max-step-time-increase need --baseline A")
	}
	return nil
}

// any reports whether a baseline threshold was given.
func (c *baselineChecks) any() bool { return c.baseline != "" }

// check compares the input with the baseline, printing one line per
// compared pair; it returns the failures.
func (c *baselineChecks) check(e *env, paths []string) ([]string, error) {
	if len(paths) != 1 {
		return nil, usagef("check: --baseline compares one input with the baseline, not %d", len(paths))
	}
	rep, err := loadDiff(e, c.baseline, paths[0])
	if err != nil {
		return nil, err
	}
	if c.maxPeakInc >= 0 && len(rep.Memory) == 0 {
		return nil, usagef("check: --max-peak-increase needs snapshots on both sides (%s and %s)", c.baseline, paths[0])
	}
	if c.maxStepTime >= 0 && len(rep.Trace) == 0 {
		return nil, usagef("check: --max-step-time-increase needs profiler traces on both sides (%s and %s)", c.baseline, paths[0])
	}
	var fails []string
	if c.maxPeakInc >= 0 {
		for _, d := range rep.Memory {
			p := d.PeakAllocated
			fmt.Fprintf(e.stdout, "%s: peak allocated %s -> %s (%s)\n", d.Key, units.Bytes(p.A), units.Bytes(p.B), changeText(p.Change))
			e.checks.add(d.Key, -1, -1, "peak_allocated_change_ratio", p.Change, c.maxPeakInc, !exceeds(p.Change, p.A, p.B, c.maxPeakInc))
			if exceeds(p.Change, p.A, p.B, c.maxPeakInc) {
				fails = append(fails, fmt.Sprintf("%s: peak allocated grew %s (%s -> %s) > %s", d.Key, changeText(p.Change),
					units.Bytes(p.A), units.Bytes(p.B), units.Percent(c.maxPeakInc)))
			}
		}
	}
	if c.maxStepTime >= 0 {
		for _, d := range rep.Trace {
			s := d.AverageStep
			fmt.Fprintf(e.stdout, "%s: average step %s -> %s (%s)\n", d.Key, units.Duration(s.A), units.Duration(s.B), changeText(s.Change))
			e.checks.add(d.Key, -1, -1, "average_step_change_ratio", s.Change, c.maxStepTime, !exceeds(s.Change, s.A, s.B, c.maxStepTime))
			if exceeds(s.Change, s.A, s.B, c.maxStepTime) {
				fails = append(fails, fmt.Sprintf("%s: average step time grew %s (%s -> %s) > %s", d.Key, changeText(s.Change),
					units.Duration(s.A), units.Duration(s.B), units.Percent(c.maxStepTime)))
			}
		}
	}
	for _, u := range rep.Unmatched {
		fmt.Fprintf(e.stdout, "%s only in %s (%s): not compared\n", u.Key, map[string]string{"a": "the baseline", "b": "the input"}[u.Side], u.Path)
	}
	return fails, nil
}

// exceeds reports whether a change from a to b is above limit; growth from
// nothing is unbounded.
func exceeds(change *float64, a, b int64, limit float64) bool {
	if change == nil {
		return b > a
	}
	return *change > limit
}

func changeText(c *float64) string {
	if c == nil {
		return "from nothing"
	}
	return fmt.Sprintf("%+.1f%%", *c*100)
}
