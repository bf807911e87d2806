package perf

import (
	"context"
	"math"
	"testing"

	"github.com/ptscope/ptscope/internal/finding"
	"github.com/ptscope/ptscope/internal/kineto"
	"github.com/ptscope/ptscope/internal/testfixture"
)

// fixture returns the path of a shared fixture (skips when absent).
func fixture(t testing.TB, name string) string { return testfixture.Path(t, name) }

const gpt2Trace = "gpt2_6l_dataloader_bottleneck.pt.trace.json.gz"

func readTrace(t testing.TB, name string) *kineto.Trace {
	t.Helper()
	tr, err := kineto.ReadFile(context.Background(), fixture(t, name), kineto.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func within(got, want int64, rel float64) bool {
	return math.Abs(float64(got-want)) <= rel*float64(want)
}

// TestSharedTraceFixtures checks the analysis against the ground truth of
// the real traces in ../shared/fixtures (skipped, once, without them): each
// fixture is read once and its facts checked in subtests.
func TestSharedTraceFixtures(t *testing.T) {
	tr := readTrace(t, gpt2Trace)
	t.Run("key_averages", func(t *testing.T) { checkKeyAverages(t, tr) })
	t.Run("steps_and_findings", func(t *testing.T) { checkStepsAndFindings(t, tr) })
	t.Run("user_ranges", func(t *testing.T) { checkUserRanges(t, tr) })
	t.Run("step_start_memory", func(t *testing.T) { checkStepStartMemory(t, tr) })
	t.Run("with_stack_steps", func(t *testing.T) { checkWithStackSteps(t, readTrace(t, "gpt2tiny_with_stack.pt.trace.json")) })
}

// checkKeyAverages checks the operator and kernel tables against
// prof.key_averages() printed in the training process (fixtures README).
func checkKeyAverages(t *testing.T, tr *kineto.Trace) {
	r := Analyze(tr, Options{Annotations: true})
	ops := map[string]Operator{}
	for _, o := range r.Operators {
		ops[o.Name] = o
	}
	for _, c := range []struct {
		name                         string
		calls                        int
		devSelf, devTotal, hostTotal int64 // ns; -1: not printed
	}{
		{"aten::mm", 153, 98_968_000, 98_968_000, 8_817_000},
		{"ProfilerStep*", 3, 0, 64_236_000, 121_576_000},
		{"AddmmBackward0", 72, 0, 45_020_000, 10_353_000},
		{"aten::addmm", 72, 23_483_000, 23_483_000, 3_954_000},
	} {
		o, ok := ops[c.name]
		if !ok {
			t.Errorf("%s: missing", c.name)
			continue
		}
		if o.Calls != c.calls {
			t.Errorf("%s: %d calls, want %d", c.name, o.Calls, c.calls)
		}
		if !within(o.DeviceSelfNS, c.devSelf, 0.005) {
			t.Errorf("%s: device self %d, want %d", c.name, o.DeviceSelfNS, c.devSelf)
		}
		if !within(o.DeviceTotalNS, c.devTotal, 0.005) {
			t.Errorf("%s: device total %d, want %d", c.name, o.DeviceTotalNS, c.devTotal)
		}
		if !within(o.HostTotalNS, c.hostTotal, 0.005) {
			t.Errorf("%s: host total %d, want %d", c.name, o.HostTotalNS, c.hostTotal)
		}
	}
	ks := map[string]Kernel{}
	for _, k := range r.Kernels {
		ks[k.Name[:min(40, len(k.Name))]] = k
	}
	for _, c := range []struct {
		prefix string
		calls  int
		total  int64
	}{
		{"sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_til", 99, 48_874_000},
		{"void cutlass::Kernel2<cutlass_80_simt_sg", 0, 0},
	} {
		_ = c
	}
	var gemmTN, simt128, simt256nt Kernel
	for _, k := range r.Kernels {
		switch {
		case len(k.Name) > 60 && k.Name[:60] == "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8_stag":
			gemmTN = k
		case len(k.Name) > 50 && k.Name[:50] == "void cutlass::Kernel2<cutlass_80_simt_sgemm_128x25":
			simt128 = k
		case len(k.Name) > 60 && k.Name[:60] == "void cutlass::Kernel2<cutlass_80_simt_sgemm_256x128_8x4_nt_a":
			simt256nt = k
		}
	}
	for _, c := range []struct {
		k     Kernel
		calls int
		total int64
	}{{gemmTN, 99, 48_874_000}, {simt128, 27, 27_463_000}, {simt256nt, 72, 19_666_000}} {
		if c.k.Calls != c.calls || !within(c.k.TotalNS, c.total, 0.005) {
			t.Errorf("kernel %.50s: %d calls %d ns, want %d calls %d ns", c.k.Name, c.k.Calls, c.k.TotalNS, c.calls, c.total)
		}
		if c.k.TensorCore {
			t.Errorf("kernel %.50s is fp32, not tensor core", c.k.Name)
		}
	}
	// Self CUDA time total: 195.213 ms
	var all int64
	for _, k := range r.Kernels {
		all += k.TotalNS
	}
	for _, c := range r.Copies {
		all += c.TotalNS
	}
	if !within(all, 195_213_000, 0.005) {
		t.Errorf("GPU time %d, want 195.213 ms", all)
	}
	_ = ks
}

func checkStepsAndFindings(t *testing.T, tr *kineto.Trace) {
	r := Analyze(tr, Options{})
	if len(r.Steps) != 3 {
		t.Fatalf("%d steps, want 3", len(r.Steps))
	}
	hostMS := []int64{36_816_924, 41_127_070, 43_632_459} // ProfilerStep#2..4 host spans
	for i, st := range r.Steps {
		if st.Name != []string{"ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"}[i] {
			t.Errorf("step %d name %s", i, st.Name)
		}
		if st.HostDurationNS != hostMS[i] {
			t.Errorf("%s host %d, want %d", st.Name, st.HostDurationNS, hostMS[i])
		}
		if st.DurationNS < st.HostDurationNS-hostMS[i]/2 {
			t.Errorf("%s: duration %d", st.Name, st.DurationNS)
		}
		if got := st.Breakdown.Total(); got != st.DurationNS {
			t.Errorf("%s: breakdown sums to %d, want %d", st.Name, got, st.DurationNS)
		}
		p := st.Phases
		if got := p.ForwardNS + p.BackwardNS + p.OptimizerNS + p.DataLoadingNS + p.OtherNS; got != st.DurationNS {
			t.Errorf("%s: phases sum to %d, want %d", st.Name, got, st.DurationNS)
		}
		for _, part := range st.Breakdown.Parts() {
			if part.NS < 0 {
				t.Errorf("%s: %s negative", st.Name, part.Name)
			}
		}
		t.Logf("%s dur %.2f ms host %.2f ms: %+v phases %+v util %.3f", st.Name, float64(st.DurationNS)/1e6, float64(st.HostDurationNS)/1e6, st.Breakdown, st.Phases, st.UtilizationRatio)
	}
	// data loading: 5.65, 5.15, 6.78 ms of the DataLoader spans lie in the steps
	// (5.65+5.15+6.78 ms of 121.576 ms host step time = 14.5%)
	if dl := r.HostDataLoaderRatio; math.Abs(dl-17.58/121.576) > 0.002 {
		t.Errorf("host DataLoader share %.4f, want %.4f", dl, 17.58/121.576)
	}
	// the GPU is the bottleneck (util 98%): the device-aware breakdown hides the DataLoader
	if r.DataLoaderRatio > 0.01 {
		t.Errorf("breakdown DataLoader share %.4f", r.DataLoaderRatio)
	}
	ids := map[string]finding.Finding{}
	for _, f := range r.Findings {
		ids[f.ID] = f
		t.Logf("%s %s: %s", f.Severity, f.ID, f.Message)
	}
	if _, ok := ids["dataloader"]; !ok {
		t.Error("DataLoader bottleneck not flagged")
	}
	if _, ok := ids["no-tensor-cores"]; !ok {
		t.Error("missing tensor cores not flagged")
	}
	if r.TensorCoreRatio != 0 {
		t.Errorf("tensor core ratio %.3f in an fp32 run", r.TensorCoreRatio)
	}
	if r.GPUUtilizationRatio <= 0 || r.GPUUtilizationRatio > 1 || r.SMEfficiencyRatio <= 0 || r.SMEfficiencyRatio > r.GPUUtilizationRatio+1e-9 {
		t.Errorf("util %.3f sm eff %.3f", r.GPUUtilizationRatio, r.SMEfficiencyRatio)
	}
	if r.AchievedOccupancyRatio <= 0 || r.AchievedOccupancyRatio > 1 {
		t.Errorf("occupancy %.3f", r.AchievedOccupancyRatio)
	}
	t.Logf("util %.3f sm %.3f occ %.3f tcElig %.3f var %.3f", r.GPUUtilizationRatio, r.SMEfficiencyRatio, r.AchievedOccupancyRatio, r.TensorCoreEligibleRatio, r.StepTimeVariationRatio)
	t.Logf("idle %+v", r.Idle)
	t.Logf("launch %+v", r.Launch)
	t.Logf("copies %+v", r.Copies)
	t.Logf("syncs %+v", r.Syncs)
	t.Logf("mem peak %d reserved %d devices %d", r.Memory.PeakAllocatedBytes, r.Memory.PeakReservedBytes, len(r.Memory.Devices))
	for _, d := range r.Memory.Devices {
		t.Logf("  %s peak %d at %d, %d pts", d.Device, d.PeakAllocatedBytes, d.PeakAllocatedTimeNS, len(d.Curve))
	}
}

func checkUserRanges(t *testing.T, tr *kineto.Trace) {
	r := Analyze(tr, Options{})
	got := map[string]Operator{}
	for _, u := range r.UserRanges {
		got[u.Name] = u
	}
	// record_function("forward"/"backward"/"optimizer") around each of the 3 steps, and the DataLoader spans
	for _, n := range []string{"forward", "backward", "optimizer", "Optimizer.step#AdamW.step", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"} {
		if got[n].Calls != 3 {
			t.Errorf("%s: %d calls, want 3", n, got[n].Calls)
		}
	}
	// 5.65 + 5.15 + 6.78 ms of DataLoader (fixtures README)
	if d := got["enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"].HostTotalNS; !within(d, 17_580_000, 0.005) {
		t.Errorf("DataLoader host total %d", d)
	}
	if _, ok := got["ProfilerStep#2"]; ok {
		t.Error("ProfilerStep listed as a user range")
	}
	// backward() launches its kernels from the autograd thread while the range is open
	f, b := got["forward"].DeviceTotalNS, got["backward"].DeviceTotalNS
	if f <= 0 || b <= f {
		t.Errorf("device time forward %d backward %d", f, b)
	}
}

func checkStepStartMemory(t *testing.T, tr *kineto.Trace) {
	r := Analyze(tr, Options{})
	// the recording starts with ProfilerStep#2: no [memory] event precedes it
	if r.Steps[0].StartAllocatedBytes != -1 {
		t.Errorf("first step: %d", r.Steps[0].StartAllocatedBytes)
	}
	for _, s := range r.Steps[1:] {
		// between steps the model, gradients (set_to_none) and AdamW state stay: about 1.9 GB
		if s.StartAllocatedBytes < 1<<30 || s.StartAllocatedBytes > r.Memory.PeakAllocatedBytes {
			t.Errorf("%s starts with %d B allocated (peak %d)", s.Name, s.StartAllocatedBytes, r.Memory.PeakAllocatedBytes)
		}
	}
	for _, f := range r.Findings {
		if f.ID == "memory-growth" {
			t.Errorf("steady training flagged: %s", f.Message)
		}
	}
	grow := []Step{{StartAllocatedBytes: 100 << 20}, {StartAllocatedBytes: 102 << 20}, {StartAllocatedBytes: 104 << 20}}
	if g, ok := memoryGrowth(grow); !ok || g != 4<<20 {
		t.Errorf("growth %d %v", g, ok)
	}
	if _, ok := memoryGrowth(append(grow, Step{StartAllocatedBytes: 104 << 20})); ok {
		t.Error("flat step counted as growth")
	}
}
