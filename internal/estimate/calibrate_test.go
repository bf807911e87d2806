package estimate

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// readPhases reads a bundle rank's phases.jsonl (the estimate package does not
// depend on the capture package; the CLI converts bundle.Phase the same way).
func readPhases(t *testing.T, path string) []PhaseMeasure {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Skipf("bundle not available: %v", err)
	}
	defer f.Close()
	var out []PhaseMeasure
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var p struct {
			Phase                   string `json:"phase"`
			Step                    int    `json:"step"`
			AllocatedBeforeBytes    int64  `json:"allocated_before_bytes"`
			AllocatedAfterBytes     int64  `json:"allocated_after_bytes"`
			MaxAllocatedBeforeBytes int64  `json:"max_allocated_before_bytes"`
			MaxAllocatedAfterBytes  int64  `json:"max_allocated_after_bytes"`
			Parent                  string `json:"parent"`
			Aborted                 bool   `json:"aborted"`
		}
		if err := json.Unmarshal(sc.Bytes(), &p); err != nil {
			t.Fatal(err)
		}
		out = append(out, PhaseMeasure{Name: p.Phase, Step: p.Step, AllocatedBefore: p.AllocatedBeforeBytes,
			AllocatedAfter: p.AllocatedAfterBytes, MaxAllocatedBefore: p.MaxAllocatedBeforeBytes,
			MaxAllocatedAfter: p.MaxAllocatedAfterBytes, Nested: p.Parent != "", Aborted: p.Aborted})
	}
	return out
}

// The real bundle testdata/bundles/lm_small_bf16 (H200, transformer_lm small,
// context 512, batch 8, bf16 autocast, AdamW): its phases give each term.
func TestCalibrateRealBundle(t *testing.T) {
	phases := readPhases(t, filepath.Join("..", "..", "testdata", "bundles", "lm_small_bf16", "rank0", "phases.jsonl"))
	m, err := Preset("lm-small")
	if err != nil {
		t.Fatal(err)
	}
	s := DefaultSetup()
	s.Seq, s.MicroBatch, s.DType = 512, 8, BF16Mixed
	r, err := Estimate(m, s, DefaultDevice())
	if err != nil {
		t.Fatal(err)
	}
	c := Calibrate(r, Measurement{Source: "lm_small_bf16", Mode: "capture", MaxAllocatedBytes: 1977152000, Phases: phases})
	// measured values, read off phases.jsonl by hand
	want := map[string]int64{
		"peak allocated":                           5673316352,              // backward's max_allocated_after
		"parameters":                               498624512,               // before the first forward
		"optimizer state":                          2489853440 - 1491189248, // first optimizer step's growth: 2 x 4 B x params
		"activations (kept after forward)":         4849135104 - 1565446144, // step 8: backward start - forward start
		"gradients (+ outputs held by the caller)": 2489616384 - 1565446144, // grads + the bf16 logits the script holds
		"forward peak":                             4849300992,              // step 2 (peak reset after warm-up): loss included
		"backward peak":                            5673316352,
		"optimizer_step peak":                      2994453504, // step 8, peak reset before the optimizer
	}
	if len(c.Rows) != len(want) {
		t.Fatalf("rows %+v", c.Rows)
	}
	for _, row := range c.Rows {
		w, ok := want[row.Term]
		if !ok || !row.Measured || row.MeasuredBytes != w {
			t.Errorf("%s: measured %d (%v), want %d", row.Term, row.MeasuredBytes, row.Measured, w)
			continue
		}
		if row.DiffBytes != row.EstimateBytes-w {
			t.Errorf("%s: diff %d", row.Term, row.DiffBytes)
		}
	}
	// the analytic model agrees with this run on the model states and the peak
	for _, term := range []string{"peak allocated", "parameters", "optimizer state", "backward peak"} {
		for _, row := range c.Rows {
			if row.Term == term && (row.DiffRatio > 0.02 || row.DiffRatio < -0.02) {
				t.Errorf("%s: estimate %d vs measured %d (%+.2f%%)", term, row.EstimateBytes, row.MeasuredBytes, 100*row.DiffRatio)
			}
		}
	}
}

func TestCalibrateWithoutPhases(t *testing.T) {
	m, _ := Preset("lm-small")
	s := DefaultSetup()
	s.Seq, s.MicroBatch = 256, 4
	r, err := Estimate(m, s, DefaultDevice())
	if err != nil {
		t.Fatal(err)
	}
	c := Calibrate(r, Measurement{Mode: "fake", Simulated: true, MaxAllocatedBytes: 3 << 30})
	if !c.Rows[0].Measured || c.Rows[0].MeasuredBytes != 3<<30 || c.Rows[0].DiffBytes != r.Top().PeakAllocatedBytes-3<<30 {
		t.Errorf("peak row %+v", c.Rows[0])
	}
	for _, row := range c.Rows[1:] {
		if row.Measured {
			t.Errorf("%s measured without phases", row.Term)
		}
	}
	if len(c.Notes) != 2 {
		t.Errorf("notes %q", c.Notes)
	}
}
