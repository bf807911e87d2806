package perf

import (
	"fmt"
	"slices"
	"strings"

	"github.com/ptscope/ptscope/internal/finding"
	"github.com/ptscope/ptscope/internal/units"
)

// profilingOverhead compares the trace's average step with the same run's
// unprofiled steps from the bundle's phases: a step's time there runs from
// its first phase's start to the next step's. Unprofiled steps are those
// whose time does not touch the trace's span (so neither the steps the
// profiler warmed up in nor the one that exported the trace count), except
// the first step, which carries the run's start-up. It needs two of them.
func profilingOverhead(r *Rank, phases []Phase, base int64, f *Facts) *Overhead {
	if len(phases) == 0 || r.AverageStepNS <= 0 {
		return nil
	}
	if f.spanS > f.spanE {
		return nil
	}
	ts, te := base+f.spanS, base+f.spanE
	start := map[int]int64{}
	for _, p := range phases {
		if s, ok := start[p.Step]; !ok || p.StartTimeNS < s {
			start[p.Step] = p.StartTimeNS
		}
	}
	nums := make([]int, 0, len(start))
	for n := range start {
		nums = append(nums, n)
	}
	slices.Sort(nums)
	var durs []int64
	o := &Overhead{ProfiledStepNS: r.AverageStepNS, UnprofiledSteps: []int{}}
	for k := 1; k+1 < len(nums); k++ {
		n := nums[k]
		if nums[k+1] != n+1 {
			continue
		}
		s, e := start[n], start[n+1]
		if e >= ts && s <= te {
			continue
		}
		durs = append(durs, e-s)
		o.UnprofiledSteps = append(o.UnprofiledSteps, n)
	}
	if len(durs) < 2 {
		return nil
	}
	slices.Sort(durs)
	o.UnprofiledStepNS = durs[len(durs)/2]
	if len(durs)%2 == 0 {
		o.UnprofiledStepNS = (durs[len(durs)/2-1] + durs[len(durs)/2]) / 2
	}
	o.SlowdownRatio = float64(o.ProfiledStepNS)/float64(o.UnprofiledStepNS) - 1
	return o
}

// overheadFinding says when the profiler's own options inflate the step
// times the trace shows: measured against unprofiled steps when a bundle
// gives them (a warning from 10% slower), else (info) which options cost
// time. The run itself is not slower; its trace overstates host time.
func overheadFinding(r *Rank) (finding.Finding, bool) {
	p := r.Profiler
	var opts []string
	if p.WithStack {
		opts = append(opts, "with_stack=True")
	}
	if p.RecordShapes {
		opts = append(opts, "record_shapes=True")
	}
	if p.ProfileMemory {
		opts = append(opts, "profile_memory=True")
	}
	rec := "For step timings, profile with record_shapes=False, profile_memory=False and with_stack=False (turn each on only for the view that needs it), and with schedule(wait=1, warmup=1, active=3) so that warm-up steps are not recorded."
	if len(opts) == 0 {
		rec = "Profile with schedule(wait=1, warmup=1, active=3) so that warm-up steps are not recorded."
	}
	if o := r.Overhead; o != nil {
		if o.SlowdownRatio < 0.10 {
			return finding.Finding{}, false
		}
		what := "the profiler"
		if len(opts) > 0 {
			what = "the profiler (" + strings.Join(opts, ", ") + ")"
		}
		return finding.Finding{ID: "profiling-overhead", Severity: finding.Warning,
			Numbers: finding.Numbers{"profiled_step_ns": float64(o.ProfiledStepNS), "unprofiled_step_ns": float64(o.UnprofiledStepNS), "slowdown_ratio": o.SlowdownRatio},
			Message: fmt.Sprintf("Profiled steps take %s on average, %s more than the same run's unprofiled steps (%s, median of %d): %s inflates the times this trace shows, host time most.",
				units.Duration(o.ProfiledStepNS), pct(o.SlowdownRatio), units.Duration(o.UnprofiledStepNS), len(o.UnprofiledSteps), what),
			Recommendation: rec, At: &finding.Ref{View: "steps"}}, true
	}
	heavy := p.WithStack || (p.RecordShapes && p.ProfileMemory) || !p.Schedule
	if !heavy {
		return finding.Finding{}, false
	}
	var why []string
	if len(opts) > 0 {
		why = append(why, "with "+strings.Join(opts, ", "))
	}
	if !p.Schedule {
		why = append(why, "without a profiler schedule (no ProfilerStep#N: warm-up steps are recorded too)")
	}
	msg := fmt.Sprintf("This trace was recorded %s, which slows the profiled steps (host time most); step times here overstate the unprofiled run.", strings.Join(why, " and "))
	if p.WithStack && p.PythonFunctionEvents > 0 {
		msg += fmt.Sprintf(" with_stack's Python tracer added %s python_function events.", units.Count(int64(p.PythonFunctionEvents)))
	}
	return finding.Finding{ID: "profiling-overhead", Severity: finding.Info,
		Numbers: finding.Numbers{"python_function_events": float64(p.PythonFunctionEvents)},
		Message: msg, Recommendation: rec, At: &finding.Ref{View: "steps"}}, true
}
