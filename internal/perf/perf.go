// Package perf analyses Kineto traces: steps and their time breakdown (the
// TensorBoard plugin's priority order and device-aware step bounds), GPU
// utilisation, estimated SM efficiency and occupancy, tensor-core share,
// training phases, operator and kernel tables, GPU idle time (HTA's rule),
// launch delays, copies, synchronisations, communication, the memory curve,
// multi-rank skew and findings with recommendations. Analyses never parse:
// they take a *kineto.Trace.
package perf

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/ptscope/ptscope/internal/input"
	"github.com/ptscope/ptscope/internal/kineto"
)

// SchemaVersion is the version of the JSON document.
const SchemaVersion = 1

// Options tune the analysis.
type Options struct {
	GroupByShape bool // operator rows per (name, input shapes)
	Annotations  bool // include user annotations in the operator table
	MemoryPoints int  // points kept per memory curve; 0 means 2000
	DropLastStep bool // drop the last profiler step, as HTA does by default
	Reader       kineto.Options
}

// Step is one profiler step.
type Step struct {
	Name             string    `json:"name"`
	Number           int       `json:"number"`
	StartNS          int64     `json:"start_ns"` // relative to the first step's start
	DurationNS       int64     `json:"duration_ns"`
	HostDurationNS   int64     `json:"host_duration_ns"`
	GPUEvents        int       `json:"gpu_events"`
	HostDataLoaderNS int64     `json:"host_dataloader_ns"` // DataLoader time within the host span`
	Breakdown        Breakdown `json:"breakdown"`
	Phases           Phases    `json:"phases"`
	UtilizationRatio float64   `json:"gpu_utilization_ratio"`
	// GPU memory allocated when the step started (last [memory] event before
	// its host start, summed over GPUs); -1 without memory events
	StartAllocatedBytes int64 `json:"start_allocated_bytes"`
}

// Rank is the analysis of one trace file.
type Rank struct {
	Rank                    int         `json:"rank"`
	WorldSize               int         `json:"world_size,omitempty"`
	Path                    string      `json:"path"`
	Bytes                   int64       `json:"bytes"`
	Events                  int         `json:"events"`
	Steps                   []Step      `json:"steps"`
	AverageStepNS           int64       `json:"average_step_ns"`
	AverageBreakdown        Breakdown   `json:"average_breakdown"`
	AveragePhases           Phases      `json:"average_phases"`
	StepTimeVariationRatio  float64     `json:"step_time_variation_ratio"` // stddev / mean
	DataLoaderRatio         float64     `json:"dataloader_ratio"`          // average DataLoader share of the step (breakdown)
	HostDataLoaderRatio     float64     `json:"host_dataloader_ratio"`     // DataLoader share of the host step time
	GPUUtilizationRatio     float64     `json:"gpu_utilization_ratio"`
	SMEfficiencyRatio       float64     `json:"sm_efficiency_ratio"`
	AchievedOccupancyRatio  float64     `json:"achieved_occupancy_ratio"`
	TensorCoreRatio         float64     `json:"tensor_core_ratio"`
	TensorCoreEligibleRatio float64     `json:"tensor_core_eligible_ratio"` // kernel time of TC-eligible ops
	GPUs                    []GPU       `json:"gpus"`
	Operators               []Operator  `json:"operators"`
	UserRanges              []Operator  `json:"user_ranges"` // user annotations (record_function), ProfilerStep excluded
	Kernels                 []Kernel    `json:"kernels"`
	Idle                    Idle        `json:"idle"`
	Launch                  Launch      `json:"launch"`
	Copies                  []Copy      `json:"copies"`
	Syncs                   []Sync      `json:"syncs"`
	Comm                    Comm        `json:"communication"`
	Memory                  Memory      `json:"memory"`
	UtilTimeline            []UtilPoint `json:"gpu_utilization_timeline"`
	FwdBwdLinks             int         `json:"fwd_bwd_links"` // backward ops linked to their forward op
	Findings                []Finding   `json:"findings"`
	Warnings                []string    `json:"warnings"`
	comm                    []commEvent
	hasRank                 bool // the rank came from distributedInfo
}

// Report is the analysis of one or more traces (one per rank).
type Report struct {
	SchemaVersion int        `json:"schema_version"`
	Ranks         []Rank     `json:"ranks"`
	Cross         *CrossRank `json:"cross_rank,omitempty"`
	Findings      []Finding  `json:"findings"` // across ranks
}

