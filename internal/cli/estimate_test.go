package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func estimateRun(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var o, e bytes.Buffer
	code = Main(context.Background(), append([]string{"estimate"}, args...), strings.NewReader(""), &o, &e)
	return code, o.String(), e.String()
}

type estimateDoc struct {
	SchemaVersion      int    `json:"schema_version"`
	Tool               string `json:"tool"`
	Command            string `json:"command"`
	PeakAllocatedBytes int64  `json:"peak_allocated_bytes"`
	PeakReservedBytes  int64  `json:"peak_reserved_bytes"`
	DeviceTotalBytes   int64  `json:"device_total_bytes"`
	HostBytes          int64  `json:"host_bytes"`
	Verdict            string `json:"verdict"`
	HeadroomBytes      *int64 `json:"headroom_bytes"`
	TopRank            int    `json:"top_rank"`
	Setup              struct {
		DType     string `json:"dtype"`
		Optimizer string `json:"optimizer"`
		Attention string `json:"attention"`
		Recompute string `json:"recompute"`
		TPPlan    string `json:"tp_plan"`
	} `json:"setup"`
	Ranks []struct {
		Name               string `json:"name"`
		PeakAllocatedBytes int64  `json:"peak_allocated_bytes"`
		PeakReservedBytes  int64  `json:"peak_reserved_bytes"`
		DeviceTotalBytes   int64  `json:"device_total_bytes"`
		PeakPhase          string `json:"peak_phase"`
		Phases             []struct {
			Name  string `json:"name"`
			Bytes int64  `json:"bytes"`
		} `json:"phases"`
		Terms []struct {
			Name  string `json:"name"`
			Bytes int64  `json:"bytes"`
			Where string `json:"where"`
		} `json:"terms"`
	} `json:"ranks"`
	Findings []struct {
		ID       string `json:"id"`
		Severity string `json:"severity"`
	} `json:"findings"`
}

