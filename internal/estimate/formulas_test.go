package estimate

import (
	"math"
	"strings"
	"testing"
)

// Published parameter counts (model cards / Hugging Face safetensors totals).
func TestPresetParams(t *testing.T) {
	for _, c := range []struct {
		name string
		want int64
	}{
		{"gpt2", 124439808},
		{"gpt2-medium", 354823168},
		{"gpt2-large", 774030080},
		{"gpt2-xl", 1557611200},
		{"lm-small", 124439808},
		{"lm-2.7B", 2648931840}, // examples/transformer_lm.py --model-size 2.7B (its parameter count in testdata)
		{"llama2-7b", 6738415616},
		{"llama3-8b", 8030261248},
		{"llama3-70b", 70553706496},
		{"mixtral-8x7b", 46702792704},
	} {
		m, err := Preset(c.name)
		if err != nil {
			t.Fatal(err)
		}
		if got := m.Params(); got != c.want {
			t.Errorf("%s: %d params, want %d", c.name, got, c.want)
		}
	}
	m, _ := Preset("mixtral-8x7b")
	if got := m.ActiveParams(); got != 12879925248 { // "12.9B active parameters"
		t.Errorf("mixtral active params %d, want 12879925248", got)
	}
}

// perParam returns the model-state bytes per parameter of the most loaded rank, split into the
// paper's categories.
func perParam(t *testing.T, m Model, s Setup) (params, grads, master, gradCopy, opt float64) {
	t.Helper()
	r, err := Estimate(m, s, DefaultDevice())
	if err != nil {
		t.Fatal(err)
	}
	ms := r.Top().ModelStates
	n := float64(r.Params)
	return float64(ms.ParametersBytes) / n, float64(ms.GradientsBytes) / n, float64(ms.MasterWeightsBytes) / n,
		float64(ms.FP32GradCopyBytes) / n, float64(ms.OptimizerStateBytes) / n
}

// bigModel has 2 MiB-aligned tensors, so allocator rounding is negligible (~7.3B params).
func bigModel() Model {
	return Model{Name: "zero-example", Layers: 36, Hidden: 4096, Heads: 32, FFN: 16384, Vocab: 50304, SeqMax: 2048,
		MLP: "gelu", Norm: "layernorm", Bias: true, TiedEmbeddings: true}
}

// ZeRO (Rajbhandari et al. 2019, Figure 1): Psi = 7.5B, N_d = 64, mixed-precision Adam, K = 12:
// baseline 120 GB, P_os 31.4 GB, P_os+g 16.6 GB, P_os+g+p 1.9 GB. The paper's K = 12 is the fp32
// master weights plus the two Adam moments; it does not count the fp32 gradient copy real
// optimizers make from fp16 gradients (DeepSpeed's and Megatron's estimators do), so that
// term is left out of this comparison.
func TestZeROPaperExample(t *testing.T) {
	want := []float64{120, 31.4, 16.6, 1.9}
	for stage := 0; stage <= 3; stage++ {
		s := DefaultSetup()
		s.Seq, s.DType, s.MasterWeights, s.DP, s.Zero, s.Optimizer = 1024, FP16True, true, 64, stage, Adam
		p, g, mw, gc, o := perParam(t, bigModel(), s)
		if gc == 0 {
			t.Errorf("stage %d: fp16 gradients with fp32 master weights should add an fp32 gradient copy", stage)
		}
		gb := (p + g + mw + o) * 7.5 // GB for 7.5e9 parameters
		if math.Abs(gb-want[stage]) > 0.05 {
			t.Errorf("stage %d: %.2f GB for 7.5B params, paper says %.1f GB (%.3f+%.3f+%.3f+%.3f B/param)", stage, gb, want[stage], p, g, mw, o)
		}
	}
}

