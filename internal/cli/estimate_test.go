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
	"time"
)

func estimateRun(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var o, e bytes.Buffer
	code = Main(context.Background(), append([]string{"estimate"}, args...), strings.NewReader(""), &o, &e)
	return code, o.String(), e.String()
}

type estimateDoc struct {
	SchemaVersion      int              `json:"schema_version"`
	PeakAllocatedBytes int64            `json:"peak_allocated_bytes"`
	PeakReservedBytes  int64            `json:"peak_reserved_bytes"`
	DeviceTotalBytes   int64            `json:"device_total_bytes"`
	Fits               *bool            `json:"fits"`
	Name               string           `json:"name"`
	Breakdown          map[string]int64 `json:"breakdown"`
	Phases             []struct {
		Name  string `json:"name"`
		Bytes int64  `json:"bytes"`
	} `json:"phases"`
	Terms []struct {
		Name  string `json:"name"`
		Bytes int64  `json:"bytes"`
		Where string `json:"where"`
	} `json:"terms"`
	Ranks []struct {
		Name               string `json:"name"`
		PeakAllocatedBytes int64  `json:"peak_allocated_bytes"`
		DeviceTotalBytes   int64  `json:"device_total_bytes"`
	} `json:"ranks"`
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
	d := estimateJSON(t, "--model", "gpt2", "--seq", "512", "--micro-batch", "4")
	if d.SchemaVersion != 1 || d.Fits != nil || len(d.Phases) != 3 || len(d.Ranks) != 0 {
		t.Fatalf("unexpected document: %+v", d)
	}
	if e := float64(d.PeakAllocatedBytes)/5538270208 - 1; math.Abs(e) > 0.02 {
		t.Errorf("peak_allocated_bytes %d is %+.2f%% off the measured 5538270208", d.PeakAllocatedBytes, e*100)
	}
	var alloc, reserved, device int64
	for _, tm := range d.Terms {
		switch tm.Where {
		case "allocated":
			alloc += tm.Bytes
		case "reserved":
			reserved += tm.Bytes
		case "device":
			device += tm.Bytes
		}
		if d.Breakdown[tm.Name] != tm.Bytes {
			t.Errorf("breakdown[%s] = %d, term says %d", tm.Name, d.Breakdown[tm.Name], tm.Bytes)
		}
	}
	if alloc != d.PeakAllocatedBytes {
		t.Errorf("allocated terms sum to %d, peak_allocated_bytes %d", alloc, d.PeakAllocatedBytes)
	}
	if d.PeakReservedBytes < alloc+reserved || d.PeakReservedBytes > alloc+reserved+2<<20 || d.DeviceTotalBytes != d.PeakReservedBytes+device {
		t.Errorf("reserved %d / device %d do not follow from the terms (%d, %d, %d)", d.PeakReservedBytes, d.DeviceTotalBytes, alloc, reserved, device)
	}
}

func TestEstimateVerdict(t *testing.T) {
	if d := estimateJSON(t, "--model", "lm-xl", "--seq", "512", "--micro-batch", "4", "--gpu", "h100-80gb"); d.Fits == nil || !*d.Fits {
		t.Errorf("lm-xl batch 4 x 512 should fit an H100 (measured 32.2 GB): %+v", d.Fits)
	}
	if d := estimateJSON(t, "--model", "lm-xl", "--seq", "512", "--micro-batch", "4", "--device-memory", "24GiB"); d.Fits == nil || *d.Fits {
		t.Errorf("lm-xl batch 4 x 512 fp32 AdamW does not fit 24 GiB")
	}
	code, out, _ := estimateRun(t, "--model", "lm-xl", "--seq", "512", "--gpu", "4090")
	if code != 0 || !strings.Contains(out, "DOES NOT FIT on 4090") {
		t.Errorf("exit %d, want a DOES NOT FIT verdict:\n%s", code, out)
	}
}

