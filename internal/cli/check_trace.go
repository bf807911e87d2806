package cli

import (
	"flag"
	"fmt"
	"strings"

	"github.com/ptscope/ptscope/internal/input"
	"github.com/ptscope/ptscope/internal/perf"
	"github.com/ptscope/ptscope/internal/units"
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
	var fails []string
	for _, r := range rep.Ranks {
		where := fmt.Sprintf("%s rank %d", r.Path, r.Rank)
		dl := r.DataLoaderRatio
		fmt.Fprintf(e.stdout, "%s: GPU utilization %s, DataLoader %s of the step (%s of the host's step time)\n", where,
			units.Percent(r.GPUUtilizationRatio), units.Percent(dl), units.Percent(r.HostDataLoaderRatio))
		if c.minUtil >= 0 {
			ok := r.GPUUtilizationRatio >= c.minUtil
			e.checks.add(r.Path, -1, r.Rank, "gpu_utilization_ratio", num(r.GPUUtilizationRatio), c.minUtil, ok)
			if !ok {
				fails = append(fails, fmt.Sprintf("%s: GPU utilization %s < %s", where, units.Percent(r.GPUUtilizationRatio), units.Percent(c.minUtil)))
			}
		}
		if c.maxDL >= 0 {
			ok := dl <= c.maxDL
			e.checks.add(r.Path, -1, r.Rank, "dataloader_ratio", num(dl), c.maxDL, ok)
			if !ok {
				fails = append(fails, fmt.Sprintf("%s: DataLoader takes %s of the step > %s", where, units.Percent(dl), units.Percent(c.maxDL)))
			}
		}
	}
	return fails, nil
}