// Analyze analyses one trace.
func Analyze(t *kineto.Trace, opt Options) *Rank {
	if opt.MemoryPoints == 0 {
		opt.MemoryPoints = 2000
	}
	g := newGraph(t)
	r := &Rank{Rank: t.Rank(), hasRank: t.Rank() >= 0, Path: t.Path, Bytes: t.Bytes, Events: t.Events.Len() + len(t.Memory) + len(t.Flows)}
	if r.Rank < 0 {
		r.Rank = 0
	}
	if d := t.Meta.Distributed; d != nil {
		r.WorldSize = d.WorldSize
	}
	r.Warnings = append([]string{}, t.Damage.Warnings...)
	if t.Damage.Truncated {
		r.Warnings = append(r.Warnings, "the trace is truncated: the report covers the events before the cut")
	}
	if t.Damage.Repaired > 0 {
		r.Warnings = append(r.Warnings, fmt.Sprintf("%d damaged events repaired", t.Damage.Repaired))
	}
	if t.Damage.Dropped > 0 {
		r.Warnings = append(r.Warnings, fmt.Sprintf("%d unreadable events dropped", t.Damage.Dropped))
	}

	// the tables depend on the graph only: build them beside the step analyses
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		st := computeOpStats(g)
		r.Operators = operators(g, st, opt.GroupByShape, opt.Annotations)
		r.UserRanges = userRanges(g, st)
		r.Kernels = kernels(g)
		r.TensorCoreEligibleRatio = tcEligibleRatio(g)
		r.Launch = launchStats(g)
		r.Copies = copies(g)
		r.Syncs = syncs(g)
	}()
	steps := findSteps(g)
	if opt.DropLastStep && len(steps) > 1 {
		steps = steps[:len(steps)-1]
	}
	ro := buildRoles(g)
	bd := attribute(ro, steps)
	ph := attributePhases(g, steps)
	var s0, e0 int64
	if len(steps) > 0 {
		s0, e0 = steps[0].start, steps[len(steps)-1].end
	}
	for i, st := range steps {
		u := 0.0
		if st.end > st.start {
			u = float64(ro.kernelAll(g).overlap(st.start, st.end)) / float64(st.end-st.start)
		}
		r.Steps = append(r.Steps, Step{Name: st.name, Number: st.num, StartNS: st.start - s0, DurationNS: st.end - st.start,
			HostDurationNS: st.hostE - st.hostS, GPUEvents: st.gpuCount, Breakdown: bd[i], Phases: ph[i], UtilizationRatio: u,
			HostDataLoaderNS: ro.dataloader.overlap(st.hostS, st.hostE)})
	}
	if n := int64(len(r.Steps)); n > 0 {
		var sum Breakdown
		var ps Phases
		var tot int64
		for _, st := range r.Steps {
			tot += st.DurationNS
			b := st.Breakdown
			sum.KernelNS += b.KernelNS
			sum.MemcpyNS += b.MemcpyNS
			sum.MemsetNS += b.MemsetNS
			sum.CommunicationNS += b.CommunicationNS
			sum.RuntimeNS += b.RuntimeNS
			sum.DataLoaderNS += b.DataLoaderNS
			sum.CPUExecNS += b.CPUExecNS
			sum.OtherNS += b.OtherNS
			p := st.Phases
			ps.ForwardNS += p.ForwardNS
			ps.BackwardNS += p.BackwardNS
			ps.OptimizerNS += p.OptimizerNS
			ps.DataLoadingNS += p.DataLoadingNS
			ps.OtherNS += p.OtherNS
		}
		r.AverageStepNS = tot / n
		r.AverageBreakdown = Breakdown{sum.KernelNS / n, sum.MemcpyNS / n, sum.MemsetNS / n, sum.CommunicationNS / n,
			sum.RuntimeNS / n, sum.DataLoaderNS / n, sum.CPUExecNS / n, sum.OtherNS / n}
		r.AveragePhases = Phases{ps.ForwardNS / n, ps.BackwardNS / n, ps.OptimizerNS / n, ps.DataLoadingNS / n, ps.OtherNS / n}
		var hostDL, hostTot int64
		for _, st := range r.Steps {
			hostDL += st.HostDataLoaderNS
			hostTot += st.HostDurationNS
		}
		r.DataLoaderRatio = share(r.AverageBreakdown.DataLoaderNS, r.AverageStepNS)
		r.HostDataLoaderRatio = share(hostDL, hostTot)
		mean := float64(tot) / float64(n)
		var v float64
		for _, st := range r.Steps {
			d := float64(st.DurationNS) - mean
			v += d * d
		}
		if mean > 0 {
			r.StepTimeVariationRatio = math.Sqrt(v/float64(n)) / mean
		}
	}
	r.GPUs = gpuMetrics(g, s0, e0)
	if len(r.GPUs) > 0 {
		// the rank's headline numbers: its busiest device
		best := 0
		for i, x := range r.GPUs {
			if x.KernelNS > r.GPUs[best].KernelNS {
				best = i
			}
		}
		x := r.GPUs[best]
		r.GPUUtilizationRatio, r.SMEfficiencyRatio = x.UtilizationRatio, x.SMEfficiencyRatio
		r.AchievedOccupancyRatio, r.TensorCoreRatio = x.AchievedOccupancyRatio, x.TensorCoreRatio
	}
	r.Idle = idleTime(g, s0, e0)
	r.Comm, r.comm = commStats(g, ro)
	h0 := s0 // memory events are host timestamps: origin at the first step's host start
	if len(steps) > 0 {
		h0 = steps[0].hostS
	}
	r.Memory = memoryCurve(g, h0, opt.MemoryPoints)
	for i, v := range stepStartAllocated(g, steps) {
		r.Steps[i].StartAllocatedBytes = v
	}
	r.UtilTimeline = utilTimeline(g, s0, e0)
	r.FwdBwdLinks = len(g.fwdOf)
	wg.Wait()
	r.Findings = findings(g, r)
	return r
}

