package cli

import (
	"encoding/json"
	"testing"
)

// TestCheckJSON: check --json is one document on stdout with every
// threshold applied to every input (values from the real snapshots: torch's
// max_memory_allocated, testdata/snapshots/facts.jsonl), the verdict, and
// the exit status of the text.
func TestCheckJSON(t *testing.T) {
	t.Parallel()
	tiny, leak := snap("validate_gpt2tiny_fp32.pickle.xz"), snap("leak_gpt2_2l.pickle.xz")
	code, out, errs := run(t, "check", "--json", "--max-peak", "1GiB", "--no-leak", tiny, leak)
	var doc checkDoc
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("exit %d, %v: %q", code, err, out)
	}
	if code != 1 || doc.Passed || doc.Command != "check" || doc.SchemaVersion != 2 || len(doc.Failures) != 2 || errs == "" {
		t.Fatalf("exit %d, %+v, stderr %q", code, doc, errs)
	}
	want := map[string]struct {
		v  float64
		ok bool
	}{
		leak + " peak_allocated_bytes": {782174720, true},
		tiny + " peak_allocated_bytes": {1414996992, false},
		tiny + " leak_per_step_bytes":  {0, true},
	}
	n := 0
	for _, c := range doc.Checks {
		w, ok := want[c.Input+" "+c.Metric]
		if !ok {
			continue
		}
		n++
		if c.Value == nil || *c.Value != w.v || c.Passed != w.ok || c.Device != 0 || c.Rank != -1 {
			t.Errorf("%+v, want value %v passed %v", c, w.v, w.ok)
		}
	}
	if n != len(want) || len(doc.Checks) != 4 {
		t.Errorf("%d checks: %+v", len(doc.Checks), doc.Checks)
	}

	code, out, _ = run(t, "check", "--json", "--max-peak", "2GiB", tiny)
	doc = checkDoc{}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || code != 0 || !doc.Passed || len(doc.Checks) != 1 || len(doc.Failures) != 0 {
		t.Errorf("passing check: exit %d, %v, %+v", code, err, doc)
	}
}