// Megatron-LM distributed optimizer guide: bytes per parameter.
func TestMegatronBytesPerParam(t *testing.T) {
	for _, c := range []struct {
		dtype Precision
		grad  DType
		dp    int
		want  float64
	}{
		{FP16True, FP16, 1, 20}, {FP16True, FP16, 8, 4 + 16.0/8},
		{BF16True, F32, 1, 18}, {BF16True, F32, 8, 6 + 12.0/8}, {BF16True, F32, 64, 6 + 12.0/64},
		{FP32, F32, 1, 16}, {FP32, F32, 8, 8 + 8.0/8},
	} {
		s := DefaultSetup()
		s.Seq, s.DType, s.GradDType, s.DP, s.MasterWeights = 1024, c.dtype, c.grad, c.dp, true
		if c.dp > 1 {
			s.Zero = 1 // Megatron's distributed optimizer shards optimizer state over DP
		}
		p, g, mw, gc, o := perParam(t, bigModel(), s)
		if got := p + g + mw + gc + o; math.Abs(got-c.want) > 0.01 {
			t.Errorf("%s params, %s grads, d=%d: %.3f B/param, want %.3f", c.dtype, c.grad, c.dp, got, c.want)
		}
	}
}

// Korthikanti et al. 2022, Table 2: activation bytes per layer (16-bit activations, dropout,
// eager attention) for no parallelism, TP, TP+SP, selective recompute and full recompute, with
// GPT-3 175B's shape (Table 3: s 2048, h 12288, a 96, t 8).
func TestKorthikantiTable2(t *testing.T) {
	m, err := Preset("gpt3-175b")
	if err != nil {
		t.Fatal(err)
	}
	const s, b, h, a = 2048, 1, 12288, 96
	// no parallelism, the paper's sbh(34 + 5as/h): 2048·12288·(34 + 80) B
	if got := KorthikantiPerLayer(s, b, h, a, 1, false, false); got != 2048*12288*114 {
		t.Errorf("sbh(34+5as/h) = %.0f, want %d", got, 2048*12288*114)
	}
	for _, c := range []struct {
		t             int
		sp, selective bool
	}{{1, false, false}, {8, false, false}, {8, true, false}, {8, false, true}, {8, true, true}, {4, true, true}} {
		st := DefaultSetup()
		st.Seq, st.MicroBatch, st.DType, st.TP, st.TPPlan, st.SP, st.Attention = s, b, BF16True, c.t, TPPlanMegatron, c.sp, AttentionEager
		if c.selective {
			st.Recompute = RecomputeSelective
		}
		st, err := st.normalize(m)
		if err != nil {
			t.Fatal(err)
		}
		var got int64
		for _, it := range newShape(m, st).layerSaved(c.selective) {
			if !strings.HasSuffix(it.Name, "_stats") { // LayerNorm statistics: not in the paper
				got += it.Bytes
			}
		}
		want := KorthikantiPerLayer(s, b, h, a, int64(c.t), c.sp, c.selective)
		if float64(got) != want {
			t.Errorf("t=%d sp=%v selective=%v: %d B per layer, Table 2 gives %.0f", c.t, c.sp, c.selective, got, want)
		}
	}
	// full recompute keeps only the layer input: 2sbh (16-bit)
	st := DefaultSetup()
	st.Seq, st.DType, st.Recompute = s, BF16True, RecomputeFull
	st, _ = st.normalize(m)
	if got := sumItems(newShape(m, st).layerCheckpointed()); got != 2*s*b*h {
		t.Errorf("full recompute: %d B per layer, want 2sbh = %d", got, 2*s*b*h)
	}
}

// One residual-stream tensor: micro-batch x seq x hidden x bytes (the --explain example).
func TestResidualTensor(t *testing.T) {
	m, _ := Preset("lm-small")
	s := DefaultSetup()
	s.Seq, s.MicroBatch, s.DType = 512, 4, BF16Mixed
	r, err := Estimate(m, s, DefaultDevice())
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Top().Activations.ResidualTensorBytes; got != 4*512*768*4 { // fp32 under autocast
		t.Errorf("residual tensor %d B, want %d", got, 4*512*768*4)
	}
}

// The peak is the largest phase, not a sum, and phase terms add up to the phase.
func TestPeakIsMaxOfPhases(t *testing.T) {
	m, _ := Preset("lm-xl")
	s := DefaultSetup()
	s.Seq, s.MicroBatch, s.DType = 128, 4, FP32
	r, err := Estimate(m, s, DefaultDevice())
	if err != nil {
		t.Fatal(err)
	}
	tr := r.Top()
	var mx int64
	for _, p := range tr.Phases {
		var sum int64
		for _, x := range p.Terms {
			sum += x.Bytes
		}
		if sum != p.Bytes {
			t.Errorf("phase %s: terms sum to %d, phase says %d", p.Name, sum, p.Bytes)
		}
		mx = max(mx, p.Bytes)
	}
	if tr.PeakAllocatedBytes != mx || tr.PeakPhase != OptimizerStep {
		t.Errorf("peak %d (%s), max of phases %d; short sequences should peak in the AdamW step", tr.PeakAllocatedBytes, tr.PeakPhase, mx)
	}
}

