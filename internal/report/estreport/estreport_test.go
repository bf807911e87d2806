package estreport

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ptscope/ptscope/internal/estimate"
	"github.com/ptscope/ptscope/internal/report"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -update to write it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("output differs from %s (go test ./internal/report/estreport -update to rewrite):\n%s", path, got)
	}
}

func est(t *testing.T, model string, mod func(*estimate.Setup), gpu string) *estimate.Result {
	t.Helper()
	m, err := estimate.Preset(model)
	if err != nil {
		t.Fatal(err)
	}
	s := estimate.DefaultSetup()
	mod(&s)
	dev := estimate.DefaultDevice()
	if gpu != "" {
		if dev, err = estimate.GPU(gpu); err != nil {
			t.Fatal(err)
		}
	}
	r, err := estimate.Estimate(m, s, dev)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// checkWidth fails when a line is wider than the width.
func checkWidth(t *testing.T, name, text string, width int) {
	t.Helper()
	for i, l := range strings.Split(text, "\n") {
		if n := utf8.RuneCountInString(l); n > width {
			t.Errorf("%s line %d is %d columns (max %d): %q", name, i+1, n, width, l)
		}
	}
}

func text(t *testing.T, d report.Document, width int) string {
	t.Helper()
	o := report.DefaultText()
	o.Width = width
	var b bytes.Buffer
	if err := d.WriteText(&b, o); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func cases(t *testing.T) map[string]report.Document {
	smallAMP := est(t, "lm-small", func(s *estimate.Setup) { s.Seq, s.MicroBatch = 512, 4 }, "h100-80gb")
	pipeline := est(t, "llama3-70b", func(s *estimate.Setup) {
		s.DType, s.MasterWeights, s.GradDType = estimate.BF16True, true, estimate.F32
		s.TP, s.TPPlan, s.PP, s.DP, s.Zero, s.Seq, s.Recompute = 8, estimate.TPPlanMegatron, 4, 8, 1, 8192, estimate.RecomputeSelective
	}, "h100-80gb")
	offload := est(t, "llama3-8b", func(s *estimate.Setup) {
		s.DP, s.Zero, s.Offload, s.Seq, s.MicroBatch = 8, 2, estimate.OffloadOptimizer, 4096, 2
	}, "4090")
	tp := est(t, "llama3-8b", func(s *estimate.Setup) { s.TP, s.Seq, s.MicroBatch = 4, 2048, 4 }, "h100-80gb")
	infer := est(t, "gpt2", func(s *estimate.Setup) {
		s.ForwardOnly, s.Seq, s.MicroBatch, s.DType = true, 512, 4, estimate.FP32
	}, "")
	return map[string]report.Document{
		"lm_small_bf16_explain": Estimate{R: smallAMP, Explain: true},
		"lm_small_bf16":         Estimate{R: smallAMP},
		"llama70b_pipeline":     Estimate{R: pipeline},
		"llama8b_offload":       Estimate{R: offload},
		"llama8b_tp4_hf":        Estimate{R: tp},
		"gpt2_inference":        Estimate{R: infer},
		"sweep_seed":            Sweep{R: seedSweep(t)},
	}
}

// seedSweep is three models x three contexts x two precisions on an H100.
func seedSweep(t *testing.T) *estimate.SweepResult {
	var models []estimate.Model
	for _, n := range []string{"gpt2-xl", "llama3-8b", "lm-2.7B"} {
		m, err := estimate.Preset(n)
		if err != nil {
			t.Fatal(err)
		}
		models = append(models, m)
	}
	var axes []estimate.SweepAxis
	for _, spec := range []string{"model=gpt2-xl,llama3-8b,lm-2.7B", "seq=512,1024,2048", "dtype=fp32,bf16"} {
		ax, err := estimate.ParseSweepAxis(spec)
		if err != nil {
			t.Fatal(err)
		}
		axes = append(axes, ax)
	}
	dev, _ := estimate.GPU("h100-80gb")
	res, err := estimate.Sweep(models, estimate.DefaultSetup(), dev, axes)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// Goldens of every renderer at 80 and 100 columns; every line fits.
func TestTextGoldens(t *testing.T) {
	for name, d := range cases(t) {
		for _, w := range []int{80, 100} {
			out := text(t, d, w)
			checkWidth(t, name, out, w)
			golden(t, name+"_"+itoa(w)+".txt", []byte(out))
		}
	}
}

// Narrow and wide terminals: nothing overflows.
func TestTextFitsWidths(t *testing.T) {
	for name, d := range cases(t) {
		for _, w := range []int{60, 72, 120, 160} {
			checkWidth(t, name, text(t, d, w), w)
		}
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// The JSON is the result: the header first, every rank, the findings.
func TestJSONGolden(t *testing.T) {
	r := est(t, "gpt2", func(s *estimate.Setup) { s.Seq, s.MicroBatch, s.DType = 512, 4, estimate.FP32 }, "h100-80gb")
	b, err := json.MarshalIndent(Estimate{R: r}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte("{\n  \"schema_version\": 2,\n  \"tool\": \"ptscope\",\n  \"command\": \"estimate\",")) {
		t.Errorf("document does not open with the v2 header:\n%.200s", b)
	}
	golden(t, "gpt2_fp32.json", append(b, '\n'))
	var back estimate.Result
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("the document does not read back into estimate.Result: %v", err)
	}
	if back.PeakAllocatedBytes != r.PeakAllocatedBytes || back.Ranks[0].PeakPhase != r.Ranks[0].PeakPhase || back.Verdict != estimate.Fits {
		t.Errorf("round trip: %+v", back.Summary)
	}
	s, err := json.MarshalIndent(Sweep{R: seedSweep(t)}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "sweep_seed.json", append(s, '\n'))
	if strings.Contains(string(b)+string(s), "_us\"") {
		t.Error("a _us key in the document")
	}
}

func TestRunFiles(t *testing.T) {
	d := cases(t)["llama70b_pipeline"]
	files, err := d.RunFiles(report.DefaultText())
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]int{}
	for _, f := range files {
		names[f.Name] = len(f.Data)
	}
	for _, want := range []string{"phases.svg", "phases.png", "ranks.svg", "ranks.png", "explain.txt"} {
		if names[want] < 200 {
			t.Errorf("%s: %d bytes", want, names[want])
		}
	}
	if d.RunName() != "estimate_llama3-70b" {
		t.Errorf("run name %q", d.RunName())
	}
}

func TestCalibrationText(t *testing.T) {
	r := est(t, "lm-small", func(s *estimate.Setup) { s.Seq, s.MicroBatch = 512, 8 }, "")
	c := estimate.Calibrate(r, estimate.Measurement{Source: "runs/lm_small", Mode: "simulate-world", Simulated: true,
		MaxAllocatedBytes: 5673316352, Phases: []estimate.PhaseMeasure{
			{Name: "forward", Step: 0, AllocatedBefore: 498624512, AllocatedAfter: 4849135104, MaxAllocatedAfter: 4849300992},
			{Name: "backward", Step: 0, AllocatedBefore: 4849135104, AllocatedAfter: 2489616384, MaxAllocatedBefore: 4849300992, MaxAllocatedAfter: 5673316352},
			{Name: "optimizer", Step: 0, AllocatedBefore: 1491189248, AllocatedAfter: 2489853440, MaxAllocatedBefore: 5673316352, MaxAllocatedAfter: 5673316352},
		}})
	for _, w := range []int{80, 100} {
		out := text(t, Calibration{C: &c}, w)
		checkWidth(t, "calibration", out, w)
		for _, want := range []string{"against a simulated rank", "(--simulate-world-size), rank 0", "peak allocated", "How each measured number is derived", "note: measured as a simulated rank"} {
			if !strings.Contains(out, want) {
				t.Errorf("calibration text lacks %q:\n%s", want, out)
			}
		}
	}
}
