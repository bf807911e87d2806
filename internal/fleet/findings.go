package fleet

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/ptscope/ptscope/internal/finding"
	"github.com/ptscope/ptscope/internal/units"
)

// Finding thresholds.
const (
	// ImbalanceWarn: the largest rank's peak this much over the mean is a
	// warning (ImbalanceInfo an info).
	ImbalanceWarn = 0.10
	ImbalanceInfo = 0.05
	// SkewWarn: a p99 collective start skew of this share of the median
	// step is a warning.
	SkewWarn = 0.05
)

// rankList writes up to n ranks ("3, 17, 40 and 12 more").
func rankList(ranks []int, n int) string {
	var parts []string
	for i, r := range ranks {
		if i == n {
			parts = append(parts, fmt.Sprintf("and %d more", len(ranks)-n))
			break
		}
		parts = append(parts, strconv.Itoa(r))
	}
	return strings.Join(parts, ", ")
}

func pct(r float64) string { return units.Percent(r) }

// leakMessage names the leaking ranks and the largest growth, and its
// rank only when there are several.
func leakMessage(ranks []int, per int64, worst int) string {
	if len(ranks) == 1 {
		return fmt.Sprintf("Memory grows step after step on rank %d, by up to %s per step.", worst, units.Bytes(per))
	}
	return fmt.Sprintf("Memory grows step after step on %s, up to %s per step on rank %d.", rankWord(ranks, 8), units.Bytes(per), worst)
}

// ranksWord writes "1 rank" or "12 ranks".
func ranksWord(n int) string {
	if n == 1 {
		return "1 rank"
	}
	return fmt.Sprintf("%d ranks", n)
}

// rankWord writes "rank 3" or "ranks 3, 17 and 5 more".
func rankWord(ranks []int, n int) string {
	if len(ranks) == 1 {
		return fmt.Sprintf("rank %d", ranks[0])
	}
	return "ranks " + rankList(ranks, n)
}

// rankCmd is the command line that opens one rank's report.
func rankCmd(command string, rank int) string {
	return fmt.Sprintf("ptscope %s --rank %d", command, rank)
}

// fleetFindings runs the fleet's rules, memory then time then the
// unreadable inputs, and returns their findings, most severe first
// (finding.Sort is stable: the order breaks ties).
func fleetFindings(rep *Report) []finding.Finding {
	out := []finding.Finding{}
	cmd := rep.Command
	if cmd == "check" {
		cmd = "analyze"
	}
	if m := rep.Memory; m != nil {
		out = memoryFindings(out, m, cmd)
	}
	if t := rep.Time; t != nil {
		out = timeFindings(out, t)
	}
	if len(rep.Errors) > 0 {
		out = append(out, unreadableFinding(rep.Errors))
	}
	finding.Sort(out)
	return out
}

// memoryFindings appends to out the memory rules' findings: ranks out of
// memory, imbalance (cmd opens the largest rank's report), leaking ranks,
// truncated snapshots.
func memoryFindings(out []finding.Finding, m *MemoryFleet, cmd string) []finding.Finding {
	if len(m.OOMRanks) > 0 {
		out = append(out, finding.Finding{ID: "fleet-oom", Severity: finding.Critical,
			Numbers:        finding.Numbers{"ranks": float64(len(m.OOMRanks))},
			Message:        fmt.Sprintf("%s of %d ran out of memory: %s.", ranksWord(len(m.OOMRanks)), len(m.Ranks), rankWord(m.OOMRanks, 8)),
			Recommendation: fmt.Sprintf("A rank's report gives the verdict and what was alive: %s.", rankCmd("analyze", m.OOMRanks[0])),
			At:             &finding.Ref{View: "fleet", Rank: finding.Int(m.OOMRanks[0])}})
	}
	if fd, ok := imbalanceFinding(m, cmd); ok {
		out = append(out, fd)
	}
	if len(m.LeakRanks) > 0 {
		worst, per := m.LeakRanks[0], int64(0)
		for _, r := range m.Ranks {
			if r.LeakPerStepBytes > per {
				worst, per = r.Rank, r.LeakPerStepBytes
			}
		}
		out = append(out, finding.Finding{ID: "fleet-leak", Severity: finding.Warning,
			Numbers:        finding.Numbers{"ranks": float64(len(m.LeakRanks)), "per_step_bytes": float64(per)},
			Message:        leakMessage(m.LeakRanks, per, worst),
			Recommendation: fmt.Sprintf("The leaking stacks: %s.", rankCmd("analyze", worst)),
			At:             &finding.Ref{View: "fleet", Rank: finding.Int(worst)}})
	}
	if len(m.TruncatedRanks) > 0 {
		out = append(out, finding.Finding{ID: "fleet-truncated", Severity: finding.Info,
			Numbers: finding.Numbers{"ranks": float64(len(m.TruncatedRanks))},
			Message: fmt.Sprintf("The snapshots of %s lost the start of their recording to the ring buffer (%s): their peaks may be missed.",
				ranksWord(len(m.TruncatedRanks)), rankWord(m.TruncatedRanks, 8)),
			Recommendation: "Record with a larger max_entries (_record_memory_history, or ptscope run --max-entries).",
			At:             &finding.Ref{View: "fleet", Rank: finding.Int(m.TruncatedRanks[0])}})
	}
	return out
}

