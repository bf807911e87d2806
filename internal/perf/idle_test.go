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
	i := r.Idle
	if i.KernelWaitNS != 10_000 || i.HostWaitNS != 140_000 || i.OtherNS != 50_000 || i.Overlapping != 1 {
		t.Errorf("idle %+v", i)
	}
	if i.GPUSpanNS != 540_000 || i.BusyNS != 340_000 || i.IdleNS != 200_000 {
		t.Errorf("span %+v", i)
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
