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

// the real bundles of internal/whatif's tests (scripts/gpu/whatif.sh on an H100)
func whatifBundle(name string) string {
	return filepath.Join("..", "whatif", "testdata", "bundles", name)
}

type whatIfDoc struct {
	Command            string   `json:"command"`
	Changes            []string `json:"changes"`
	PeakAllocatedBytes int64    `json:"peak_allocated_bytes"`
	DeviceTotalBytes   int64    `json:"device_total_bytes"`
	Verdict            string   `json:"verdict"`
	RunPeak            int64    `json:"run_peak_allocated_bytes"`
	Rows               []struct {
		Term      string `json:"term"`
		RunBytes  int64  `json:"run_bytes"`
		Measured  bool   `json:"measured"`
		Predicted int64  `json:"predicted_bytes"`
	} `json:"rows"`
	Proposals []struct {
		Flags              string `json:"flags"`
		PeakAllocatedBytes int64  `json:"peak_allocated_bytes"`
		Verdict            string `json:"verdict"`
	} `json:"proposals"`
	Notes []string `json:"notes"`
}

// estimate --from BUNDLE with flags: each flag given is a change of the run's job; the
// prediction meets the real re-run (scripts/gpu/whatif.sh, re_bf16_mb16: 33272326656 B;
// re_fp32_mb8 with recompute: 25834088448 B) within 3%.
func TestEstimateFrom(t *testing.T) {
	for _, c := range []struct {
		args    []string
		changes string
		truth   int64
	}{
		{[]string{"--micro-batch", "16"}, "micro-batch 8 -> 16", 33272326656},
		{[]string{"--dtype", "fp32", "--recompute", "full"}, "dtype bf16 -> fp32, recompute none -> full", 25834088448},
		{[]string{"--trainer", "hf", "--dtype", "fp32", "--recompute", "full"}, "dtype bf16 -> fp32, recompute none -> full, optimizer adamw -> adamw-fused, keep-logits step -> none", 0},
	} {
		code, out, errb := estimateRun(t, append([]string{"--from", whatifBundle("wi_bf16_mb8"), "--json"}, c.args...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", c.args, code, errb)
		}
		var d whatIfDoc
		if err := json.Unmarshal([]byte(out), &d); err != nil {
			t.Fatal(err)
		}
		if d.Command != "estimate" || d.RunPeak != 25321212416 {
			t.Errorf("%v: command %q, run peak %d", c.args, d.Command, d.RunPeak)
		}
		got := strings.Join(d.Changes, ", ")
		for _, want := range strings.Split(c.changes, ", ") {
			if !strings.Contains(got, want) {
				t.Errorf("%v: changes %q, want %q", c.args, got, want)
			}
		}
		if c.truth > 0 {
			if e := float64(d.PeakAllocatedBytes)/float64(c.truth) - 1; math.Abs(e) > 0.03 {
				t.Errorf("%v: predicted %d B, the re-run %d B (%+.2f%%)", c.args, d.PeakAllocatedBytes, c.truth, 100*e)
			}
		}
		if len(d.Rows) < 10 || d.Verdict != "fits" {
			t.Errorf("%v: %d rows, verdict %s", c.args, len(d.Rows), d.Verdict)
		}
	}
	// the text report: the run, the prediction and the change per term
	code, out, errb := estimateRun(t, "--from", whatifBundle("wi_bf16_mb8"), "--micro-batch", "32")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	for _, want := range []string{"changes: micro-batch 8 -> 32", "kept after forward", "4.60 GiB *", "peak allocated", "45.8 GiB", "verdict: FITS"} {
		if !strings.Contains(out, want) {
			t.Errorf("text report lacks %q:\n%s", want, out)
		}
	}
}

// On the run that ran out of memory, --from lists the changes that fit.
func TestEstimateFromOOM(t *testing.T) {
	code, out, errb := estimateRun(t, "--from", whatifBundle("wi_oom_s512_mb48"), "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	var d whatIfDoc
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatal(err)
	}
	if d.Verdict != "does_not_fit" || len(d.Proposals) < 2 {
		t.Fatalf("verdict %s, proposals %+v", d.Verdict, d.Proposals)
	}
	found := false
	for _, p := range d.Proposals {
		// re_oom_mb48_ckpt: 63275596288 B
		if p.Flags == "--recompute full" {
			found = true
			if e := float64(p.PeakAllocatedBytes)/63275596288 - 1; math.Abs(e) > 0.03 {
				t.Errorf("--recompute full: predicted %d B (%+.2f%%)", p.PeakAllocatedBytes, 100*e)
			}
		}
	}
	if !found {
		t.Errorf("proposals %+v lack --recompute full", d.Proposals)
	}
}

// --sweep auto from a run: the table of micro-batch x recompute x precision.
func TestEstimateFromSweep(t *testing.T) {
	code, out, errb := estimateRun(t, "--from", whatifBundle("wi_fp32_mb8"), "--sweep", "micro-batch=8,16", "recompute=none,full", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	var d struct {
		Rows []struct {
			Values             map[string]any `json:"values"`
			PeakAllocatedBytes int64          `json:"peak_allocated_bytes"`
		} `json:"rows"`
	}
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatal(err)
	}
	if len(d.Rows) != 4 {
		t.Fatalf("%d rows", len(d.Rows))
	}
	// micro-batch 16 without recompute: re_fp32_mb16, 39509764608 B
	if e := float64(d.Rows[2].PeakAllocatedBytes)/39509764608 - 1; math.Abs(e) > 0.03 || d.Rows[2].Values["micro-batch"] != 16.0 {
		t.Errorf("row %v: %d B", d.Rows[2].Values, d.Rows[2].PeakAllocatedBytes)
	}
	code, out, _ = estimateRun(t, "--from", whatifBundle("wi_fp32_mb8"), "--sweep", "auto")
	if code != 0 || !strings.Contains(out, "micro-batch") || !strings.Contains(out, "fp32") {
		t.Errorf("--sweep auto: exit %d\n%s", code, out)
	}
}

// Bad --from input: one line, exit 2.
func TestEstimateFromErrors(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "snapshot.pickle")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	// a bundle whose process.json lacks the model facts (an older companion)
	old := filepath.Join(dir, "old")
	copyTree(t, whatifBundle("wi_bf16_mb8"), old)
	pj := filepath.Join(old, "rank0", "process.json")
	var info map[string]any
	b, _ := os.ReadFile(pj)
	if err := json.Unmarshal(b, &info); err != nil {
		t.Fatal(err)
	}
	delete(info, "model")
	b, _ = json.Marshal(info)
	if err := os.WriteFile(pj, b, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--from", file}, "is a file; --from takes the folder of a ptscope run bundle"},
		{[]string{"--from", dir}, "--from"},
		{[]string{"--from", old}, "does not record its model"},
		{[]string{"--from", whatifBundle("wi_bf16_mb8"), "--calibrate", whatifBundle("wi_bf16_mb8")}, "give --from or --calibrate, not both"},
		{[]string{"--from", whatifBundle("wi_bf16_mb8"), "--rank", "3"}, "no rank 3"},
		{[]string{"--from", whatifBundle("wi_bf16_mb8"), "--sweep", "model=gpt2"}, "keeps its model"},
		{[]string{"--config", "x.json", "--trainer", "lightning"}, `--trainer "lightning": want hf`},
	} {
		code, _, errb := estimateRun(t, c.args...)
		if code != 2 || !strings.Contains(errb, c.want) || strings.Count(strings.TrimSpace(errb), "\n") > 0 {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and one line with %q", c.args, code, errb, c.want)
		}
	}
	// given the model and the run's shape, the old bundle predicts as the new one does
	code, out, errb := estimateRun(t, "--from", old, "--config", filepath.Join("..", "estimate", "testdata", "llama32_1b_config.json"),
		"--run-micro-batch", "8", "--run-seq", "256", "--json", "--micro-batch", "16")
	if code != 0 {
		t.Fatalf("--config for a bundle without model facts: exit %d: %s", code, errb)
	}
	var d whatIfDoc
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatal(err)
	}
	if e := float64(d.PeakAllocatedBytes)/33272326656 - 1; math.Abs(e) > 0.03 {
		t.Errorf("predicted %d B (%+.2f%%)", d.PeakAllocatedBytes, 100*e)
	}
}