// kernelAll is the union of all kernels (compute and communication).
func (r *roles) kernelAll(g *graph) spans {
	if r.all == nil {
		r.all = union(append(append(spans{}, r.kernel...), r.comm...))
	}
	return r.all
}

// tcEligibleRatio is the share of kernel time launched by tensor-core
// eligible operators (the operator or one of its ancestors is eligible).
func tcEligibleRatio(g *graph) float64 {
	ev := g.ev
	elig := make(map[int32]bool)
	var eligible func(o int32) bool
	eligible = func(o int32) bool {
		if v, ok := elig[o]; ok {
			return v
		}
		v := tcEligibleOps[g.t.Name(int(o))]
		if !v && g.parent[o] >= 0 {
			v = eligible(g.parent[o])
		}
		elig[o] = v
		return v
	}
	var all, yes int64
	for _, i := range g.gpu {
		if ev.Kind[i] != kineto.KindKernel {
			continue
		}
		o := g.owner[i]
		if o < 0 {
			continue
		}
		all += ev.Dur[i]
		if eligible(o) {
			yes += ev.Dur[i]
		}
	}
	if all == 0 {
		return 0
	}
	return float64(yes) / float64(all)
}

var rankName = regexp.MustCompile(`(?i)rank[_-]?(\d+)`)

// AnalyzeTraces analyses one trace per rank and compares the ranks.
func AnalyzeTraces(traces []*kineto.Trace, opt Options) *Report {
	ranks := make([]*Rank, 0, len(traces))
	for _, t := range traces {
		ranks = append(ranks, Analyze(t, opt))
	}
	return compare(ranks)
}

// compare numbers the ranks that lack distributedInfo and compares them.
func compare(ranks []*Rank) *Report {
	rep := &Report{SchemaVersion: SchemaVersion, Ranks: []Rank{}, Findings: []Finding{}}
	seen := map[int]bool{}
	for _, r := range ranks {
		if r.hasRank {
			seen[r.Rank] = true
		}
	}
	for _, r := range ranks {
		if !r.hasRank {
			// no distributedInfo: the worker name ("rank3.123.pt.trace.json"), else the next free number
			r.Rank = -1
			if m := rankName.FindStringSubmatch(filepath.Base(r.Path)); m != nil {
				r.Rank, _ = strconv.Atoi(m[1])
			}
			if len(ranks) > 1 && (r.Rank < 0 || seen[r.Rank]) {
				r.Rank = 0
				for seen[r.Rank] {
					r.Rank++
				}
				r.Warnings = append(r.Warnings, fmt.Sprintf("no distributedInfo: numbered rank %d by file order", r.Rank))
			}
			r.Rank = max(r.Rank, 0)
			seen[r.Rank] = true
		}
		rep.Ranks = append(rep.Ranks, *r)
	}
	sort.SliceStable(rep.Ranks, func(i, j int) bool { return rep.Ranks[i].Rank < rep.Ranks[j].Rank })
	if len(rep.Ranks) > 1 {
		rep.Cross = crossRank(rep.Ranks)
		rep.Findings = crossFindings(rep.Cross)
	}
	return rep
}

// Load reads and analyses trace files or folders of them (one trace per
// rank). It is what `ptscope trace` and `ptscope check` call. Traces that
// could be read only in part are analysed and carry warnings; a file that
// cannot be read at all is an error naming it.
func Load(ctx context.Context, paths []string, opt Options) (*Report, error) {
	for _, p := range paths {
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Size() == 0 {
			return nil, fmt.Errorf("%s: offset 0: empty file", p)
		}
	}
	files, err := input.Find(paths, input.Trace)
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s: no Kineto trace found", strings.Join(paths, ", "))
	}
	// one trace in memory at a time: each is analysed, then dropped
	var ranks []*Rank
	for _, f := range files {
		if f.Kind != input.Trace {
			return nil, fmt.Errorf("%s: offset 0: not a Kineto trace (this is a %s)", f.Path, f.Kind)
		}
		t, err := kineto.ReadFile(ctx, f.Path, opt.Reader)
		if err != nil {
			return nil, err
		}
		ranks = append(ranks, Analyze(t, opt))
	}
	return compare(ranks), nil
}
