package estimate

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// The config.json files in testdata are the architecture keys of the Hugging Face configs of
// gpt2, Meta-Llama-3-8B and Mixtral-8x7B-v0.1; they must give the presets' parameter counts.
func TestReadHFConfig(t *testing.T) {
	for _, c := range []struct {
		file, preset string
	}{
		{"testdata/gpt2_config.json", "gpt2"},
		{"testdata/llama3_8b_config.json", "llama3-8b"},
		{"testdata/mixtral_config.json", "mixtral-8x7b"},
	} {
		f, err := os.Open(c.file)
		if err != nil {
			t.Fatal(err)
		}
		m, err := ReadHFConfig(f, c.file)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		p, _ := Preset(c.preset)
		if m.Params() != p.Params() {
			t.Errorf("%s: %d params, preset %s has %d", c.file, m.Params(), c.preset, p.Params())
		}
		if m.MLP != p.MLP || m.Norm != p.Norm || m.TiedEmbeddings != p.TiedEmbeddings || m.Experts != p.Experts || m.Activation != p.Activation {
			t.Errorf("%s: %+v differs from preset %+v", c.file, m, p)
		}
	}
}

// Published parameter counts of configs written here: Qwen2-0.5B (tied 152k vocabulary, q/k/v
// biases) and TinyLlama-1.1B; a multimodal config keeps the language model under text_config.
func TestReadHFConfigFamilies(t *testing.T) {
	for _, c := range []struct {
		name, json string
		params     int64
		mlp        string
	}{
		{"qwen2-0.5b", `{"model_type": "qwen2", "vocab_size": 151936, "hidden_size": 896, "intermediate_size": 4864,
			"num_hidden_layers": 24, "num_attention_heads": 14, "num_key_value_heads": 2, "max_position_embeddings": 32768,
			"rms_norm_eps": 1e-06, "tie_word_embeddings": true, "hidden_act": "silu"}`, 494032768, "swiglu"},
		{"tinyllama-1.1b", `{"model_type": "llama", "vocab_size": 32000, "hidden_size": 2048, "intermediate_size": 5632,
			"num_hidden_layers": 22, "num_attention_heads": 32, "num_key_value_heads": 4, "max_position_embeddings": 2048,
			"rms_norm_eps": 1e-05, "tie_word_embeddings": false, "hidden_act": "silu"}`, 1100048384, "swiglu"},
		{"vlm-text", `{"model_type": "llava", "text_config": {"model_type": "llama", "vocab_size": 32000, "hidden_size": 2048,
			"intermediate_size": 5632, "num_hidden_layers": 22, "num_attention_heads": 32, "num_key_value_heads": 4,
			"rms_norm_eps": 1e-05, "hidden_act": "silu"}}`, 1100048384, "swiglu"},
		{"gemma-gated-gelu", `{"model_type": "gemma", "vocab_size": 256000, "hidden_size": 2048, "intermediate_size": 16384,
			"num_hidden_layers": 18, "num_attention_heads": 8, "num_key_value_heads": 1, "head_dim": 256,
			"rms_norm_eps": 1e-06, "hidden_act": "gelu_pytorch_tanh", "tie_word_embeddings": true}`, 2506172416, "swiglu"},
	} {
		m, err := ReadHFConfig(strings.NewReader(c.json), c.name)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if m.Params() != c.params || m.MLP != c.mlp {
			t.Errorf("%s: %d params, mlp %s; want %d, %s", c.name, m.Params(), m.MLP, c.params, c.mlp)
		}
	}
}

