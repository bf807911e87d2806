package view

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/ptscope/ptscope/internal/finding"
	"github.com/ptscope/ptscope/internal/perf"
)

// peerSet is what a view that compares inputs sees of the others: the
// server's inputs as they load, or an --html file's. The distributed
// view's answers are kept by the set of traces they compare (results never
// change once loaded; a rescan that adds a trace makes a new set).
type peerSet struct {
	ready func() []*Input // the inputs loaded so far
	mu    sync.Mutex
	dist  map[string]*comparedSet // by the ids of the traces compared
}

// Distributed is the distributed view of one trace: the traces of its run
// (the bundle it belongs to, or every trace outside bundles) grouped into
// jobs as perf.GroupJobs groups them (traces of one process, or of
// unrelated runs, are never ranks of one job), the ranks of the trace's
// job compared (perf.Compare), and the traces of the other jobs listed.
type Distributed struct {
	// Warning is GroupJobs' warning when the traces are several runs.
	Warning string `json:"warning,omitempty"`
	// Ranks are the ranks of the input's job, by rank (one row when the
	// input's job is the input alone); Others the other jobs' traces.
	Ranks  []DistRank `json:"ranks"`
	Others []DistRank `json:"others"`
	// Jobs is how many runs the traces are.
	Jobs int `json:"jobs"`
	// CrossRank and Findings compare the ranks of the input's job (two or
	// more ranks).
	CrossRank *perf.CrossRank   `json:"cross_rank,omitempty"`
	Findings  []finding.Finding `json:"findings"`
}

// DistRank is one trace's row of the distributed view.
type DistRank struct {
	Input     int    `json:"input"`
	Path      string `json:"path"`
	Rank      int    `json:"rank"`
	WorldSize int    `json:"world_size,omitempty"`
	// Job numbers the run the trace belongs to (GroupJobs' order).
	Job                 int     `json:"job"`
	Steps               int     `json:"steps"`
	AverageStepNS       int64   `json:"average_step_ns"`
	GPUUtilizationRatio float64 `json:"gpu_utilization_ratio"`
	DataLoaderRatio     float64 `json:"dataloader_ratio"`
	// StepOverlap is the steps' compute / overlap / communication / other
	// split (perf.Step.Overlap, the plugin's per-worker bars) averaged over
	// the steps.
	StepOverlap   perf.StepOverlap `json:"step_overlap"`
	Communication perf.Comm        `json:"communication"`
	// CommOps is the communication-op table (perf.Rank.CommOps), with the
	// transfer times the comparison of the job's ranks gives.
	CommOps []perf.CommOp `json:"communication_ops"`
}

func traceDistributed(it *Input, _ params) (any, error) {
	if _, err := traceOf(it); err != nil {
		return nil, err
	}
	if it.peers == nil {
		return compareSet([]*Input{it}).view(it), nil
	}
	return it.peers.distributed(it), nil
}

// distributed answers the view for input it from the traces of its run
// that have loaded. The jobs of a set of traces are compared once, for
// every trace of the set.
func (ps *peerSet) distributed(it *Input) *Distributed {
	var traces []*Input
	var key strings.Builder
	for _, p := range ps.ready() {
		if p.trace != nil && p.Run == it.Run {
			traces = append(traces, p)
			key.WriteString(strconv.Itoa(p.ID) + ",")
		}
	}
	ps.mu.Lock()
	c, ok := ps.dist[key.String()]
	if !ok {
		c = compareSet(traces)
		if ps.dist == nil {
			ps.dist = map[string]*comparedSet{}
		}
		ps.dist[key.String()] = c
	}
	ps.mu.Unlock()
	return c.view(it)
}

// comparedSet is a set of traces grouped into jobs, each job's ranks
// compared (perf.Compare).
type comparedSet struct {
	traces  []*Input
	ranks   []*perf.Rank
	jobs    [][]int
	reports []*perf.Report // by job
	warning string
}

// compareSet groups traces into jobs and compares the ranks of each. The
// results are copied first: Compare numbers ranks and adds to their
// findings, warnings and communication ops, and the served results must
// stay as they were analysed.
func compareSet(traces []*Input) *comparedSet {
	c := &comparedSet{traces: traces, ranks: make([]*perf.Rank, len(traces))}
	for i, t := range traces {
		c.ranks[i] = compareCopy(t.trace.result)
	}
	c.jobs, c.warning = perf.GroupJobs(c.ranks)
	for _, job := range c.jobs {
		in := make([]*perf.Rank, len(job))
		for k, i := range job {
			in[k] = c.ranks[i]
		}
		c.reports = append(c.reports, perf.Compare(in))
	}
	return c
}

// view is the Distributed view of input it: its job's ranks compared, the
// other jobs' ranks listed.
func (c *comparedSet) view(it *Input) *Distributed {
	d := &Distributed{Warning: c.warning, Jobs: len(c.jobs), Ranks: []DistRank{}, Others: []DistRank{}, Findings: []finding.Finding{}}
	for j, job := range c.jobs {
		if !slices.ContainsFunc(job, func(i int) bool { return c.traces[i] == it }) {
			for _, i := range job {
				d.Others = append(d.Others, distRank(c.ranks[i], c.traces[i].ID, j))
			}
			continue
		}
		byPath := map[string]int{}
		for _, i := range job {
			byPath[c.ranks[i].Path] = c.traces[i].ID
		}
		rep := c.reports[j]
		for k := range rep.Ranks {
			d.Ranks = append(d.Ranks, distRank(&rep.Ranks[k], byPath[rep.Ranks[k].Path], j))
		}
		if len(job) > 1 {
			d.CrossRank, d.Findings = rep.CrossRank, rep.Findings
		}
	}
	return d
}

// compareCopy copies what perf.Compare changes in a rank.
func compareCopy(r *perf.Rank) *perf.Rank {
	c := *r
	c.Warnings = slices.Clone(r.Warnings)
	c.CommOps = slices.Clone(r.CommOps)
	c.Findings = make([]finding.Finding, len(r.Findings))
	for i, f := range r.Findings {
		if f.At != nil {
			at := *f.At
			f.At = &at
		}
		f.Numbers = maps.Clone(f.Numbers)
		c.Findings[i] = f
	}
	return &c
}

func distRank(r *perf.Rank, input, job int) DistRank {
	out := DistRank{Input: input, Path: r.Path, Rank: r.Rank, WorldSize: r.WorldSize, Job: job, Steps: len(r.Steps),
		AverageStepNS: r.AverageStepNS, GPUUtilizationRatio: r.GPUUtilizationRatio, DataLoaderRatio: r.DataLoaderRatio,
		Communication: r.Comm, CommOps: r.CommOps}
	if out.CommOps == nil {
		out.CommOps = []perf.CommOp{}
	}
	if n := int64(len(r.Steps)); n > 0 {
		var o perf.StepOverlap
		for _, s := range r.Steps {
			o.ComputeOnlyNS += s.Overlap.ComputeOnlyNS
			o.OverlapNS += s.Overlap.OverlapNS
			o.CommunicationOnlyNS += s.Overlap.CommunicationOnlyNS
			o.OtherNS += s.Overlap.OtherNS
		}
		out.StepOverlap = perf.StepOverlap{ComputeOnlyNS: o.ComputeOnlyNS / n, OverlapNS: o.OverlapNS / n,
			CommunicationOnlyNS: o.CommunicationOnlyNS / n, OtherNS: o.OtherNS / n}
	}
	return out
}