func estimateJSON(t *testing.T, args ...string) estimateDoc {
	t.Helper()
	code, out, errs := estimateRun(t, append(args, "--json")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var d estimateDoc
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return d
}

// The fixtures' GPT-2 small training step (../shared/fixtures/README.md): max_memory_allocated
// 5,538,270,208 B on an H100.
func TestEstimateJSONFixture(t *testing.T) {
	d := estimateJSON(t, "--model", "gpt2", "--seq", "512", "--micro-batch", "4", "--dtype", "fp32")
	if d.SchemaVersion != 2 || d.Tool != "ptscope" || d.Command != "estimate" || d.Verdict != "unknown" || d.HeadroomBytes != nil ||
		len(d.Ranks) != 1 || len(d.Ranks[0].Phases) != 3 {
		t.Fatalf("unexpected document: %+v", d)
	}
	if e := float64(d.PeakAllocatedBytes)/5538270208 - 1; math.Abs(e) > 0.02 {
		t.Errorf("peak_allocated_bytes %d is %+.2f%% off the measured 5538270208", d.PeakAllocatedBytes, e*100)
	}
	r := d.Ranks[0]
	var alloc, reserved, device int64
	for _, tm := range r.Terms {
		switch tm.Where {
		case "allocated":
			alloc += tm.Bytes
		case "reserved":
			reserved += tm.Bytes
		case "device":
			device += tm.Bytes
		default:
			t.Errorf("term %s: where %q", tm.Name, tm.Where)
		}
	}
	if alloc != d.PeakAllocatedBytes || r.PeakAllocatedBytes != d.PeakAllocatedBytes {
		t.Errorf("allocated terms sum to %d, peak_allocated_bytes %d", alloc, d.PeakAllocatedBytes)
	}
	if d.PeakReservedBytes < alloc+reserved || d.PeakReservedBytes > alloc+reserved+2<<20 || d.DeviceTotalBytes != d.PeakReservedBytes+device {
		t.Errorf("reserved %d / device %d do not follow from the terms (%d, %d, %d)", d.PeakReservedBytes, d.DeviceTotalBytes, alloc, reserved, device)
	}
}

// Without flags, the setup is the common case of today: bf16 autocast, AdamW, SDPA, no recompute;
// the first line of the text says so.
func TestEstimateDefaults(t *testing.T) {
	d := estimateJSON(t, "--model", "llama3-8b")
	if d.Setup.DType != "bf16" || d.Setup.Optimizer != "adamw" || d.Setup.Attention != "sdpa" || d.Setup.Recompute != "none" {
		t.Errorf("default setup %+v", d.Setup)
	}
	code, out, _ := estimateRun(t, "--model", "llama3-8b")
	first := strings.SplitN(out, "\n", 2)[0]
	for _, want := range []string{"llama3-8b", "bf16 autocast", "AdamW"} {
		if code != 0 || !strings.Contains(first, want) {
			t.Errorf("first line %q lacks %q", first, want)
		}
	}
}

func TestEstimateVerdict(t *testing.T) {
	if d := estimateJSON(t, "--model", "lm-xl", "--seq", "512", "--micro-batch", "4", "--dtype", "fp32", "--gpu", "h100-80gb"); d.Verdict != "fits" || d.HeadroomBytes == nil || *d.HeadroomBytes <= 0 {
		t.Errorf("lm-xl batch 4 x 512 should fit an H100 (measured 32.2 GB): %s %v", d.Verdict, d.HeadroomBytes)
	}
	d := estimateJSON(t, "--model", "lm-xl", "--seq", "512", "--micro-batch", "4", "--dtype", "fp32", "--device-memory", "24GiB")
	if d.Verdict != "does_not_fit" || *d.HeadroomBytes >= 0 || len(d.Findings) == 0 || d.Findings[0].ID != "does-not-fit" || d.Findings[0].Severity != "critical" {
		t.Errorf("lm-xl batch 4 x 512 fp32 AdamW does not fit 24 GiB: %+v", d)
	}
	code, out, _ := estimateRun(t, "--model", "lm-xl", "--seq", "512", "--gpu", "4090")
	if code != 0 || !strings.Contains(out, "DOES NOT FIT on 4090") {
		t.Errorf("exit %d, want a DOES NOT FIT verdict:\n%s", code, out)
	}
}

// The pipeline example: ranks differ, the summary is the most loaded one, it explains itself.
func TestEstimateLlama70B(t *testing.T) {
	args := []string{"--model", "llama3-70b", "--dtype", "bf16-true", "--master-weights", "--tp", "8", "--tp-plan", "megatron",
		"--pp", "4", "--dp", "8", "--zero", "1", "--seq", "8192", "--micro-batch", "1", "--recompute", "selective", "--gpu", "h100-80gb"}
	code, out, errs := estimateRun(t, append(args, "--explain")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"pp_stage_0 *", "pp_stage_3", "one residual-stream tensor: 128 MiB = micro_batch·seq/cp·hidden·2 B/1 =",
		"optimizer_state", "nccl_buffers", "cuda_context", "verdict: DOES NOT FIT on h100-80gb", "try-sequence-parallel"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if d := estimateJSON(t, append(args, "--sp")...); d.Verdict != "fits" && d.Verdict != "tight" {
		t.Errorf("with sequence parallelism the 70B layout should fit an H100: %s", d.Verdict)
	}
	d := estimateJSON(t, args...)
	if len(d.Ranks) != 4 || d.TopRank != 0 {
		t.Fatalf("%d ranks, top %d", len(d.Ranks), d.TopRank)
	}
	for _, r := range d.Ranks {
		if r.DeviceTotalBytes > d.DeviceTotalBytes {
			t.Errorf("rank %s (%d) is more loaded than the summary (%d)", r.Name, r.DeviceTotalBytes, d.DeviceTotalBytes)
		}
	}
}

// The seed's tables: three models x three contexts x two precisions in one command.
func TestEstimateSweepSeedTables(t *testing.T) {
	args := []string{"--gpu", "h100", "--sweep", "model=gpt2-medium,gpt2-large,gpt2-xl", "seq=256,512,1024", "dtype=fp32,bf16"}
	code, out, errs := estimateRun(t, args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"device total, fp32", "device total, bf16", "seq 256", "seq 1024", "gpt2-medium", "gpt2-large", "gpt2-xl", "✓",
		"largest setting that fits: model=gpt2-xl seq=1024 dtype=bf16"} {
		if !strings.Contains(out, want) {
			t.Errorf("sweep lacks %q:\n%s", want, out)
		}
	}
	code, js, _ := estimateRun(t, append(args, "--json")...)
	var doc struct {
		SchemaVersion int `json:"schema_version"`
		Rows          []struct {
			Model   string         `json:"model"`
			Values  map[string]any `json:"values"`
			Verdict string         `json:"verdict"`
		} `json:"rows"`
		Best []int `json:"best"`
	}
	if err := json.Unmarshal([]byte(js), &doc); code != 0 || err != nil || doc.SchemaVersion != 2 || len(doc.Rows) != 18 || len(doc.Best) != 3 {
		t.Fatalf("exit %d, %v:\n%.400s", code, err, js)
	}
	if doc.Rows[17].Model != "gpt2-xl" || doc.Rows[17].Values["dtype"] != "bf16" || doc.Rows[17].Values["seq"] != float64(1024) {
		t.Errorf("last row %+v", doc.Rows[17])
	}
}

func TestEstimateSweep(t *testing.T) {
	code, out, errs := estimateRun(t, "--model", "lm-large", "--gpu", "4090", "--sweep", "micro-batch=1..64", "seq=256,512")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(out, "largest setting that fits: micro-batch=") || strings.Count(out, "\n") < 12 {
		t.Errorf("sweep output:\n%s", out)
	}
	code, out2, _ := estimateRun(t, "--model", "lm-large", "--gpu", "4090", "--sweep", "micro-batch=1..64", "--sweep", "seq=256,512")
	if code != 0 || out2 != out {
		t.Errorf("repeated --sweep differs from axes given as arguments")
	}
	// without a device: the count, the layout, then why there is no verdict;
	// an invalid point counted in the singular
	code, out, _ = estimateRun(t, "--model", "gpt2", "--sweep", "seq=1024,4096")
	for _, want := range []string{"2 points, 1 GPU; sizes per GPU of the most loaded rank; no device memory given", "learned positions (1 point)"} {
		if code != 0 || !strings.Contains(strings.Join(strings.Fields(out), " "), want) {
			t.Errorf("exit %d, sweep lacks %q:\n%s", code, want, out)
		}
	}
	code, out, _ = estimateRun(t, "--model", "lm-large", "--sweep", "micro-batch=1..8", "recompute=none,full", "--json")
	var doc struct {
		Rows []struct {
			Values  map[string]any `json:"values"`
			Verdict string         `json:"verdict"`
		} `json:"rows"`
		Best []int `json:"best"`
	}
	if err := json.Unmarshal([]byte(out), &doc); code != 0 || err != nil || len(doc.Rows) != 8 || len(doc.Best) != 0 || doc.Rows[0].Verdict != "unknown" {
		t.Fatalf("exit %d, %v:\n%s", code, err, out)
	}
}

func TestEstimateModelFromFlagsAndConfig(t *testing.T) {
	a := estimateJSON(t, "--model", "lm-small", "--seq", "256")
	b := estimateJSON(t, "--layers", "12", "--hidden", "768", "--heads", "12", "--vocab", "50257", "--seq-max", "1024",
		"--tied-embeddings", "--bias", "--seq", "256")
	if a.PeakAllocatedBytes != b.PeakAllocatedBytes {
		t.Errorf("flags-only model %d B, preset lm-small %d B", b.PeakAllocatedBytes, a.PeakAllocatedBytes)
	}
	c := estimateJSON(t, "--config", filepath.Join("..", "estimate", "testdata", "gpt2_config.json"), "--seq", "512", "--micro-batch", "4")
	g := estimateJSON(t, "--model", "gpt2", "--seq", "512", "--micro-batch", "4")
	if c.PeakAllocatedBytes != g.PeakAllocatedBytes {
		t.Errorf("config.json %d B, preset %d B", c.PeakAllocatedBytes, g.PeakAllocatedBytes)
	}
}

// Bad input: one line naming the flag or field, exit 2.
func TestEstimateUsageErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	wrongType := write("wrong_type.json", `{"model_type": "llama", "num_hidden_layers": "32", "hidden_size": 4096}`)
	array := write("array.json", `[1, 2]`)
	missing := write("missing.json", `{"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32, "vocab_size": 32000}`)
	negative := write("negative.json", `{"model_type": "llama", "num_hidden_layers": 2, "hidden_size": -4096, "num_attention_heads": 32, "vocab_size": 32000, "intermediate_size": 11008}`)
	truncated := write("truncated.json", `{"model_type": "llama", "num_hidden_layers": 2, "hidd`)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--model", "nope"}, "unknown model preset"},
		{[]string{}, "give --model"},
		{[]string{"--model", "gpt2", "--config", "x.json"}, "not both"},
		{[]string{"--config", "does-not-exist.json"}, "does-not-exist.json"},
		{[]string{"--model", "gpt2", "--gpu", "tpu"}, "--gpu: unknown gpu"},
		{[]string{"--model", "gpt2", "--gpu", "l4", "--sweep", "color=1,2"}, "unknown axis"},
		{[]string{"--model", "gpt2", "--sweep", "dtype=fp64"}, "unknown dtype"},
		{[]string{"--model", "gpt2", "--seq", "4096"}, "--seq 4096 exceeds the model's 1024 learned positions"},
		{[]string{"--model", "llama3-8b", "--seq", "9223372036854775807"}, "--seq 9223372036854775807: must be at most"},
		{[]string{"--model", "llama3-8b", "--seq", "1048576", "--micro-batch", "1048576"}, "--seq 1048576 x micro-batch 1048576 is too large"},
		{[]string{"--model", "gpt2", "--micro-batch", "0"}, "--micro-batch 0: must be at least 1"},
		{[]string{"--model", "gpt2", "--micro-batch", "-4"}, "--micro-batch -4: must be at least 1"},
		{[]string{"--model", "gpt2", "--tp", "0"}, "--tp 0: must be at least 1"},
		{[]string{"--model", "gpt2", "--tp", "5"}, "--tp 5 does not divide"},
		{[]string{"--model", "gpt2", "--dtype", "fp64"}, "unknown dtype"},
		{[]string{"--model", "gpt2", "--tp-plan", "diagonal"}, "unknown tp plan"},
		{[]string{"--model", "gpt2", "--param-dtype", "bf16"}, "need --fsdp"},
		{[]string{"--model", "gpt2", "--device-memory", "lots"}, "invalid size"},
		{[]string{"--model", "gpt2", "extra"}, "unexpected argument"},
		{[]string{"--model", "gpt2", "--zero", "7"}, "--zero 7: want a stage 0..3"},
		{[]string{"--config", wrongType}, "num_hidden_layers: want an integer, got string (byte offset"},
		{[]string{"--config", array}, "want a JSON object (a Hugging Face config.json), got array"},
		{[]string{"--config", missing}, "no num_hidden_layers or n_layer or num_layers"},
		{[]string{"--config", negative}, "hidden_size -4096: must be at least 1"},
		{[]string{"--config", truncated}, "truncated JSON at byte offset"},
	} {
		code, _, errs := estimateRun(t, c.args...)
		if code != ExitUsage || !strings.Contains(errs, c.want) || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
			t.Errorf("%v: exit %d, stderr %q (want one line with %q)", c.args, code, errs, c.want)
		}
	}
}

