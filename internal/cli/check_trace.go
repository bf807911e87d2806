package cli

import (
	"flag"
	"strings"

	"github.com/ptscope/ptscope/internal/check"
	"github.com/ptscope/ptscope/internal/input"
	"github.com/ptscope/ptscope/internal/perf"
)

// traceChecks are check's thresholds on Kineto traces (and the traces of
// bundles). Ratios are -1 when unset.
type traceChecks struct {
	minUtilFlag, maxDLFlag string
	minUtil, maxDL         float64
}

func (c *traceChecks) register(fs *flag.FlagSet) {
	fs.StringVar(&c.minUtilFlag, "min-gpu-util", "", "lowest allowed GPU utilisation of a profiler trace (0..1 or %)")
	fs.StringVar(&c.maxDLFlag, "max-dataloader", "", "highest allowed DataLoader share of the step in a profiler trace (0..1 or %; the time the step waits for data with nothing else running, as in trace's breakdown)")
}

// parse reads the flags' values; call it after the flag set is parsed.
func (c *traceChecks) parse() error {
	var err error
	if c.minUtil, err = parseRatio("--min-gpu-util", c.minUtilFlag); err != nil {
		return err
	}
	c.maxDL, err = parseRatio("--max-dataloader", c.maxDLFlag)
	return err
}

// any reports whether a trace threshold was given.
func (c *traceChecks) any() bool { return c.minUtil >= 0 || c.maxDL >= 0 }

// check applies the trace thresholds to every profiler trace under paths,
// printing one line per rank; it returns the failures.
func (c *traceChecks) check(e *env, paths []string) ([]string, error) {
	files, err := e.source().Find(paths, input.Trace, input.Bundle)
	if err != nil {
		return nil, err
	}
	// a snapshot named on the command line is for the memory thresholds
	var tp, snaps []string
	for _, f := range files {
		if f.Kind == input.Snapshot {
			snaps = append(snaps, f.Path)
			continue
		}
		tp = append(tp, f.Path)
	}
	if len(tp) == 0 && len(snaps) > 0 {
		return nil, usagef("check: --min-gpu-util and --max-dataloader apply to profiler traces; %s is an allocator snapshot (its thresholds: --max-peak, --max-reserved, --min-efficiency, --no-leak, --no-oom)", snaps[0])
	}
	if len(tp) == 0 {
		return nil, usagef("check: --min-gpu-util/--max-dataloader need profiler traces, none found in %s", strings.Join(paths, ", "))
	}
	rep, err := loadTraceReport(e, tp, perf.Options{})
	if err != nil {
		return nil, err
	}
	return check.Trace(e.stdout, rep, check.Limits{MinGPUUtil: c.minUtil, MaxDataLoader: c.maxDL}, e.checks), nil
}
