package cli

import (
	"flag"

	"github.com/ptscope/ptscope/internal/check"
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
	fails, err := check.Baseline(e.stdout, rep, c.baseline, paths[0], check.Growth{MaxPeakIncrease: c.maxPeakInc, MaxStepTimeIncrease: c.maxStepTime}, e.checks)
	if err != nil {
		return nil, usagef("%v", err)
	}
	return fails, nil
}
