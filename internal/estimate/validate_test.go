package estimate

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"sort"
	"strings"
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
		FSDP           bool   `json:"fsdp"`
		WorldSize      int    `json:"world_size"`
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
		if c.FSDP {
			s += fmt.Sprintf("/fsdp%d", c.WorldSize)
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
	s.DType = FP32
	if c.MixedPrecision != "none" {
		if s.DType, err = ParsePrecision(c.MixedPrecision); err != nil {
			return mod, s, err
		}
	}
	s.ForwardOnly = c.ProfileType == "forward"
	if c.Optimizer != "" {
		if s.Optimizer, err = ParseOptimizer(c.Optimizer); err != nil {
			return mod, s, err
		}
	}
	if c.Checkpoint {
		s.Recompute = RecomputeFull
	}
	if c.FSDP {
		s.FSDP, s.DP = true, max(c.WorldSize, 1)
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

var printReport = flag.Bool("report", false, "print the validation table (markdown) of estimate vs measurement")

// TestValidationReport prints the table in docs/validation.md: go test ./internal/estimate -run ValidationReport -report -v
func TestValidationReport(t *testing.T) {
	ms := append(readMeasured(t, "testdata/h100_peaks.jsonl"), readMeasured(t, "testdata/h100_fsdp1_peaks.jsonl")...)
	ms = append(ms, readMeasured(t, "testdata/h200_fsdp2_peaks.jsonl")...)
	type row struct {
		name       string
		est, got   int64
		err        float64
		estR, gotR int64
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
		tr := r.Top()
		rows = append(rows, row{m.name(), tr.PeakAllocatedBytes, m.MaxMemoryAllocated, float64(tr.PeakAllocatedBytes)/float64(m.MaxMemoryAllocated) - 1, tr.PeakReservedBytes, m.MaxMemoryReserved})
	}
	sort.SliceStable(rows, func(i, j int) bool { return math.Abs(rows[i].err) > math.Abs(rows[j].err) })
	var b strings.Builder
	b.WriteString("| configuration | measured allocated | estimate | error | measured reserved | estimate | error |\n|---|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %d | %d | %+.2f%% | %d | %d | %+.1f%% |\n", r.name, r.got, r.est, r.err*100, r.gotR, r.estR, (float64(r.estR)/float64(r.gotR)-1)*100)
	}
	if *printReport {
		fmt.Print(b.String())
	}
}

// TestMeasuredPeaksWithin10Percent checks the estimate of peak_allocated_bytes against every
// measured configuration in testdata (H100, PyTorch 2.11, scripts/gpu/measure_peaks.py).
func TestMeasuredPeaksWithin10Percent(t *testing.T) {
	ms := readMeasured(t, "testdata/h100_peaks.jsonl")
	if len(ms) < 90 {
		t.Fatalf("only %d measured configurations in testdata", len(ms))
	}
	ms = append(ms, readMeasured(t, "testdata/h100_fsdp1_peaks.jsonl")...)
	// FSDP2 over 2 GPUs (torchrun on an H200 x2 host; rank 0's peak).
	ms = append(ms, readMeasured(t, "testdata/h200_fsdp2_peaks.jsonl")...)
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
		got := r.Top().PeakAllocatedBytes
		if e := float64(got)/float64(m.MaxMemoryAllocated) - 1; math.Abs(e) > 0.10 {
			t.Errorf("%s: estimate %d B, measured %d B (%+.1f%%)", m.name(), got, m.MaxMemoryAllocated, e*100)
		}
	}
}

// TestFixturePeak checks the fixtures' Hugging Face GPT-2 small runs (../shared/fixtures/README.md,
// measured in the process on an H100): training fp32 AdamW batch 4 x 512 peaks at 5,538,270,208 B;
// eval forward under no_grad and bf16 autocast, batch 4 x 512, at 1,111,965,696 B.
func TestFixturePeak(t *testing.T) {
	m, err := Preset("gpt2")
	if err != nil {
		t.Fatal(err)
	}
	if m.Params() != 124439808 {
		t.Errorf("gpt2 params = %d, want 124439808", m.Params())
	}
	dev, _ := GPU("h100-80gb")
	for _, c := range []struct {
		name     string
		forward  bool
		amp      bool
		measured int64
	}{
		{"train_fp32_b4_ctx512", false, false, 5538270208},
		{"fwd_bf16_b4_ctx512", true, true, 1111965696},
	} {
		s := DefaultSetup()
		s.Seq, s.MicroBatch, s.ForwardOnly, s.DType = 512, 4, c.forward, FP32
		if c.amp {
			s.DType = BF16Mixed
		}
		r, err := Estimate(m, s, dev)
		if err != nil {
			t.Fatal(err)
		}
		got := r.Top().PeakAllocatedBytes
		if e := float64(got)/float64(c.measured) - 1; math.Abs(e) > 0.02 {
			t.Errorf("gpt2 %s: estimate %d B, measured %d B (%+.2f%%)", c.name, got, c.measured, e*100)
		}
	}
}
