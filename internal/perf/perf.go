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
	"math"
	"slices"

	"github.com/ptscope/ptscope/internal/envelope"
	"github.com/ptscope/ptscope/internal/finding"
	"github.com/ptscope/ptscope/internal/kineto"
)

// Options tune the analysis.
type Options struct {
	GroupByShape bool // operator rows per (name, input shapes)
	Annotations  bool // include user annotations in the operator table
	MemoryPoints int  // points kept per memory curve; 0 means 1000
	DropLastStep bool // drop the last step, as HTA does by default
	// SequenceOp picks the operators whose kernel sequences are listed
	// HTA's way (the shallowest ones whose names contain it); empty: the
	// innermost operators or modules launching three or more.
	SequenceOp string
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
	// what needs no links runs while the graph is built
	host := async(func() *hostRoles { return buildHostRoles(t) })
	facts := async(func() *Facts { return scanFacts(t) })
	g := newGraph(t)
	f := facts()
	pl := findSteps(g, opt.Phases, t.Meta.BaseTimeNS, timeOrigin(f) == OriginUnix)
	steps := pl.finish(opt.DropLastStep)
	g.win = wholeWindow(steps, f)
	m := newMerger(f, opt, pl.src, steps)
	m.add(analyzeWindow(g, g.win, opt, host))
	return m.rank()
}

// timeOrigin tells whether base + ts is Unix time: Kineto traces carry
// baseTimeNanoseconds or, before it existed, absolute ts; the legacy
// profiler's bare arrays count from the profiler's start.
func timeOrigin(f *Facts) TimeOrigin {
	if f.meta.BaseTimeNS > 0 {
		return OriginUnix
	}
	const year2001 = int64(1e18) // in ns
	if f.hasFirst && f.firstTS > year2001 {
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
	r.AverageHostStepNS = hostTot / n
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

// tcEligible sums the owned kernels' time that an op launched (all) and,
// of it, the time launched by tensor-core eligible operators as the
// plugin counts them (tensor_cores_parser): an operator is eligible when
// its name is on the list, when it launches a tensor-core kernel, or when
// one of its children is eligible; a kernel counts by the op that launched
// it, so the copies a convolution's op makes around its own are not
// eligible kernel time.
func tcEligible(g *graph) (all, yes int64) {
	ev := g.ev
	elig := make([]bool, ev.Len())
	for _, i := range g.gpu {
		if o := g.owner[i]; o >= 0 && ev.Kind[i] == kineto.KindKernel && g.isTC(ev.Name[i]) {
			elig[o] = true
		}
	}
	for k := len(g.order) - 1; k >= 0; k-- { // children before parents
		o := g.order[k]
		if g.class(o)&ncTCEligible != 0 {
			elig[o] = true
		}
		if p := g.parent[o]; p >= 0 && elig[o] {
			elig[p] = true
		}
	}
	for _, i := range g.gpu {
		if ev.Kind[i] != kineto.KindKernel || !g.owned(i) {
			continue
		}
		o := g.owner[i]
		if o < 0 {
			continue
		}
		all += ev.Dur[i]
		if elig[o] {
			yes += ev.Dur[i]
		}
	}
	return all, yes
}

// AnalyzeTraces analyses one trace per rank and compares the ranks.
func AnalyzeTraces(traces []*kineto.Trace, opt Options) *Report {
	ranks := make([]*Rank, 0, len(traces))
	for _, t := range traces {
		ranks = append(ranks, Analyze(t, opt))
	}
	return Compare(ranks)
}

// Compare groups the traces into jobs (traces of one process, or of
// unrelated runs, are never ranks of one job: jobs.go), numbers the ranks
// that lack distributedInfo (from the file name,
// "rank3.123.pt.trace.json", else the next free number), sorts them and
// compares the ranks of each job.
func Compare(ranks []*Rank) *Report {
	rep := &Report{Header: envelope.NewHeader("trace"), Ranks: []Rank{}, Findings: []finding.Finding{}}
	rep.compare(ranks)
	return rep
}
