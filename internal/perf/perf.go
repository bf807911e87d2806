// Package perf analyses Kineto traces: steps and their time breakdown (the
// TensorBoard plugin's priority order and device-aware step bounds), GPU
// utilisation, estimated SM efficiency and occupancy, tensor-core share,
// training phases, operator and kernel tables, GPU idle time (HTA's rule),
// launch delays, copies, synchronisations, communication, the memory curve,
// multi-rank skew and findings with recommendations, as one complete
// Report (result.go). Analyses never parse: they take a *kineto.Trace
// (internal/load reads files).
package perf

import (
	"fmt"
	"math"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"sync"

	"github.com/ptscope/ptscope/internal/finding"
	"github.com/ptscope/ptscope/internal/kineto"
	"github.com/ptscope/ptscope/internal/report"
)

// Options tune the analysis.
type Options struct {
	GroupByShape bool // operator rows per (name, input shapes)
	Annotations  bool // include user annotations in the operator table
	MemoryPoints int  // points kept per memory curve; 0 means 1000
	DropLastStep bool // drop the last step, as HTA does by default
	// Phases are the steps' phases that ptscope run recorded beside the
	// trace (a bundle's phases.jsonl): steps when the trace has no step
	// marker, and unprofiled step times to measure the profiler's overhead.
	Phases []Phase
}

