package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestEstimateCalibrate(t *testing.T) {
	bundle := filepath.Join("..", "..", "testdata", "bundles", "lm_small_bf16")
	if _, err := os.Stat(filepath.Join(bundle, "manifest.json")); err != nil {
		t.Skip("bundle not available")
	}
	args := []string{"--model", "lm-small", "--seq", "512", "--micro-batch", "8", "--dtype", "bf16", "--calibrate", bundle}
	code, out, errs := estimateRun(t, args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"against a real run, rank 0", "peak allocated", "optimizer state", "backward peak", "How each measured number is derived"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	code, out, errs = estimateRun(t, append(args, "--json")...)
	if code != 0 {
		t.Fatalf("json exit %d: %s", code, errs)
	}
	var doc struct {
		SchemaVersion int    `json:"schema_version"`
		Command       string `json:"command"`
		// the estimate's model, setup and params, in the shape of estimate --json
		Model struct {
			Name   string `json:"name"`
			Layers int    `json:"layers"`
		} `json:"model"`
		Setup struct {
			Seq        int `json:"seq"`
			MicroBatch int `json:"micro_batch"`
		} `json:"setup"`
		Params int64 `json:"params"`
		Rows   []struct {
			Term          string `json:"term"`
			MeasuredBytes int64  `json:"measured_bytes"`
			Measured      bool   `json:"measured"`
		} `json:"rows"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || doc.SchemaVersion != 2 || doc.Command != "estimate" || len(doc.Rows) != 8 {
		t.Fatalf("json %v: %s", err, out)
	}
	if doc.Model.Name != "lm-small" || doc.Model.Layers == 0 || doc.Setup.Seq != 512 || doc.Setup.MicroBatch != 8 || doc.Params == 0 {
		t.Errorf("model %+v setup %+v params %d: want the estimate's", doc.Model, doc.Setup, doc.Params)
	}
	if r := doc.Rows[0]; r.Term != "peak allocated" || r.MeasuredBytes != 5673316352 || !r.Measured {
		t.Errorf("peak row %+v", r)
	}
	code, _, errs = estimateRun(t, "--model", "lm-small", "--calibrate", t.TempDir())
	if code != 2 || !strings.Contains(errs, "--calibrate") {
		t.Errorf("missing bundle: exit %d stderr %q", code, errs)
	}
}
