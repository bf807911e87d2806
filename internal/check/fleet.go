package check

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/ptscope/ptscope/internal/fleet"
	"github.com/ptscope/ptscope/internal/memory"
	"github.com/ptscope/ptscope/internal/units"
)

// Fleet applies the thresholds of l to every rank of a fleet summary: one
// failure per threshold, naming the worst ranks first, and one when no
// rank of a kind a threshold needs could be read. It writes the fleet's
// one-line summaries (memory, time) to w.
func Fleet(w io.Writer, rep *fleet.Report, l Limits, log *Log) []string {
	fails := fleetFailures(rep, l, log)
	if l.Memory() && rep.Memory != nil {
		p := rep.Memory.PeakAllocated
		fmt.Fprintf(w, "memory: %d ranks, peak allocated %s median, %s max (rank %d), %d OOM, %d leaking\n",
			p.Ranks, units.Bytes(p.MedianBytes), units.Bytes(p.MaxBytes), p.MaxRank, len(rep.Memory.OOMRanks), len(rep.Memory.LeakRanks))
	}
	if l.Trace() && rep.Time != nil {
		u, d := rep.Time.GPUUtilization, rep.Time.DataLoader
		fmt.Fprintf(w, "time: %d ranks, GPU utilization %s median, %s min (rank %d), DataLoader %s median, %s max (rank %d)\n",
			u.Ranks, units.Percent(u.MedianRatio), units.Percent(u.MinRatio), u.MinRank, units.Percent(d.MedianRatio), units.Percent(d.MaxRatio), d.MaxRank)
	}
	if l.Memory() && rep.Memory == nil {
		fails = append(fails, "no snapshot of any rank could be read")
	}
	if l.Trace() && rep.Time == nil {
		fails = append(fails, "no trace of any rank could be read")
	}
	return fails
}

// bad is a rank over a threshold: its value, and that value as the failure
// line says it.
type bad struct {
	rank int
	v    float64
	text string
}