// Analyze analyses one trace. It never keeps a reference to t.
func Analyze(t *kineto.Trace, opt Options) *Rank {
	if opt.MemoryPoints == 0 {
		opt.MemoryPoints = 1000
	}
	g := newGraph(t)
	base := t.Meta.BaseTimeNS
	r := &Rank{Rank: t.Rank(), hasRank: t.Rank() >= 0, Path: t.Path, Bytes: t.Bytes, Events: t.Events.Len() + len(t.Memory) + len(t.Flows),
		SlowestStep: -1, OutlierSteps: []int{}, PrimaryDevice: -1}
	if r.Rank < 0 {
		r.Rank = 0
	}
	if d := t.Meta.Distributed; d != nil {
		r.WorldSize, r.Backend = d.WorldSize, d.Backend
	}
	r.TimeOrigin = timeOrigin(t)
	r.Profiler = Profiler{WithStack: t.Meta.WithStack, RecordShapes: t.Meta.RecordShapes, ProfileMemory: t.Meta.ProfileMemory, Schedule: len(g.steps) > 0}
	for _, k := range t.Events.Kind {
		if k == kineto.KindPythonFunction {
			r.Profiler.PythonFunctionEvents++
		}
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
	steps, src := findSteps(g, opt.Phases, base, r.TimeOrigin == OriginUnix)
	r.StepSource = src
	if opt.DropLastStep && len(steps) > 1 {
		steps = steps[:len(steps)-1]
	}
	ro := buildRoles(g)
	bd, dataloader := attribute(ro, steps)
	ph := attributePhases(g, steps, dataloader)
	var s0, e0 int64
	if len(steps) > 0 {
		s0, e0 = steps[0].start, steps[len(steps)-1].end
	}
	slots := make(spans, 0, len(steps))
	for _, st := range steps {
		slots = append(slots, span{st.start, st.end})
	}
	slots = union(slots)
	devs := deviceWork(g, ro, slots)
	r.GPUs = gpuMetrics(g, devs, slots)
	var primary *devWork
	for _, x := range r.GPUs {
		// the rank's headline numbers: the device with the most compute
		if primary == nil || x.KernelNS > primary.kernel {
			primary, r.PrimaryDevice = devs[x.Device], x.Device
			r.GPUUtilizationRatio, r.SMEfficiencyRatio = x.UtilizationRatio, x.SMEfficiencyRatio
			r.AchievedOccupancyRatio, r.TensorCoreRatio = x.AchievedOccupancyRatio, x.TensorCoreRatio
			r.Idle = x.Idle
		}
	}
	for i, st := range steps {
		u := 0.0
		if st.end > st.start && primary != nil {
			u = float64(primary.compute.overlap(st.start, st.end)) / float64(st.end-st.start)
		}
		r.Steps = append(r.Steps, Step{Name: st.name, Number: st.num, StartTimeNS: base + st.start, DurationNS: st.end - st.start,
			HostStartTimeNS: base + st.hostS, HostDurationNS: st.hostE - st.hostS, GPUEvents: st.gpuCount, Breakdown: bd[i], Phases: ph[i],
			UtilizationRatio: u, HostDataLoaderNS: ro.dataloader.overlap(st.hostS, st.hostE)})
	}
	if r.Steps == nil {
		r.Steps = []Step{}
	}
	stepStats(r)
	r.Comm, r.comm = commStats(g, ro)
	r.Memory = memoryCurve(g, base, opt.MemoryPoints)
	for i, v := range stepStartAllocated(g, steps) {
		r.Steps[i].StartAllocatedBytes = v
	}
	r.UtilTimeline = utilTimeline(devs, s0, e0, base)
	r.FwdBwdLinks = len(g.fwdOf)
	if r.TimeOrigin == OriginUnix {
		r.Overhead = profilingOverhead(r, opt.Phases, base, t)
	}
	wg.Wait()
	r.Findings = findings(g, r)
	// lists are [] in the JSON, never null
	if r.Comm.Collectives == nil {
		r.Comm.Collectives = []Collective{}
	}
	if r.Memory.Devices == nil {
		r.Memory.Devices = []MemoryDevice{}
	}
	if r.UtilTimeline == nil {
		r.UtilTimeline = []UtilPoint{}
	}
	if r.GPUs == nil {
		r.GPUs = []GPU{}
	}
	return r
}

// timeOrigin tells whether base + ts is Unix time: Kineto traces carry
// baseTimeNanoseconds or, before it existed, absolute ts; the legacy
// profiler's bare arrays count from the profiler's start.
func timeOrigin(t *kineto.Trace) TimeOrigin {
	if t.Meta.BaseTimeNS > 0 {
		return OriginUnix
	}
	const year2001 = int64(1e18) // in ns
	if t.Events.Len() > 0 && t.Events.TS[0] > year2001 {
		return OriginUnix
	}
	return OriginTrace
}

// stepStats fills the step averages, the breakdown and phase means, the
// variation, the slowest step and the outliers.
func stepStats(r *Rank) {
	n := int64(len(r.Steps))
	if n == 0 {
		return
	}
	var sum Breakdown
	var ps Phases
	var tot, hostDL, hostTot int64
	durs := make([]int64, 0, n)
	for i, st := range r.Steps {
		tot += st.DurationNS
		durs = append(durs, st.DurationNS)
		if r.SlowestStep < 0 || st.DurationNS > r.Steps[r.SlowestStep].DurationNS {
			r.SlowestStep = i
		}
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
		hostDL += st.HostDataLoaderNS
		hostTot += st.HostDurationNS
	}
	r.AverageStepNS = tot / n
	r.AverageBreakdown = Breakdown{sum.KernelNS / n, sum.MemcpyNS / n, sum.MemsetNS / n, sum.CommunicationNS / n,
		sum.RuntimeNS / n, sum.DataLoaderNS / n, sum.CPUExecNS / n, sum.OtherNS / n}
	r.AveragePhases = Phases{ps.ForwardNS / n, ps.BackwardNS / n, ps.OptimizerNS / n, ps.DataLoadingNS / n, ps.OtherNS / n}
	r.DataLoaderRatio = share(sum.DataLoaderNS, tot)
	r.HostDataLoaderRatio = share(hostDL, hostTot)
	slices.Sort(durs)
	r.MedianStepNS = durs[len(durs)/2]
	if len(durs)%2 == 0 {
		r.MedianStepNS = (durs[len(durs)/2-1] + durs[len(durs)/2]) / 2
	}
	mean := float64(tot) / float64(n)
	var v float64
	for i, st := range r.Steps {
		d := float64(st.DurationNS) - mean
		v += d * d
		if n >= 3 && float64(st.DurationNS) > 1.5*float64(r.MedianStepNS) {
			r.OutlierSteps = append(r.OutlierSteps, i)
		}
	}
	if mean > 0 {
		r.StepTimeVariationRatio = math.Sqrt(v/float64(n)) / mean
	}
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
	return Compare(ranks)
}

// Compare numbers the ranks that lack distributedInfo (from the file name,
// "rank3.123.pt.trace.json", else the next free number), sorts them and,
// with two or more, compares them.
func Compare(ranks []*Rank) *Report {
	rep := &Report{Header: report.NewHeader("trace"), Ranks: []Rank{}, Findings: []finding.Finding{}}
	seen := map[int]bool{}
	for _, r := range ranks {
		if r.hasRank {
			seen[r.Rank] = true
		}
	}
	for _, r := range ranks {
		if !r.hasRank {
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
		for i := range r.Findings {
			if r.Findings[i].At == nil {
				r.Findings[i].At = &finding.Ref{}
			}
			r.Findings[i].At.Rank = finding.Int(r.Rank)
		}
		rep.Ranks = append(rep.Ranks, *r)
	}
	sort.SliceStable(rep.Ranks, func(i, j int) bool { return rep.Ranks[i].Rank < rep.Ranks[j].Rank })
	if len(rep.Ranks) > 1 {
		rep.CrossRank = crossRank(rep.Ranks)
		rep.Findings = crossFindings(rep.CrossRank)
	}
	return rep
}