func TestReadHFConfigErrors(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", "config.json: empty file"},
		{"{", "config.json: truncated JSON"},
		{"[]", "config.json: want a JSON object (a Hugging Face config.json), got array"},
		{`{"n_layer": 12,}`, "config.json: invalid JSON at byte offset"},
		{`{"num_hidden_layers": 12.5}`, "config.json: num_hidden_layers: want an integer, got number 12.5 (byte offset"},
		{`{"tie_word_embeddings": "yes"}`, "config.json: tie_word_embeddings: want true or false, got string"},
		{`{"text_config": 3}`, "config.json: text_config: want an object, got number"},
		{`{"n_layer": 0, "n_embd": 768, "n_head": 12, "vocab_size": 10}`, "config.json: n_layer 0: must be at least 1"},
		{`{"hidden_size": 768, "num_attention_heads": 12, "vocab_size": 10}`, "config.json: no num_hidden_layers or n_layer or num_layers"},
		{`{"num_hidden_layers": 2, "hidden_size": 768, "num_attention_heads": 12, "vocab_size": 10}`, "config.json: no intermediate_size"},
		{`{"num_hidden_layers": 2, "hidden_size": 100, "num_attention_heads": 3, "vocab_size": 10, "intermediate_size": 4}`, "config.json: hidden 100: not divisible by heads 3"},
		{`{"num_hidden_layers": 99999999, "hidden_size": 768, "num_attention_heads": 12, "vocab_size": 10, "intermediate_size": 4}`, "config.json: num_hidden_layers 99999999: larger than any model"},
		{`{"n_layer": 2, "n_embd": 64, "n_head": 2, "vocab_size": 10} {"x": 1}`, "config.json: unexpected data after the JSON object at byte offset"},
	} {
		_, err := ReadHFConfig(strings.NewReader(c.in), "config.json")
		if err == nil || !strings.HasPrefix(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: error %v, want %q...", c.in, err, c.want)
		}
	}
}

func FuzzReadHFConfig(f *testing.F) {
	for _, p := range []string{"testdata/gpt2_config.json", "testdata/llama3_8b_config.json", "testdata/mixtral_config.json"} {
		b, err := os.ReadFile(p)
		if err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(`{"model_type": "llava", "text_config": {"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "vocab_size": 100, "intermediate_size": 128, "num_local_experts": 4, "num_experts_per_tok": 2}}`))
	f.Add([]byte(`{"num_hidden_layers": "2"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ReadHFConfig(bytes.NewReader(b), "fuzz.json")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.json: ") || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %q is not one line naming the file", err)
			}
			return
		}
		if m.Layers > 1000 || m.Hidden > 1<<16 || m.Vocab > 1<<22 || m.FFN > 1<<20 || m.Experts > 1024 {
			return // huge but valid models: estimating them is fine, only slower
		}
		s := DefaultSetup()
		s.Seq = min(max(m.SeqMax, 1), 4096)
		r, err := Estimate(m, s, DefaultDevice())
		if err != nil {
			return
		}
		for _, rk := range r.Ranks {
			if rk.PeakAllocatedBytes <= 0 || rk.DeviceTotalBytes < rk.PeakAllocatedBytes {
				t.Fatalf("peak %d, device total %d for %+v", rk.PeakAllocatedBytes, rk.DeviceTotalBytes, m)
			}
		}
	})
}

func BenchmarkEstimateLlama70B(b *testing.B) {
	m, _ := Preset("llama3-70b")
	s := DefaultSetup()
	s.Seq, s.DType, s.TP, s.TPPlan, s.PP, s.DP, s.Zero, s.Recompute = 8192, BF16True, 8, TPPlanMegatron, 4, 8, 1, RecomputeSelective
	s.MasterWeights = true
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := Estimate(m, s, DefaultDevice()); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSweep(b *testing.B) {
	m, _ := Preset("lm-2.7B")
	dev, _ := GPU("h100-80gb")
	mb, _ := ParseSweepAxis("micro-batch=1..64")
	seq, _ := ParseSweepAxis("seq=128,256,512,1024")
	for i := 0; i < b.N; i++ {
		if _, err := Sweep([]Model{m}, DefaultSetup(), dev, []SweepAxis{mb, seq}); err != nil {
			b.Fatal(err)
		}
	}
}
