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

func TestReadHFConfigErrors(t *testing.T) {
	for _, in := range []string{"", "{", "[]", `{"n_layer": 0, "n_embd": 768, "n_head": 12, "vocab_size": 10}`,
		`{"num_hidden_layers": 2, "hidden_size": 100, "num_attention_heads": 3, "vocab_size": 10, "intermediate_size": 4}`} {
		if _, err := ReadHFConfig(strings.NewReader(in), "config.json"); err == nil || !strings.Contains(err.Error(), "config.json") {
			t.Errorf("%q: error %v, want one naming the file", in, err)
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
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ReadHFConfig(bytes.NewReader(b), "fuzz.json")
		if err != nil {
			return
		}
		if m.Layers > 1000 || m.Hidden > 1<<16 || m.Vocab > 1<<22 || m.FFN > 1<<20 || m.Experts > 1024 {
			return // huge but valid models: estimating them is fine, only slower
		}
		s := DefaultSetup()
		s.Seq = min(max(m.SeqMax, 1), 4096)
		_, _ = Estimate(m, s, DefaultDevice())
	})
}

func BenchmarkEstimateLlama70B(b *testing.B) {
	m, _ := Preset("llama3-70b")
	s := DefaultSetup()
	s.Seq, s.DType, s.TP, s.PP, s.DP, s.Zero, s.Recompute = 8192, "bf16", 8, 4, 8, 1, "selective"
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
		if _, _, err := Sweep(m, DefaultSetup(), dev, []SweepAxis{mb, seq}); err != nil {
			b.Fatal(err)
		}
	}
}
