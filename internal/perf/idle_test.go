package perf

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/ptscope/ptscope/internal/kineto"
)

// synthetic builds a trace from (launch start us, kernel start us, kernel dur us) triples on one stream.
func synthetic(t *testing.T, ks [][3]float64) *kineto.Trace {
	t.Helper()
	var ev []string
	ev = append(ev, `{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 1000, "args": {"External id": 1}}`)
	for i, k := range ks {
		ev = append(ev, fmt.Sprintf(`{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": %g, "dur": 1, "args": {"correlation": %d}}`, k[0], 100+i))
		ev = append(ev, fmt.Sprintf(`{"ph": "X", "cat": "kernel", "name": "k%d", "pid": 0, "tid": 7, "ts": %g, "dur": %g, "args": {"correlation": %d, "device": 0, "stream": 7, "blocks per SM": 0.5, "est. achieved occupancy %%": 40}}`, i, k[1], k[2], 100+i))
	}
	tr, err := kineto.Read(context.Background(), strings.NewReader(`{"traceEvents": [`+strings.Join(ev, ",\n")+`]}`), kineto.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func TestIdleRules(t *testing.T) {
	tr := synthetic(t, [][3]float64{
		{0, 10, 100},    // 10..110
		{20, 120, 50},   // gap 10 us, launched early: kernel wait
		{300, 310, 40},  // gap 140 us, launched at 300 > 170: host wait
		{330, 400, 100}, // gap 50 us, launched early, >= 30 us: other
		{340, 450, 100}, // overlaps the previous kernel (450 < 500)
	})
	r := Analyze(tr, Options{})
	// the step spans the host's 1000 us; compute covers 340 us of it
	i := r.Idle
	if i.SpanNS != 1_000_000 || i.ComputeNS != 340_000 || i.IdleNS != 660_000 || i.IdleRatio != 0.66 {
		t.Errorf("span %+v", i)
	}
	// 0..10 and 110..120: launched before the gap, under 30 us: kernel wait;
	// 170..310: launched at 300: host wait; 350..400: launched early, 50 us:
	// other; 550..1000: nothing more was launched: host wait
	if i.KernelWaitNS != 20_000 || i.HostWaitNS != 140_000+450_000 || i.OtherNS != 50_000 || i.CommunicationNS != 0 || i.CopyNS != 0 {
		t.Errorf("idle %+v", i)
	}
	if d := r.GPUUtilizationRatio + i.IdleRatio - 1; d > 1e-12 || d < -1e-12 {
		t.Errorf("utilization %.4f + idle %.4f != 1", r.GPUUtilizationRatio, i.IdleRatio)
	}
	// launch delays: 10-1, 120-21, 310-301, 400-331, 450-341 us
	if l := r.Launch; l.Launches != 5 || l.MaxDelayNS != 109_000 || l.P50DelayNS != 69_000 || l.LongDelays != 1 {
		t.Errorf("launch %+v", l)
	}
	// one step of 1000 us (host) with GPU work ending at 550 us
	if len(r.Steps) != 1 || r.Steps[0].DurationNS != 1_000_000 || r.Steps[0].Breakdown.KernelNS != 340_000 {
		t.Errorf("steps %+v", r.Steps)
	}
	// SM efficiency: min(Σ blocks per SM, 1) = 0.5 alone, 1.0 during the overlap (450..500)
	want := (0.5*(340_000-50_000) + 1.0*50_000) / 1_000_000
	if d := r.SMEfficiencyRatio - want; d > 1e-9 || d < -1e-9 {
		t.Errorf("sm efficiency %.6f, want %.6f", r.SMEfficiencyRatio, want)
	}
	if r.AchievedOccupancyRatio < 0.3999 || r.AchievedOccupancyRatio > 0.4001 {
		t.Errorf("occupancy %.4f", r.AchievedOccupancyRatio)
	}
}

func TestTensorCoreNames(t *testing.T) {
	for name, want := range map[string]bool{
		"sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma_aligna4_alignc4_execute_kernel_trt":    false,
		"void cutlass::Kernel2<cutlass_80_simt_sgemm_128x256_8x4_nt_align1>(cutlass_80_simt_sgemm_128x256_8x4_nt_align1::Params)": false,
		"ampere_sgemm_128x64_tn": false,
		"sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x32_stage4_warpsize2x2x1_tensor16x8x16_kernel":                  true,
		"sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas": true,
		"sm80_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x16_stage4_warpsize2x2x1_tensor16x8x8_kernel":                     true,
		"ampere_fp16_s16816gemm_fp16_128x128_ldg8_f2f_stages_32x5_tn":                                                            true,
		"void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_32x6_tn_align8>(...)":                         true,
		"nvjet_tst_128x256_64x4_2x1_v_bz_coopA_TNT":                                                                              true,
		"void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t, ...>>":                true,
		"fmha_cutlassB_f32_aligned_64x64_k64_dropout_sm80(PyTorchMemEffAttention::AttentionBackwardKernel<...>)":                 false,
		"void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, ...>":                             false,
		"volta_h884gemm_64x64_ldg8_nn": true,
	} {
		if got := IsTensorCoreKernel(name); got != want {
			t.Errorf("IsTensorCoreKernel(%.60q) = %v, want %v", name, got, want)
		}
	}
}

// TestLegacyTrace: a 2022-style trace (integer µs, capitalised categories,
// async_cpu_to_gpu flows) whose kernel carries External id == correlation
// (kineto#782); the launch's External id must win.
func TestLegacyTrace(t *testing.T) {
	in := `[
	{"ph": "X", "cat": "Operator", "name": "ProfilerStep#7", "pid": 1, "tid": 1, "ts": 1669783687000000, "dur": 200, "args": {"External id": 1}},
	{"ph": "X", "cat": "Operator", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1669783687000010, "dur": 50, "args": {"External id": 5}},
	{"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 1669783687000020, "dur": 5, "args": {"External id": 5, "correlation": 7}},
	{"ph": "X", "cat": "Operator", "name": "aten::add", "pid": 1, "tid": 1, "ts": 1669783687000070, "dur": 20, "args": {"External id": 7}},
	{"ph": "X", "cat": "Kernel", "name": "volta_sgemm_128x64_nn", "pid": 0, "tid": "stream 7", "ts": 1669783687000100, "dur": 30, "args": {"External id": 7, "correlation": 7, "device": 0, "stream": 7}},
	{"ph": "X", "cat": "Memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "pid": 0, "tid": "stream 7", "ts": 1669783687000140, "dur": 10, "args": {"device": 0, "stream": 7, "bytes": 4096}},
	{"ph": "s", "id": 7, "pid": 1, "tid": 1, "ts": 1669783687000020, "cat": "async_cpu_to_gpu", "name": "async_gpu"},
	{"ph": "f", "id": 7, "pid": 0, "tid": "stream 7", "ts": 1669783687000100, "cat": "async_cpu_to_gpu", "name": "async_gpu", "bp": "e"}
	]`
	tr, err := kineto.Read(context.Background(), strings.NewReader(in), kineto.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := Analyze(tr, Options{})
	ops := map[string]Operator{}
	for _, o := range r.Operators {
		ops[o.Name] = o
	}
	if ops["aten::mm"].DeviceSelfNS != 30_000 || ops["aten::add"].DeviceSelfNS != 0 {
		t.Errorf("device self mm %d add %d", ops["aten::mm"].DeviceSelfNS, ops["aten::add"].DeviceSelfNS)
	}
	if ops["aten::mm"].HostSelfNS != 45_000 {
		t.Errorf("host self mm %d", ops["aten::mm"].HostSelfNS)
	}
	if len(r.Steps) != 1 || r.Steps[0].Name != "ProfilerStep#7" || r.Steps[0].DurationNS != 200_000 || r.Steps[0].Breakdown.Total() != 200_000 {
		t.Fatalf("steps %+v", r.Steps)
	}
	b := r.Steps[0].Breakdown
	if b.KernelNS != 30_000 || b.MemcpyNS != 10_000 || b.RuntimeNS != 5_000 {
		t.Errorf("breakdown %+v", b)
	}
	found := false
	for _, f := range r.Findings {
		found = found || f.ID == "pageable-copies"
	}
	if !found {
		t.Errorf("pageable copy not flagged: %+v", r.Findings)
	}
}