// fleetFailures applies the thresholds to every rank: one failure per
// threshold, naming the worst ranks first.
func fleetFailures(rep *fleet.Report, l Limits, log *Log) []string {
	var fails []string
	add := func(what string, total int, bs []bad, worstFirst func(a, b float64) bool) {
		if len(bs) == 0 {
			return
		}
		sort.SliceStable(bs, func(i, j int) bool { return worstFirst(bs[i].v, bs[j].v) })
		var parts []string
		for i, b := range bs {
			if i == 5 {
				parts = append(parts, fmt.Sprintf("and %d more", len(bs)-5))
				break
			}
			parts = append(parts, fmt.Sprintf("rank %d (%s)", b.rank, b.text))
		}
		fails = append(fails, fmt.Sprintf("%s on %d of %d ranks: %s", what, len(bs), total, strings.Join(parts, ", ")))
	}
	higher := func(a, b float64) bool { return a > b }
	lower := func(a, b float64) bool { return a < b }
	if m := rep.Memory; m != nil {
		var peak, res, eff, leak, oom, unchecked []bad
		for _, r := range m.Ranks {
			if r.PhasesOnly {
				fleetPhasesOnly(r, l, log, &peak, &res, &unchecked)
			}
			if r.Device < 0 { // unreadable ranks fail as rep.Errors
				continue
			}
			// check --json: every rank's value of every threshold
			if l.Peak >= 0 {
				log.add(r.Path, r.Device, r.Rank, "peak_allocated_bytes", num(r.PeakAllocatedBytes), float64(l.Peak), r.PeakAllocatedBytes <= l.Peak)
			}
			if l.Reserved >= 0 {
				log.add(r.Path, r.Device, r.Rank, "peak_reserved_bytes", num(r.PeakReservedBytes), float64(l.Reserved), r.PeakReservedBytes <= l.Reserved)
			}
			if l.Efficiency >= 0 {
				log.add(r.Path, r.Device, r.Rank, "efficiency_at_peak_ratio", num(r.EfficiencyAtPeakRatio), l.Efficiency, r.EfficiencyAtPeakRatio >= l.Efficiency)
			}
			if l.NoLeak {
				var leak int64
				if r.Pattern == memory.PatternLeak {
					leak = r.LeakPerStepBytes
				}
				log.add(r.Path, r.Device, r.Rank, "leak_per_step_bytes", num(leak), 0, r.Pattern != memory.PatternLeak)
			}
			if l.NoOOM {
				log.add(r.Path, r.Device, r.Rank, "oom_count", num(r.OOMs), 0, r.OOMs == 0)
			}
			if l.Peak >= 0 && r.PeakAllocatedBytes > l.Peak {
				peak = append(peak, bad{r.Rank, float64(r.PeakAllocatedBytes), units.Bytes(r.PeakAllocatedBytes)})
			}
			if l.Reserved >= 0 && r.PeakReservedBytes > l.Reserved {
				res = append(res, bad{r.Rank, float64(r.PeakReservedBytes), units.Bytes(r.PeakReservedBytes)})
			}
			if l.Efficiency >= 0 && r.EfficiencyAtPeakRatio < l.Efficiency {
				eff = append(eff, bad{r.Rank, r.EfficiencyAtPeakRatio, units.Percent(r.EfficiencyAtPeakRatio)})
			}
			if l.NoLeak && r.Pattern == memory.PatternLeak {
				leak = append(leak, bad{r.Rank, float64(r.LeakPerStepBytes), units.Bytes(r.LeakPerStepBytes) + " per step"})
			}
			if l.NoOOM && r.OOMs > 0 {
				oom = append(oom, bad{r.Rank, float64(r.OOMs), units.Plural(r.OOMs, "OOM", "OOMs")})
			}
		}
		n := m.PeakAllocated.Ranks
		add("peak allocated > "+units.Bytes(l.Peak), n, peak, higher)
		add("peak reserved > "+units.Bytes(l.Reserved), n, res, higher)
		add("efficiency at the peak < "+units.Percent(l.Efficiency), n, eff, lower)
		add("memory leaks", n, leak, higher)
		add("out-of-memory events", n, oom, higher)
		add("unchecked (no allocator snapshot)", len(m.Ranks), unchecked, func(a, b float64) bool { return false })
	}
	if t := rep.Time; t != nil {
		var util, dl []bad
		for _, r := range t.Ranks {
			if r.Traces == 0 {
				continue
			}
			if l.MinGPUUtil >= 0 {
				log.add(r.Path, -1, r.Rank, "gpu_utilization_ratio", num(r.GPUUtilizationRatio), l.MinGPUUtil, r.GPUUtilizationRatio >= l.MinGPUUtil)
			}
			if l.MaxDataLoader >= 0 {
				log.add(r.Path, -1, r.Rank, "dataloader_ratio", num(r.DataLoaderRatio), l.MaxDataLoader, r.DataLoaderRatio <= l.MaxDataLoader)
			}
			if l.MinGPUUtil >= 0 && r.GPUUtilizationRatio < l.MinGPUUtil {
				util = append(util, bad{r.Rank, r.GPUUtilizationRatio, units.Percent(r.GPUUtilizationRatio)})
			}
			if l.MaxDataLoader >= 0 && r.DataLoaderRatio > l.MaxDataLoader {
				dl = append(dl, bad{r.Rank, r.DataLoaderRatio, units.Percent(r.DataLoaderRatio)})
			}
		}
		n := len(t.Ranks)
		add("GPU utilization < "+units.Percent(l.MinGPUUtil), n, util, lower)
		add("DataLoader share > "+units.Percent(l.MaxDataLoader), n, dl, higher)
	}
	return fails
}

// fleetPhasesOnly applies the memory thresholds to rank r, recorded with
// phases alone (r.PhasesOnly), as Memory does to one such rank
// (phasesOnly): the peaks it exceeds join peak and res, and the thresholds
// it cannot be checked against join unchecked, so that nothing passes
// unchecked.
func fleetPhasesOnly(r fleet.RankMemory, l Limits, log *Log, peak, res, unchecked *[]bad) {
	var flags []string
	for _, t := range phasesOnly(l, r.PeakAllocatedBytes, r.PeakReservedBytes, true) {
		log.add(r.Path, -1, r.Rank, t.metric, t.value, t.limit, t.ok)
		switch {
		case t.value == nil:
			flags = append(flags, t.flag)
		case t.ok:
		case t.metric == "peak_allocated_bytes":
			*peak = append(*peak, bad{r.Rank, *t.value, units.Bytes(int64(*t.value)) + ", from its phases"})
		default:
			*res = append(*res, bad{r.Rank, *t.value, units.Bytes(int64(*t.value)) + ", from its phases"})
		}
	}
	if len(flags) > 0 {
		*unchecked = append(*unchecked, bad{r.Rank, 0, "phases only: " + strings.Join(flags, " ")})
	}
}