// The example: pipeline ranks differ, the top level is the most loaded one, it explains
// itself, and it runs well under 100 ms.
func TestEstimateLlama70B(t *testing.T) {
	args := []string{"--model", "llama3-70b", "--tp", "8", "--pp", "4", "--dp", "8", "--zero", "1", "--seq", "8192",
		"--micro-batch", "1", "--dtype", "bf16", "--recompute", "selective", "--gpu", "h100-80gb"}
	start := time.Now()
	code, out, errs := estimateRun(t, append(args, "--explain")...)
	if el := time.Since(start); el > 100*time.Millisecond {
		t.Errorf("took %v", el)
	}
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"pp_stage_0", "pp_stage_3", "most loaded", "one residual-stream tensor: 128 MiB = micro_batch·seq/cp·hidden·2 B/1 = 1·8192·8192·2/1",
		"optimizer_state", "nccl_buffers", "cuda_context", "verdict: DOES NOT FIT on h100-80gb", "hint: --sp"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if d := estimateJSON(t, append(args, "--sp")...); d.Fits == nil || !*d.Fits {
		t.Errorf("with sequence parallelism the 70B layout should fit an H100")
	}
	d := estimateJSON(t, args...)
	if len(d.Ranks) != 4 {
		t.Fatalf("%d ranks", len(d.Ranks))
	}
	for _, r := range d.Ranks {
		if r.DeviceTotalBytes > d.DeviceTotalBytes {
			t.Errorf("rank %s (%d) is more loaded than the top level (%s, %d)", r.Name, r.DeviceTotalBytes, d.Name, d.DeviceTotalBytes)
		}
	}
}

func TestEstimateSweep(t *testing.T) {
	code, out, errs := estimateRun(t, "--model", "lm-large", "--gpu", "4090", "--sweep", "micro-batch=1..64", "seq=256,512")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(out, "largest setting that fits: micro-batch=") || strings.Count(out, "\n") < 16 {
		t.Errorf("sweep output:\n%s", out)
	}
	code, out2, _ := estimateRun(t, "--model", "lm-large", "--gpu", "4090", "--sweep", "micro-batch=1..64", "--sweep", "seq=256,512")
	if code != 0 || out2 != out {
		t.Errorf("repeated --sweep differs from axes given as arguments")
	}
	code, out, _ = estimateRun(t, "--model", "lm-large", "--gpu", "4090", "--sweep", "micro-batch=1..8", "--json")
	var doc struct {
		Rows []struct {
			Values map[string]int `json:"values"`
			Fits   bool           `json:"fits"`
		} `json:"rows"`
		Best *struct {
			Values map[string]int `json:"values"`
		} `json:"best"`
	}
	if err := json.Unmarshal([]byte(out), &doc); code != 0 || err != nil || len(doc.Rows) != 4 {
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

func TestEstimateUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--model", "nope"}, "unknown model preset"},
		{[]string{}, "give --model"},
		{[]string{"--model", "gpt2", "--config", "x.json"}, "not both"},
		{[]string{"--config", "does-not-exist.json"}, "does-not-exist.json"},
		{[]string{"--model", "gpt2", "--gpu", "tpu"}, "unknown gpu"},
		{[]string{"--model", "gpt2", "--sweep", "micro-batch=1..4"}, "needs --gpu"},
		{[]string{"--model", "gpt2", "--gpu", "l4", "--sweep", "color=1,2"}, "unknown axis"},
		{[]string{"--model", "gpt2", "--seq", "4096"}, "learned positions"},
		{[]string{"--model", "gpt2", "--device-memory", "lots"}, "invalid size"},
		{[]string{"--model", "gpt2", "extra"}, "unexpected argument"},
		{[]string{"--model", "gpt2", "--zero", "7"}, "zero stage"},
	} {
		code, _, errs := estimateRun(t, c.args...)
		if code != ExitUsage || !strings.Contains(errs, c.want) || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
			t.Errorf("%v: exit %d, stderr %q (want one line with %q)", c.args, code, errs, c.want)
		}
	}
}

func TestEstimateExplainGolden(t *testing.T) {
	code, out, errs := estimateRun(t, "--model", "lm-small", "--seq", "512", "--micro-batch", "4", "--dtype", "bf16", "--amp", "--gpu", "h100-80gb", "--explain")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	golden := filepath.Join("..", "estimate", "testdata", "estimate_explain.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if out != string(want) {
		t.Errorf("output differs from %s (go test -update to rewrite):\n%s", golden, out)
	}
}

func TestEstimateOutFolder(t *testing.T) {
	dir := t.TempDir()
	code, _, errs := estimateRun(t, "--model", "llama3-70b", "--tp", "8", "--pp", "4", "--dp", "8", "--zero", "1", "--seq", "8192",
		"--dtype", "bf16", "--sp", "--recompute", "selective", "--gpu", "h100-80gb", "--out", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, f := range []string{"estimate.txt", "estimate.json", "phases.svg", "phases.png", "ranks.svg", "ranks.png"} {
		st, err := os.Stat(filepath.Join(dir, "latest", f))
		if err != nil || st.Size() < 200 {
			t.Errorf("%s: %v", f, err)
		}
	}
	b, _ := os.ReadFile(filepath.Join(dir, "latest", "phases.svg"))
	if !strings.Contains(string(b), "activations") || !strings.Contains(string(b), "backward") {
		t.Errorf("phases.svg lacks its layers or labels")
	}
}
