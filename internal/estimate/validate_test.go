package estimate

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"sort"
	"testing"
)

// measured is one line of testdata/h100_peaks.jsonl (scripts/gpu/measure_peaks.py).
type measured struct {
	Kind   string `json:"kind"`
	Config struct {
		Model          string `json:"model"`
		ModelSize      string `json:"model_size"`
		ContextLength  int    `json:"context_length"`
		BatchSize      int    `json:"batch_size"`
		ProfileType    string `json:"profile_type"`
		MixedPrecision string `json:"mixed_precision"`
		Optimizer      string `json:"optimizer"`
		Checkpoint     bool   `json:"checkpoint"`
		Parameters     int64  `json:"parameters"`
	} `json:"config"`
	TorchVersion       string `json:"torch_version"`
	GPU                string `json:"gpu"`
	Command            string `json:"command"`
	MaxMemoryAllocated int64  `json:"max_memory_allocated"`
	MaxMemoryReserved  int64  `json:"max_memory_reserved"`
	OOM                bool   `json:"oom"`
	Error              string `json:"error"`
	Phases             []struct {
		Name          string `json:"name"`
		PeakAllocated int64  `json:"peak_allocated"`
	} `json:"phases"`
}

func (m measured) name() string {
	c := m.Config
	n := c.ModelSize
	if m.Kind == "hf_gpt2" {
		n = "hf-gpt2"
	}
	s := fmt.Sprintf("%s/ctx%d/b%d/%s/%s", n, c.ContextLength, c.BatchSize, c.ProfileType, c.MixedPrecision)
	if c.ProfileType == "training" {
		s += "/" + c.Optimizer
		if c.Checkpoint {
			s += "/ckpt"
		}
	}
	return s
}

// modelAndSetup maps a measured configuration to the estimator's inputs.
func (m measured) modelAndSetup() (Model, Setup, error) {
	c := m.Config
	preset := "lm-" + c.ModelSize
	if m.Kind == "hf_gpt2" {
		preset = "gpt2"
	}
	mod, err := Preset(preset)
	if err != nil {
		return mod, Setup{}, err
	}
	s := DefaultSetup()
	s.Seq, s.MicroBatch = c.ContextLength, c.BatchSize
	if c.MixedPrecision != "none" {
		s.DType, s.AMP = c.MixedPrecision, true
	}
	s.ForwardOnly = c.ProfileType == "forward"
	if c.Optimizer != "" {
		s.Optimizer = c.Optimizer
	}
	if c.Checkpoint {
		s.Recompute = "full"
	}
	return mod, s, nil
}

func readMeasured(t testing.TB, path string) []measured {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []measured
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m measured
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if (m.Kind == "lm" || m.Kind == "hf_gpt2") && !m.OOM && m.Error == "" && m.MaxMemoryAllocated > 0 {
			out = append(out, m)
		}
	}
	return out
}

func TestValidationReport(t *testing.T) {
	ms := readMeasured(t, "testdata/h100_peaks.jsonl")
	type row struct {
		name       string
		est, got   int64
		err        float64
		estR, gotR int64
		phases     string
	}
	var rows []row
	dev, _ := GPU("h100-80gb")
	for _, m := range ms {
		mod, s, err := m.modelAndSetup()
		if err != nil {
			t.Fatal(err)
		}
		r, err := Estimate(mod, s, dev)
		if err != nil {
			t.Fatalf("%s: %v", m.name(), err)
		}
		tr := r.TopRank()
		ph := ""
		for i, p := range m.Phases {
			if i > 0 && i-1 < len(tr.Phases) {
				ph += fmt.Sprintf(" %s %.3f/%.3f", p.Name, float64(tr.Phases[i-1].Bytes)/1e9, float64(p.PeakAllocated)/1e9)
			}
		}
		rows = append(rows, row{m.name(), tr.PeakAllocatedBytes, m.MaxMemoryAllocated, float64(tr.PeakAllocatedBytes)/float64(m.MaxMemoryAllocated) - 1, tr.PeakReservedBytes, m.MaxMemoryReserved, ph})
	}
	sort.Slice(rows, func(i, j int) bool { return math.Abs(rows[i].err) > math.Abs(rows[j].err) })
	for _, r := range rows {
		t.Logf("%-40s est %6.3f GB got %6.3f GB err %+6.2f%%  res est %6.3f got %6.3f (%+.1f%%) |%s", r.name, float64(r.est)/1e9, float64(r.got)/1e9, r.err*100, float64(r.estR)/1e9, float64(r.gotR)/1e9, (float64(r.estR)/float64(r.gotR)-1)*100, r.phases)
	}
}

// TestMeasuredPeaksWithin10Percent checks the estimate of peak_allocated_bytes against every
// measured configuration in testdata (H100, PyTorch 2.11, scripts/gpu/measure_peaks.py).
func TestMeasuredPeaksWithin10Percent(t *testing.T) {
	ms := readMeasured(t, "testdata/h100_peaks.jsonl")
	if len(ms) < 90 {
		t.Fatalf("only %d measured configurations in testdata", len(ms))
	}
	dev, err := GPU("h100-80gb")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		mod, s, err := m.modelAndSetup()
		if err != nil {
			t.Fatal(err)
		}
		if m.Config.Parameters != 0 && mod.Params() != m.Config.Parameters {
			t.Errorf("%s: preset has %d params, the measured model %d", m.name(), mod.Params(), m.Config.Parameters)
		}
		r, err := Estimate(mod, s, dev)
		if err != nil {
			t.Fatalf("%s: %v", m.name(), err)
		}
		got := r.TopRank().PeakAllocatedBytes
		if e := float64(got)/float64(m.MaxMemoryAllocated) - 1; math.Abs(e) > 0.10 {
			t.Errorf("%s: estimate %d B, measured %d B (%+.1f%%)", m.name(), got, m.MaxMemoryAllocated, e*100)
		}
	}
}

// TestFixturePeak checks the fixtures' Hugging Face GPT-2 small training step (fp32, AdamW,
// batch 4 x 512): max_memory_allocated = 5,538,270,208 B (../shared/fixtures/README.md).
func TestFixturePeak(t *testing.T) {
	const measured = 5538270208
	m, err := Preset("gpt2")
	if err != nil {
		t.Fatal(err)
	}
	s := DefaultSetup()
	s.Seq, s.MicroBatch = 512, 4
	dev, _ := GPU("h100-80gb")
	r, err := Estimate(m, s, dev)
	if err != nil {
		t.Fatal(err)
	}
	got := r.TopRank().PeakAllocatedBytes
	if e := float64(got)/measured - 1; math.Abs(e) > 0.02 {
		t.Errorf("gpt2 fixture: estimate %d B, measured %d B (%+.2f%%)", got, int64(measured), e*100)
	}
	if r.Params != 124439808 {
		t.Errorf("gpt2 params = %d, want 124439808", r.Params)
	}
}
