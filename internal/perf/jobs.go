package perf

import (
	"cmp"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/ptscope/ptscope/internal/finding"
	"github.com/ptscope/ptscope/internal/rankname"
)

// Job is one run among the traces of a Report that holds several: the
// traces that are ranks of it, and their comparison.
type Job struct {
	Traces    []int             `json:"traces"` // indices into Report.Ranks
	CrossRank *CrossRank        `json:"cross_rank,omitempty"`
	Findings  []finding.Finding `json:"findings"`
}

// jobIdent is what tells the ranks of one job from other runs: the
// process that wrote the trace, the worker its file is named after
// (tensorboard_trace_handler's "{worker}.{time}.pt.trace.json"), and when
// it ran (Unix ns; unix false when the trace's clock is its own).
type jobIdent struct {
	pid        int32
	hasPID     bool
	worker     string
	unix       bool
	start, end int64
}

var workerFile = regexp.MustCompile(`^(.*?)(\.\d+)?\.pt\.trace\.json(?:\.gz)?$`)

// workerName is the worker a trace's file is named after, as the plugin
// reads it ("" when the name does not follow the handler's pattern).
func workerName(path string) string {
	if m := workerFile.FindStringSubmatch(filepath.Base(path)); m != nil {
		return m[1]
	}
	return ""
}

// jobSlackNS is how far apart the spans of two ranks of one job may lie:
// ranks start their profilers at slightly different times.
const jobSlackNS = 1_000_000_000

// sameJob reports whether two traces can be ranks of one job: the same
// world size, different ranks, different processes (when a rank is
// unknown, a trace named after the same worker, or of the same pid, is
// another profile of the same process), and spans that overlap on the
// shared clock.
func sameJob(a, b *Rank) (bool, string) {
	if a.WorldSize > 0 && b.WorldSize > 0 && a.WorldSize != b.WorldSize {
		return false, "different world sizes"
	}
	if a.hasRank && b.hasRank && a.Rank == b.Rank {
		return false, fmt.Sprintf("rank %d twice", a.Rank)
	}
	x, y := a.id, b.id
	if !a.hasRank || !b.hasRank {
		switch {
		case x.worker != "" && y.worker != "":
			if x.worker == y.worker {
				return false, fmt.Sprintf("two profiles of %s", x.worker)
			}
		case x.hasPID && y.hasPID && x.pid == y.pid:
			return false, fmt.Sprintf("two profiles of process %d", x.pid)
		}
	}
	if x.unix && y.unix && (x.start > y.end+jobSlackNS || y.start > x.end+jobSlackNS) {
		return false, "recorded at different times"
	}
	return true, ""
}

// groupJobs groups the traces into jobs: each trace joins the first job
// (in start order) all of whose traces it can be a rank beside. It
// returns the jobs (indices into ranks, in start order) and why traces
// were kept apart.
func groupJobs(ranks []*Rank) (jobs [][]int, reasons []string) {
	order := make([]int, len(ranks))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(i, j int) bool { return ranks[order[i]].id.start < ranks[order[j]].id.start })
	for _, i := range order {
		placed := false
		var why string
		for j, job := range jobs {
			fits := true
			for _, m := range job {
				if ok, w := sameJob(ranks[i], ranks[m]); !ok {
					fits, why = false, w
					break
				}
			}
			if fits {
				jobs[j] = append(job, i)
				placed = true
				break
			}
		}
		if !placed {
			if len(jobs) > 0 && !slices.Contains(reasons, why) {
				reasons = append(reasons, why)
			}
			jobs = append(jobs, []int{i})
		}
	}
	return jobs, reasons
}

// numberRanks numbers the ranks of one job that lack distributedInfo:
// from the file name ("rank3.123.pt.trace.json"), else the next free
// number.
func numberRanks(ranks []*Rank, job []int) {
	seen := map[int]bool{}
	for _, i := range job {
		if r := ranks[i]; r.hasRank {
			seen[r.Rank] = true
		}
	}
	for _, i := range job {
		r := ranks[i]
		if r.hasRank {
			continue
		}
		r.Rank = -1
		if n, ok := rankname.Of(filepath.Base(r.Path)); ok {
			r.Rank = n
		}
		if len(job) > 1 && (r.Rank < 0 || seen[r.Rank]) {
			r.Rank = 0
			for seen[r.Rank] {
				r.Rank++
			}
			r.Warnings = append(r.Warnings, fmt.Sprintf("no distributedInfo: numbered rank %d by file order", r.Rank))
		}
		r.Rank = max(r.Rank, 0)
		seen[r.Rank] = true
	}
}

// GroupJobs groups analysed traces into jobs as Compare does (a server
// that holds each trace's analysis apart groups them with it): the
// indices into ranks of each job's traces, jobs in start order, and with
// several jobs the warning Compare gives.
func GroupJobs(ranks []*Rank) ([][]int, string) {
	jobs, reasons := groupJobs(ranks)
	if len(jobs) < 2 {
		return jobs, ""
	}
	return jobs, jobsWarning(len(ranks), len(jobs), reasons)
}

func jobsWarning(traces, jobs int, reasons []string) string {
	return fmt.Sprintf("the %d traces are %d separate runs, not ranks of one job (%s): ranks are compared within each run only",
		traces, jobs, strings.Join(reasons, "; "))
}

// compare fills the report with the ranks: grouped into jobs, numbered,
// sorted by job and rank, and compared within each job.
func (rep *Report) compare(ranks []*Rank) {
	jobs, reasons := groupJobs(ranks)
	for _, job := range jobs {
		numberRanks(ranks, job)
		slices.SortStableFunc(job, func(a, b int) int { return cmp.Compare(ranks[a].Rank, ranks[b].Rank) })
	}
	for _, job := range jobs {
		first := len(rep.Ranks)
		for _, i := range job {
			r := ranks[i]
			for k := range r.Findings {
				if r.Findings[k].At == nil {
					r.Findings[k].At = &finding.Ref{}
				}
				r.Findings[k].At.Rank = finding.Int(r.Rank)
			}
			rep.Ranks = append(rep.Ranks, *r)
		}
		if len(job) > 1 {
			commTransfer(rep.Ranks[first:])
		}
		if len(jobs) > 1 {
			j := Job{Findings: []finding.Finding{}}
			for k := first; k < len(rep.Ranks); k++ {
				j.Traces = append(j.Traces, k)
			}
			if len(job) > 1 {
				commTransfer(rep.Ranks[first:])
				j.CrossRank = crossRank(rep.Ranks[first:])
				attributeWaits(rep.Ranks[first:], j.CrossRank)
				workerBars(rep.Ranks[first:], j.CrossRank)
				j.Findings = crossFindings(j.CrossRank)
			}
			rep.Jobs = append(rep.Jobs, j)
		} else if len(job) > 1 {
			commTransfer(rep.Ranks)
			rep.CrossRank = crossRank(rep.Ranks)
			attributeWaits(rep.Ranks, rep.CrossRank)
			workerBars(rep.Ranks, rep.CrossRank)
			rep.Findings = crossFindings(rep.CrossRank)
		}
	}
	if len(jobs) > 1 {
		rep.Warnings = append(rep.Warnings, jobsWarning(len(ranks), len(jobs), reasons))
	}
}
