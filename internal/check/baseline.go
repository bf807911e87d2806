package check

import (
	"fmt"
	"io"

	"github.com/ptscope/ptscope/internal/diff"
	"github.com/ptscope/ptscope/internal/units"
)

// Growth are check's thresholds on the change against a baseline
// (`ptscope check --baseline A B`, compared as `ptscope diff A B` does);
// ratios are -1 when unset.
type Growth struct {
	MaxPeakIncrease     float64 // --max-peak-increase
	MaxStepTimeIncrease float64 // --max-step-time-increase
}

// Baseline applies the growth thresholds to the comparison of input with
// baseline, writing one line per compared pair to w; it returns the
// failures, and an error when a threshold has nothing to compare.
func Baseline(w io.Writer, rep *diff.Report, baseline, input string, g Growth, log *Log) ([]string, error) {
	if g.MaxPeakIncrease >= 0 && len(rep.Memory) == 0 {
		return nil, fmt.Errorf("check: --max-peak-increase needs snapshots on both sides (%s and %s)", baseline, input)
	}
	if g.MaxStepTimeIncrease >= 0 && len(rep.Trace) == 0 {
		return nil, fmt.Errorf("check: --max-step-time-increase needs profiler traces on both sides (%s and %s)", baseline, input)
	}
	var fails []string
	if g.MaxPeakIncrease >= 0 {
		for _, d := range rep.Memory {
			p := d.PeakAllocated
			fmt.Fprintf(w, "%s: peak allocated %s -> %s (%s)\n", d.Key, units.Bytes(p.A), units.Bytes(p.B), changeText(p.Change))
			log.add(d.Key, -1, -1, "peak_allocated_change_ratio", p.Change, g.MaxPeakIncrease, !exceeds(p.Change, p.A, p.B, g.MaxPeakIncrease))
			if exceeds(p.Change, p.A, p.B, g.MaxPeakIncrease) {
				fails = append(fails, fmt.Sprintf("%s: peak allocated grew %s (%s -> %s) > %s", d.Key, changeText(p.Change),
					units.Bytes(p.A), units.Bytes(p.B), units.Percent(g.MaxPeakIncrease)))
			}
		}
	}
	if g.MaxStepTimeIncrease >= 0 {
		for _, d := range rep.Trace {
			s := d.AverageStep
			fmt.Fprintf(w, "%s: average step %s -> %s (%s)\n", d.Key, units.Duration(s.A), units.Duration(s.B), changeText(s.Change))
			log.add(d.Key, -1, -1, "average_step_change_ratio", s.Change, g.MaxStepTimeIncrease, !exceeds(s.Change, s.A, s.B, g.MaxStepTimeIncrease))
			if exceeds(s.Change, s.A, s.B, g.MaxStepTimeIncrease) {
				fails = append(fails, fmt.Sprintf("%s: average step time grew %s (%s -> %s) > %s", d.Key, changeText(s.Change),
					units.Duration(s.A), units.Duration(s.B), units.Percent(g.MaxStepTimeIncrease)))
			}
		}
	}
	for _, u := range rep.Unmatched {
		fmt.Fprintf(w, "%s only in %s (%s): not compared\n", u.Key, map[string]string{"a": "the baseline", "b": "the input"}[u.Side], u.Path)
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