// --json and --out through the shared output switch: the run folder holds report.txt,
// report.json (the same document as --json), explain.txt and the charts.
func TestEstimateOutFolder(t *testing.T) {
	dir := t.TempDir()
	args := []string{"--model", "llama3-70b", "--dtype", "bf16-true", "--tp", "8", "--tp-plan", "megatron", "--pp", "4", "--dp", "8",
		"--zero", "1", "--seq", "8192", "--sp", "--recompute", "selective", "--gpu", "h100-80gb"}
	code, stdout, errs := estimateRun(t, append(args, "--out", dir, "--json")...)
	if code != 0 || !strings.Contains(errs, "wrote ") {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, f := range []string{"report.txt", "report.json", "explain.txt", "phases.svg", "phases.png", "ranks.svg", "ranks.png"} {
		st, err := os.Stat(filepath.Join(dir, "latest", f))
		if err != nil || st.Size() < 200 {
			t.Errorf("%s: %v", f, err)
		}
	}
	b, _ := os.ReadFile(filepath.Join(dir, "latest", "phases.svg"))
	if !strings.Contains(string(b), "activations") || !strings.Contains(string(b), "backward") {
		t.Errorf("phases.svg lacks its layers or labels")
	}
	var fromFile, fromStdout any
	js, _ := os.ReadFile(filepath.Join(dir, "latest", "report.json"))
	if json.Unmarshal(js, &fromFile) != nil || json.Unmarshal([]byte(stdout), &fromStdout) != nil || !jsonEqual(fromFile, fromStdout) {
		t.Errorf("report.json differs from --json")
	}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}