// imbalanceFinding compares the largest rank's peak with the mean
// (ImbalanceInfo, ImbalanceWarn) and names the ranks above the median.
func imbalanceFinding(m *MemoryFleet, cmd string) (finding.Finding, bool) {
	p := m.PeakAllocated
	if p.Ranks < 2 || m.ImbalanceRatio <= ImbalanceInfo {
		return finding.Finding{}, false
	}
	sev := finding.Info
	if m.ImbalanceRatio > ImbalanceWarn {
		sev = finding.Warning
	}
	// the headline compares with the mean, the outliers with the
	// median: each sentence names its reference
	msg := fmt.Sprintf("Rank %d peaks at %s, %s over the mean of the ranks (%s)",
		p.MaxRank, units.Bytes(p.MaxBytes), pct(m.ImbalanceRatio), units.Bytes(p.MeanBytes))
	if over := highOutliers(p.Outliers); len(over) > 0 {
		msg += "; above the median (" + units.Bytes(p.MedianBytes) + "): " + outlierText(p.Outliers, 4)
	} else {
		msg += "; the median is " + units.Bytes(p.MedianBytes)
	}
	return finding.Finding{ID: "memory-imbalance", Severity: sev,
		Numbers: finding.Numbers{"max_bytes": float64(p.MaxBytes), "mean_bytes": float64(p.MeanBytes), "median_bytes": float64(p.MedianBytes),
			"imbalance_ratio": m.ImbalanceRatio, "rank": float64(p.MaxRank), "outliers": float64(len(highOutliers(p.Outliers)))},
		Message: msg + ".",
		Recommendation: fmt.Sprintf("The job must fit its largest rank: see what it holds (%s); uneven batches, extra work on one rank or uneven sharding are the usual causes.",
			rankCmd(cmd, p.MaxRank)),
		At: &finding.Ref{View: "fleet", Rank: finding.Int(p.MaxRank)}}, true
}

