package perf

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/ptscope/ptscope/internal/finding"
	"github.com/ptscope/ptscope/internal/kineto"
	"github.com/ptscope/ptscope/internal/kineto/gen"
)

// scenario writes a synthetic trace and reads it back.
func scenario(t testing.TB, s gen.Scenario) *kineto.Trace {
	t.Helper()
	var b bytes.Buffer
	if _, err := s.Write(&b); err != nil {
		t.Fatal(err)
	}
	tr, err := kineto.Read(context.Background(), &b, kineto.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tr.Path = "synthetic.pt.trace.json"
	return tr
}

func findingOf(fs []finding.Finding, id string) *finding.Finding {
	for i := range fs {
		if fs[i].ID == id {
			return &fs[i]
		}
	}
	return nil
}

// TestStepsFromOptimizerSteps: a trace recorded without prof.step() but
// with three Optimizer.step annotations is three steps, not one
// pseudo-step.
func TestStepsFromOptimizerSteps(t *testing.T) {
	r := Analyze(scenario(t, gen.Scenarios(0)["ddp1"]), Options{})
	if r.StepSource != StepsOptimizer || len(r.Steps) != 3 {
		t.Fatalf("source %s, %d steps", r.StepSource, len(r.Steps))
	}
	for i, s := range r.Steps {
		// numbered from 0, as analyze and bundles number steps
		if s.Number != i || s.Name != []string{"step 0", "step 1", "step 2"}[i] || s.Breakdown.Total() != s.DurationNS {
			t.Errorf("step %d: %+v", i, s)
		}
		// each step launched 6 forward and 6 backward kernels and the optimizer's
		if s.GPUEvents != 13 {
			t.Errorf("%s: %d GPU events, want 13", s.Name, s.GPUEvents)
		}
	}
	if r.Profiler.Schedule {
		t.Error("no ProfilerStep#N, yet a schedule")
	}
	if f := findingOf(r.Findings, "profiling-overhead"); f == nil || f.Severity != finding.Info {
		t.Errorf("a trace without a schedule: %+v", f)
	}
}

// checkWithStackSteps: the real with_stack fixture, three training steps
// recorded without a schedule (fixtures README).
func checkWithStackSteps(t *testing.T, tr *kineto.Trace) {
	r := Analyze(tr, Options{})
	if r.StepSource != StepsOptimizer || len(r.Steps) != 3 {
		t.Fatalf("source %s, %d steps", r.StepSource, len(r.Steps))
	}
	for _, s := range r.Steps {
		if s.GPUEvents == 0 || s.Breakdown.Total() != s.DurationNS {
			t.Errorf("%+v", s)
		}
	}
}

// TestStepsFromBundlePhases: without any step marker, the bundle's phases
// give the steps.
func TestStepsFromBundlePhases(t *testing.T) {
	s := gen.Scenarios(0)["ddp1"]
	tr := scenario(t, s)
	// drop the Optimizer.step annotations: no marker is left
	for i := 0; i < tr.Events.Len(); i++ {
		if n := tr.Name(i); len(n) > 15 && n[:15] == "Optimizer.step#" {
			tr.Events.Name[i] = 0
		}
	}
	if r := Analyze(tr, Options{}); r.StepSource != StepsWholeTrace || len(r.Steps) != 1 || r.Steps[0].Name != "trace" {
		t.Fatalf("without markers: %s, %d steps", r.StepSource, len(r.Steps))
	}
	// phases in Unix ns that cover the trace's first and second halves
	start, end := hostSpan(newGraph(tr), true)
	mid := (start + end) / 2
	b := tr.Meta.BaseTimeNS
	phases := []Phase{{"forward", 7, b + start, b + start + 10}, {"optimizer", 7, b + mid - 10, b + mid},
		{"forward", 8, b + mid, b + mid + 10}, {"optimizer", 8, b + end - 10, b + end}}
	r := Analyze(tr, Options{Phases: phases})
	if r.StepSource != StepsBundle || len(r.Steps) != 2 || r.Steps[0].Name != "step 7" || r.Steps[1].Number != 8 {
		t.Fatalf("bundle steps: %s %+v", r.StepSource, r.Steps)
	}
	if h := r.Steps[0].HostDurationNS; h != mid-start {
		t.Errorf("step 7 host %d, want %d", h, mid-start)
	}
}

// TestUtilizationComputeOnly: on an FSDP rank whose NCCL kernels run most of
// the time, utilisation is the union of compute kernels (not NCCL) and idle
// is its complement, mostly communication.
func TestUtilizationComputeOnly(t *testing.T) {
	s := gen.Scenarios(0)["fsdp"]
	s.DataLoaderNS = 0
	r := Analyze(scenario(t, s), Options{})
	var span int64
	for _, st := range r.Steps {
		span += st.DurationNS
	}
	// per step: forward and backward kernels (1x and 2x KernelNS per layer)
	// and the optimizer's, one after the other on one stream
	compute := int64(s.Steps) * (int64(s.Layers)*3*s.KernelNS + s.OptimizerNS)
	want := float64(compute) / float64(span)
	if math.Abs(r.GPUUtilizationRatio-want) > 1e-9 || r.Idle.ComputeNS != compute || r.Idle.SpanNS != span {
		t.Errorf("utilization %.4f (compute %d over %d), want %.4f (%d)", r.GPUUtilizationRatio, r.Idle.ComputeNS, r.Idle.SpanNS, want, compute)
	}
	if d := r.GPUUtilizationRatio + r.Idle.IdleRatio - 1; math.Abs(d) > 1e-12 {
		t.Errorf("utilization %.4f + idle %.4f != 1", r.GPUUtilizationRatio, r.Idle.IdleRatio)
	}
	i := r.Idle
	if i.IdleNS != i.CommunicationNS+i.CopyNS+i.HostWaitNS+i.KernelWaitNS+i.OtherNS {
		t.Errorf("idle parts do not sum: %+v", i)
	}
	if share(i.CommunicationNS, i.SpanNS) < 0.5 || r.GPUUtilizationRatio > 0.4 {
		t.Errorf("an FSDP rank waiting on NCCL: %+v", i)
	}
	// per step, the compute share is the step's utilisation
	for _, st := range r.Steps {
		if math.Abs(st.UtilizationRatio-share(st.Breakdown.KernelNS, st.DurationNS)) > 1e-9 {
			t.Errorf("%s: utilization %.4f, kernel share %.4f", st.Name, st.UtilizationRatio, share(st.Breakdown.KernelNS, st.DurationNS))
		}
	}
	f := findingOf(r.Findings, "low-gpu-utilization")
	if f == nil || f.Severity != finding.Critical || f.Numbers["communication_wait_ns"] != float64(i.CommunicationNS) {
		t.Errorf("low utilisation finding %+v", f)
	}
	if len(r.GPUs) != 1 || r.GPUs[0].Streams != 2 || r.PrimaryDevice != 0 {
		t.Errorf("gpus %+v", r.GPUs)
	}
}

// TestDataLoaderOneDefinition: the breakdown's DataLoader part, the phases'
// data loading, the rank's share and the finding are one number.
func TestDataLoaderOneDefinition(t *testing.T) {
	s := gen.Scenarios(0)["dataloader"]
	r := Analyze(scenario(t, s), Options{})
	var dl, tot int64
	for _, st := range r.Steps {
		if st.Breakdown.DataLoaderNS != st.Phases.DataLoadingNS {
			t.Errorf("%s: breakdown %d, phases %d", st.Name, st.Breakdown.DataLoaderNS, st.Phases.DataLoadingNS)
		}
		dl += st.Breakdown.DataLoaderNS
		tot += st.DurationNS
	}
	// the GPU idles while the host loads: all DataLoader time is exposed
	if want := int64(s.Steps)*s.DataLoaderNS + s.SlowSteps[7]; dl != want {
		t.Errorf("DataLoader %d ns, want %d", dl, want)
	}
	if r.DataLoaderRatio != share(dl, tot) || r.AveragePhases.DataLoadingNS != r.AverageBreakdown.DataLoaderNS {
		t.Errorf("share %.4f, want %.4f", r.DataLoaderRatio, share(dl, tot))
	}
	f := findingOf(r.Findings, "dataloader")
	if f == nil || f.Numbers["dataloader_ratio"] != r.DataLoaderRatio || f.Severity != costSeverity(r.DataLoaderRatio) || f.Severity != finding.Critical {
		t.Errorf("finding %+v (share %.3f)", f, r.DataLoaderRatio)
	}
	// step 8 waited 12 ms more for data: the slowest and the only outlier
	if r.SlowestStep != 7 || len(r.OutlierSteps) != 1 || r.OutlierSteps[0] != 7 || r.Steps[7].Name != "ProfilerStep#8" {
		t.Errorf("slowest %d, outliers %v", r.SlowestStep, r.OutlierSteps)
	}
}

// TestNCCLFindingNeedsRanks: DDP at world size 1 launches no NCCL kernel even
// with the NCCL backend: no "use NCCL" finding; with gloo at world size 2 it
// is one.
func TestNCCLFindingNeedsRanks(t *testing.T) {
	s := gen.Scenarios(0)["ddp1"]
	if r := Analyze(scenario(t, s), Options{}); findingOf(r.Findings, "use-nccl") != nil {
		t.Errorf("world size 1 with NCCL: %+v", r.Findings)
	}
	// gloo collectives run on the host: no NCCL kernel
	s.Backend, s.WorldSize = "gloo", 2
	r := Analyze(scenario(t, s), Options{})
	if f := findingOf(r.Findings, "use-nccl"); f == nil || f.Severity != finding.Warning || f.Numbers["world_size"] != 2 {
		t.Errorf("gloo at world size 2: %+v", r.Findings)
	}
	// no distributedInfo, but gloo collectives in the trace
	s.Backend, s.Gloo = "", true
	if r := Analyze(scenario(t, s), Options{}); findingOf(r.Findings, "use-nccl") == nil {
		t.Errorf("gloo ops without distributedInfo: %+v", r.Findings)
	}
	// nothing tells the backend
	s.Comm = gen.CommNone
	if r := Analyze(scenario(t, s), Options{}); findingOf(r.Findings, "use-nccl") != nil {
		t.Errorf("no evidence of another backend: %+v", r.Findings)
	}
}
func TestCostSeverity(t *testing.T) {
	for _, c := range []struct {
		cost float64
		want finding.Severity
	}{{0, finding.Info}, {0.049, finding.Info}, {0.05, finding.Warning}, {0.2499, finding.Warning}, {0.25, finding.Critical}, {0.9, finding.Critical}} {
		if got := costSeverity(c.cost); got != c.want {
			t.Errorf("costSeverity(%g) = %s, want %s", c.cost, got, c.want)
		}
	}
}

// TestCrossRankSynthetic: two FSDP ranks, the second loading its data
// 2.7 ms slower every step: every collective matched, rank 1 joins each
// last, and the step time differs by that much.
func TestCrossRankSynthetic(t *testing.T) {
	var traces []*kineto.Trace
	for r := 1; r >= 0; r-- {
		tr := scenario(t, gen.Scenarios(r)["fsdp"])
		traces = append(traces, tr)
	}
	rep := AnalyzeTraces(traces, Options{})
	c := rep.CrossRank
	if len(rep.Ranks) != 2 || rep.Ranks[0].Rank != 0 || c == nil {
		t.Fatalf("ranks %d, cross %v", len(rep.Ranks), c)
	}
	// 8 layers: 8 all-gathers forward, 8 backward, 8 reduce-scatters, 6 steps
	if len(c.Collectives) != 6*24 || c.Straggler != 1 || c.Ranks[1].LateArrivals != 6*24 || c.Ranks[0].LateArrivals != 0 {
		t.Errorf("collectives %d, straggler %d, ranks %+v", len(c.Collectives), c.Straggler, c.Ranks)
	}
	if d := rep.Ranks[1].AverageStepNS - rep.Ranks[0].AverageStepNS; d != 2_700_000 || c.MaxSkewNS != d {
		t.Errorf("step time differs by %d, max skew %d; want 2.7 ms", d, c.MaxSkewNS)
	}
	if findingOf(rep.Findings, "straggler") == nil {
		t.Errorf("findings %+v", rep.Findings)
	}
	if f := findingOf(rep.Findings, "rank-skew"); f == nil || f.Severity != costSeverity(2.7/float64(rep.Ranks[1].AverageStepNS)*1e6) || *f.At.Rank != 1 {
		t.Errorf("rank skew %+v", f)
	}
	for _, r := range rep.Ranks {
		for _, f := range r.Findings {
			if f.At == nil || f.At.Rank == nil || *f.At.Rank != r.Rank {
				t.Errorf("rank %d finding %s at %+v", r.Rank, f.ID, f.At)
			}
		}
	}
}

// TestOverheadFinding: measured overhead warns from 10%; unmeasured, the
// options that cost step time are named as info; light profiling says nothing.
func TestOverheadFinding(t *testing.T) {
	for _, c := range []struct {
		name string
		r    Rank
		want finding.Severity
		none bool
		says string
	}{
		{"measured", Rank{Profiler: Profiler{RecordShapes: true, Schedule: true}, Overhead: &Overhead{ProfiledStepNS: 73e6, UnprofiledStepNS: 40e6, UnprofiledSteps: []int{4, 5}, SlowdownRatio: 0.825}},
			finding.Warning, false, "82.5% more than"},
		{"measured small", Rank{Profiler: Profiler{WithStack: true, Schedule: true}, Overhead: &Overhead{ProfiledStepNS: 41e6, UnprofiledStepNS: 40e6, SlowdownRatio: 0.025}},
			0, true, ""},
		{"with_stack", Rank{Profiler: Profiler{WithStack: true, Schedule: true, PythonFunctionEvents: 8378}}, finding.Info, false, "8,378 python_function events"},
		{"shapes and memory", Rank{Profiler: Profiler{RecordShapes: true, ProfileMemory: true, Schedule: true}}, finding.Info, false, "record_shapes=True, profile_memory=True"},
		{"no schedule", Rank{Profiler: Profiler{}}, finding.Info, false, "without a profiler schedule"},
		{"light", Rank{Profiler: Profiler{RecordShapes: true, Schedule: true}}, 0, true, ""},
	} {
		f, ok := overheadFinding(&c.r)
		if ok == c.none {
			t.Errorf("%s: finding %v, want %v", c.name, ok, !c.none)
			continue
		}
		if ok && (f.Severity != c.want || !strings.Contains(f.Message, c.says) || f.Recommendation == "" || f.ID != "profiling-overhead") {
			t.Errorf("%s: %+v", c.name, f)
		}
	}
}

// TestNoNullLists: every list of the document is [] when empty, never null.
func TestNoNullLists(t *testing.T) {
	tr, err := kineto.Read(context.Background(), strings.NewReader(`[{"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 5, "dur": 1}]`), kineto.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(Compare([]*Rank{Analyze(tr, Options{})}))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte("null")) {
		t.Errorf("null in %s", b)
	}
}
