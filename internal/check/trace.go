package check

import (
	"fmt"
	"io"

	"github.com/ptscope/ptscope/internal/perf"
	"github.com/ptscope/ptscope/internal/units"
)

// Trace applies the trace thresholds of l to every rank of a trace report,
// writing one line per rank to w; it returns the failures.
func Trace(w io.Writer, rep *perf.Report, l Limits, log *Log) []string {
	var fails []string
	for _, r := range rep.Ranks {
		where := fmt.Sprintf("%s rank %d", r.Path, r.Rank)
		dl := r.DataLoaderRatio
		fmt.Fprintf(w, "%s: GPU utilization %s, DataLoader %s of the step (%s of the host's step time)\n", where,
			units.Percent(r.GPUUtilizationRatio), units.Percent(dl), units.Percent(r.HostDataLoaderRatio))
		if l.MinGPUUtil >= 0 {
			ok := r.GPUUtilizationRatio >= l.MinGPUUtil
			log.add(r.Path, -1, r.Rank, "gpu_utilization_ratio", num(r.GPUUtilizationRatio), l.MinGPUUtil, ok)
			if !ok {
				fails = append(fails, fmt.Sprintf("%s: GPU utilization %s < %s", where, units.Percent(r.GPUUtilizationRatio), units.Percent(l.MinGPUUtil)))
			}
		}
		if l.MaxDataLoader >= 0 {
			ok := dl <= l.MaxDataLoader
			log.add(r.Path, -1, r.Rank, "dataloader_ratio", num(dl), l.MaxDataLoader, ok)
			if !ok {
				fails = append(fails, fmt.Sprintf("%s: DataLoader takes %s of the step > %s", where, units.Percent(dl), units.Percent(l.MaxDataLoader)))
			}
		}
	}
	return fails
}
