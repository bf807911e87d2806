package perf

import "github.com/ptscope/ptscope/internal/kineto"

// StepLaunches is one step's kernel launches: a step is launch-bound when
// its host spent longer in the launch calls of its kernels than the GPU
// spent running them, so that the GPU waits for launches however fast its
// kernels get (CUDA graphs or fusing kernels help, faster kernels do not).
type StepLaunches struct {
	Step         string `json:"step"`
	Kernels      int    `json:"kernels"`       // kernels launched inside the step's host span
	ShortKernels int    `json:"short_kernels"` // ... shorter than their launch call
	LaunchNS     int64  `json:"launch_ns"`     // their launch calls' durations, summed
	KernelNS     int64  `json:"kernel_ns"`     // their durations, summed
	LaunchBound  bool   `json:"launch_bound"`  // LaunchNS > KernelNS
}

// LaunchHTA is HTA's get_cuda_kernel_launch_stats (its defaults): every
// GPU event launched by cudaLaunchKernel, cudaLaunchKernelExC, MTIA's
// runFunction, cudaMemcpyAsync or cudaMemsetAsync (not cuLaunchKernel),
// with its launch delay (GPU start − launch end, clipped at 0).
type LaunchHTA struct {
	Launches int   `json:"launches"`
	CPUNS    int64 `json:"cpu_ns"` // the launch calls' durations, summed
	GPUNS    int64 `json:"gpu_ns"` // the GPU events' durations, summed
	// ShortKernels: launch call at most 50 us and GPU event shorter than
	// it; RuntimeOutliers: launch call over 50 us; DelayOutliers: delay
	// over 100 us (HTA's runtime_cutoff and launch_delay_cutoff).
	ShortKernels    int           `json:"short_kernels"`
	RuntimeOutliers int           `json:"runtime_outliers"`
	DelayOutliers   int           `json:"delay_outliers"`
	Delay           DurationStats `json:"delay"`
}

// launchDelayBuckets are the upper bounds of the launch delay histogram.
var launchDelayBuckets = []int64{1_000, 2_000, 5_000, 10_000, 20_000, 50_000, 100_000, 200_000, 500_000, 1_000_000,
	2_000_000, 5_000_000, 10_000_000, -1}

// launchPart is what a window adds to the launch statistics.
type launchPart struct {
	hist      []int
	longCalls int
	steps     []StepLaunches
	hta       LaunchHTA
	htaDelays []int64
}

const (
	htaRuntimeCutoffNS = 50_000
	htaDelayCutoffNS   = 100_000
)

// launchStatsOf computes a window's part from its owned kernels and the
// steps it answers for.
func launchStatsOf(g *graph, steps []stepSpan, names *cpNames) launchPart {
	ev := g.ev
	p := launchPart{hist: make([]int, len(launchDelayBuckets))}
	p.steps = make([]StepLaunches, len(steps))
	for k, st := range steps {
		p.steps[k].Step = st.name
	}
	for _, i := range g.gpu {
		if !g.owned(i) {
			continue
		}
		l := g.launch[i]
		if l < 0 {
			continue
		}
		delay := max(ev.TS[i]-ev.End(int(l)), 0)
		call := ev.Dur[l]
		if ev.Kind[i] == kineto.KindKernel {
			b := 0
			for b < len(launchDelayBuckets)-1 && delay > launchDelayBuckets[b] {
				b++
			}
			p.hist[b]++
			if call > htaRuntimeCutoffNS {
				p.longCalls++
			}
			if k := stepOfHost(steps, ev.TS[l]); k >= 0 {
				s := &p.steps[k]
				s.Kernels++
				s.LaunchNS += call
				s.KernelNS += ev.Dur[i]
				if ev.Dur[i] < call {
					s.ShortKernels++
				}
			}
		}
		if htaLaunch(g, names, l) {
			h := &p.hta
			h.Launches++
			h.CPUNS += call
			h.GPUNS += ev.Dur[i]
			if call <= htaRuntimeCutoffNS && ev.Dur[i] < call {
				h.ShortKernels++
			}
			if call > htaRuntimeCutoffNS {
				h.RuntimeOutliers++
			}
			if delay > htaDelayCutoffNS {
				h.DelayOutliers++
			}
			p.htaDelays = append(p.htaDelays, delay)
		}
	}
	return p
}

// htaLaunch reports whether runtime event l is one of HTA's launch calls.
func htaLaunch(g *graph, names *cpNames, l int32) bool {
	if names.of(g.ev.Name[l])&cpLaunch == 0 {
		return false
	}
	switch g.t.Name(int(l)) {
	case "cudaLaunchKernel", "cudaLaunchKernelExC", "runFunction - job_prep_and_submit_for_execution",
		"cudaMemcpyAsync", "cudaMemsetAsync":
		return true
	}
	return false
}

// stepOfHost is the index of the step whose host span holds t, its end
// excluded (searchStep's, with the end), or -1.
func stepOfHost(steps []stepSpan, t int64) int {
	if k := searchStep(steps, t); k >= 0 && t < steps[k].hostE {
		return k
	}
	return -1
}

func (a *launchPart) add(b launchPart) {
	if a.hist == nil {
		a.hist = make([]int, len(launchDelayBuckets))
	}
	for k, v := range b.hist {
		a.hist[k] += v
	}
	a.longCalls += b.longCalls
	a.steps = append(a.steps, b.steps...)
	h, o := &a.hta, b.hta
	h.Launches += o.Launches
	h.CPUNS += o.CPUNS
	h.GPUNS += o.GPUNS
	h.ShortKernels += o.ShortKernels
	h.RuntimeOutliers += o.RuntimeOutliers
	h.DelayOutliers += o.DelayOutliers
	a.htaDelays = append(a.htaDelays, b.htaDelays...)
}

// finish writes the statistics into l.
func (a *launchPart) finish(l *Launch) {
	l.DelayHistogram = a.hist
	if l.DelayHistogram == nil {
		l.DelayHistogram = make([]int, len(launchDelayBuckets))
	}
	l.DelayBucketsNS = launchDelayBuckets
	l.LongCalls = a.longCalls
	l.Steps = a.steps
	if l.Steps == nil {
		l.Steps = []StepLaunches{}
	}
	for k := range l.Steps {
		s := &l.Steps[k]
		s.LaunchBound = s.LaunchNS > s.KernelNS
		if s.LaunchBound {
			l.LaunchBoundSteps++
		}
	}
	l.HTA = a.hta
	l.HTA.Delay = describeNS(a.htaDelays)
}