func TestPipelineRanksDiffer(t *testing.T) {
	m, _ := Preset("llama3-70b")
	s := DefaultSetup()
	s.Seq, s.DType, s.TP, s.TPPlan, s.PP, s.DP, s.Zero, s.Recompute, s.SP = 8192, BF16True, 8, TPPlanMegatron, 4, 8, 1, RecomputeSelective, true
	s.MasterWeights = true
	r, err := Estimate(m, s, DefaultDevice())
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Ranks) != 4 {
		t.Fatalf("%d ranks, want 4 pipeline stages", len(r.Ranks))
	}
	a0, a3 := r.Ranks[0].Activations, r.Ranks[3].Activations
	if a0.InFlight != 4 || a3.InFlight != 1 {
		t.Errorf("1F1B in-flight micro-batches: stage 0 %.1f (want 4), stage 3 %.1f (want 1)", a0.InFlight, a3.InFlight)
	}
	if r.TopRank != 0 {
		t.Errorf("most loaded rank %d, want stage 0 (it holds pp micro-batches of activations)", r.TopRank)
	}
	// Megatron-style TP+SP+selective: 34·sbh/t per layer (SwiGLU and GQA change the constant)
	if a0.PerLayerBytes <= 0 || a0.LogitsBytes != 0 || a3.LogitsBytes == 0 {
		t.Errorf("logits belong to the last stage only: %d / %d", a0.LogitsBytes, a3.LogitsBytes)
	}
}

func TestErrors(t *testing.T) {
	m, _ := Preset("lm-small")
	for _, mod := range []func(*Setup){
		func(s *Setup) { s.Seq = 4096 },     // beyond learned positions
		func(s *Setup) { s.PP = 5 },         // 12 layers / 5
		func(s *Setup) { s.TP = 5 },         // 12 heads / 5
		func(s *Setup) { s.Optimizer = 17 }, // invalid
		func(s *Setup) { s.Zero = 4 },
		func(s *Setup) { s.Offload = OffloadParams }, // needs zero 3
		func(s *Setup) { s.EP = 2 },                  // dense model
		func(s *Setup) { s.DType = 9 },
		func(s *Setup) { s.MicroBatch = 0 },
		func(s *Setup) { s.MicroBatch = -3 },
		func(s *Setup) { s.Seq = math.MaxInt },
	} {
		s := DefaultSetup()
		s.Seq = 512
		mod(&s)
		if _, err := Estimate(m, s, DefaultDevice()); err == nil {
			t.Errorf("setup %+v: no error", s)
		}
	}
}

// Expert parameters are sharded by ZeRO over the expert-data-parallel group (dp/ep), not dp:
// with ep = dp the optimizer state of the experts is not sharded at all.
func TestExpertShardingGroup(t *testing.T) {
	m, _ := Preset("mixtral-8x7b")
	s := DefaultSetup()
	s.Seq, s.DType, s.GradDType, s.DP, s.EP, s.Zero, s.MasterWeights = 4096, BF16True, F32, 8, 8, 1, true
	r, err := Estimate(m, s, DefaultDevice())
	if err != nil {
		t.Fatal(err)
	}
	ms := r.Top().ModelStates
	var expert, dense int64
	layer, other, L := stageTensors(r.Model, r.Setup, 0)
	for _, tn := range layer {
		if tn.expert {
			expert += int64(L) * tn.numel
		} else {
			dense += int64(L) * tn.numel
		}
	}
	dense += sumNumel(other)
	// 8 B of Adam state per parameter: experts whole (1 expert per rank), the rest over 8 ranks
	want := 8*expert + 8*dense/8
	if got := ms.OptimizerStateBytes; math.Abs(float64(got)/float64(want)-1) > 0.001 {
		t.Errorf("optimizer state %d B, want %d B (experts unsharded, dense /8)", got, want)
	}
}