// timeFindings appends to out the time rules' findings: stragglers,
// collective start skew, ranks with low GPU utilisation.
func timeFindings(out []finding.Finding, t *TimeFleet) []finding.Finding {
	st := t.StepTime
	if len(t.Stragglers) > 0 {
		s := t.Stragglers[0]
		var msg string
		if s.WaitRatio > 0 {
			msg = fmt.Sprintf("The other ranks wait for rank %d: %s of exposed waiting in collectives (no compute running), %s of their steps' time on average",
				s.Rank, units.Duration(s.CausedWaitNS), pct(s.WaitRatio))
			if s.LateArrivals > 0 {
				msg += fmt.Sprintf("; it joins %s of its collectives last", pct(s.LateRatio))
			}
		} else {
			msg = fmt.Sprintf("Rank %d joins %s of its collectives last; the others wait for it", s.Rank, pct(s.LateRatio))
		}
		out = append(out, finding.Finding{ID: "stragglers", Severity: finding.Warning,
			Numbers: finding.Numbers{"ranks": float64(len(t.Stragglers)), "rank": float64(s.Rank), "late_arrivals": float64(s.LateArrivals),
				"wait_ratio": s.WaitRatio, "caused_wait_ns": float64(s.CausedWaitNS),
				"average_step_ns": float64(s.AverageStepNS), "median_step_ns": float64(st.MedianNS)},
			Message:        msg + ".",
			Recommendation: fmt.Sprintf("Compare its step breakdown with a typical rank's: %s.", rankCmd("trace", s.Rank)),
			At:             &finding.Ref{View: "fleet", Rank: finding.Int(s.Rank)}})
	}
	c := t.Collectives
	if c.Matched > 0 && st.MedianNS > 0 && len(c.MostSkewed) > 0 {
		ratio := float64(c.StartSkew.P99NS) / float64(st.MedianNS)
		if ratio > SkewWarn {
			x := c.MostSkewed[0]
			out = append(out, finding.Finding{ID: "collective-skew", Severity: finding.Warning,
				Numbers: finding.Numbers{"p99_start_skew_ns": float64(c.StartSkew.P99NS), "max_start_skew_ns": float64(c.StartSkew.MaxNS),
					"median_step_ns": float64(st.MedianNS), "skew_ratio": ratio, "collectives": float64(c.Matched)},
				Message: fmt.Sprintf("Ranks start a collective up to %s apart (p99 %s over %d collectives, %s of the median step); the worst: %s #%d, last joined by rank %d.",
					units.Duration(c.StartSkew.MaxNS), units.Duration(c.StartSkew.P99NS), c.Matched, pct(ratio), x.Name, x.Index, x.LastRank),
				Recommendation: "Early ranks idle until the last arrives: balance the work before collectives; check late ranks' hosts.",
				At:             &finding.Ref{View: "fleet", Rank: finding.Int(x.LastRank)}})
		}
	}
	if u := t.GPUUtilization; u.Ranks >= 2 {
		var low []int
		for _, o := range u.Outliers {
			if o.DifferenceRatio < 0 {
				low = append(low, o.Rank)
			}
		}
		if len(low) > 0 {
			out = append(out, finding.Finding{ID: "gpu-utilization-outliers", Severity: finding.Info,
				Numbers: finding.Numbers{"ranks": float64(len(low)), "median_ratio": u.MedianRatio, "min_ratio": u.MinRatio},
				Message: fmt.Sprintf("%s keep their GPU busy much less than the median rank (%s): %s; the lowest %s on rank %d.",
					ranksWord(len(low)), pct(u.MedianRatio), rankWord(low, 8), pct(u.MinRatio), u.MinRank),
				Recommendation: fmt.Sprintf("See where its step goes: %s.", rankCmd("trace", u.MinRank)),
				At:             &finding.Ref{View: "fleet", Rank: finding.Int(u.MinRank)}})
		}
	}
	return out
}

// unreadableFinding names the inputs that could not be read (errs, at
// least one).
func unreadableFinding(errs []InputError) finding.Finding {
	var ranks []int
	for _, e := range errs {
		ranks = append(ranks, e.Rank)
	}
	return finding.Finding{ID: "unreadable-inputs", Severity: finding.Warning,
		Numbers:        finding.Numbers{"inputs": float64(len(errs))},
		Message:        fmt.Sprintf("%d inputs could not be read (%s); the summary leaves them out.", len(errs), rankWord(ranks, 8)),
		Recommendation: "The errors name the files; a truncated file is often a rank killed while dumping.",
		At:             &finding.Ref{View: "fleet", Rank: finding.Int(ranks[0])}}
}

// highOutliers are the ranks above the median among outliers.
func highOutliers(os []BytesOutlier) []int {
	var out []int
	for _, o := range os {
		if o.DeviationRatio > 0 {
			out = append(out, o.Rank)
		}
	}
	return out
}

func outlierText(os []BytesOutlier, n int) string {
	var parts []string
	k := 0
	for _, o := range os {
		if o.DeviationRatio <= 0 {
			continue
		}
		if k == n {
			parts = append(parts, "...")
			break
		}
		parts = append(parts, fmt.Sprintf("rank %d +%s", o.Rank, pct(o.DeviationRatio)))
		k++
	}
	return strings.Join(parts, ", ")
}