// analyze lists, for a bundle that ran out of memory, the changes that fit.
func TestAnalyzeProposals(t *testing.T) {
	var o, e bytes.Buffer
	code := Main(context.Background(), []string{"analyze", whatifBundle("wi_oom_s512_mb48")}, strings.NewReader(""), &o, &e)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, e.String())
	}
	for _, want := range []string{"What would fit (predicted from this run", "Its job needs 105 GiB allocated", "--recompute full", "--micro-batch 24 --grad-accum 2"} {
		if !strings.Contains(o.String(), want) {
			t.Errorf("analyze lacks %q:\n%s", want, o.String())
		}
	}
	o.Reset()
	code = Main(context.Background(), []string{"analyze", "--json", whatifBundle("wi_oom_s512_mb48")}, strings.NewReader(""), &o, &e)
	var d struct {
		Inputs []struct {
			Advice *struct {
				Why       string `json:"why"`
				Proposals []struct {
					Flags string `json:"flags"`
				} `json:"proposals"`
			} `json:"advice"`
		} `json:"inputs"`
	}
	if err := json.Unmarshal(o.Bytes(), &d); err != nil || code != 0 {
		t.Fatalf("exit %d: %v", code, err)
	}
	if len(d.Inputs) != 1 || d.Inputs[0].Advice == nil || d.Inputs[0].Advice.Why != "oom" || len(d.Inputs[0].Advice.Proposals) < 2 {
		t.Errorf("advice %+v", d.Inputs)
	}
	// a run that fits with room to spare gets none
	o.Reset()
	Main(context.Background(), []string{"analyze", whatifBundle("wi_bf16_mb8")}, strings.NewReader(""), &o, &e)
	if strings.Contains(o.String(), "What would fit") {
		t.Error("advice for a run that fits")
	}
}

// copyTree copies a bundle folder.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.Walk(src, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if fi.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}
