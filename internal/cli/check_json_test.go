package cli

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ptscope/ptscope/internal/check"
	"github.com/ptscope/ptscope/internal/testfixture"
)

// TestCheckJSON: check --json is one document on stdout with every
// threshold applied to every input (values from the real snapshots: torch's
// max_memory_allocated, testdata/snapshots/facts.jsonl), the verdict, and
// the exit status of the text.
func TestCheckJSON(t *testing.T) {
	t.Parallel()
	tiny, leak := snap("validate_gpt2tiny_fp32.pickle.xz"), snap("leak_gpt2_2l.pickle.xz")
	code, out, errs := run(t, "check", "--json", "--max-peak", "1GiB", "--no-leak", tiny, leak)
	var doc check.Doc
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
	doc = check.Doc{}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || code != 0 || !doc.Passed || len(doc.Checks) != 1 || len(doc.Failures) != 0 {
		t.Errorf("passing check: exit %d, %v, %+v", code, err, doc)
	}
}

// A bundle recorded without allocator snapshots (phases only) never passes
// silently: --max-peak is checked against torch's running maximum as its
// phases read it (here against phases.jsonl itself), and thresholds that
// need a snapshot fail, saying why.
func TestCheckPhasesOnly(t *testing.T) {
	t.Parallel()
	dir := filepath.Join("..", "..", "testdata", "simulate", "real2")
	var top int64
	for _, r := range []string{"rank0", "rank1"} {
		f, err := os.Open(filepath.Join(dir, r, "phases.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var ph struct {
				Before int64 `json:"max_allocated_before_bytes"`
				After  int64 `json:"max_allocated_after_bytes"`
			}
			if err := json.Unmarshal(sc.Bytes(), &ph); err != nil {
				t.Fatal(err)
			}
			top = max(top, ph.Before, ph.After)
		}
		f.Close()
	}
	for _, c := range []struct {
		limit  int64
		passed bool
	}{{top, true}, {top - 1, false}} {
		code, out, _ := run(t, "check", "--json", "--max-peak", strconv.FormatInt(c.limit, 10), dir)
		var doc check.Doc
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatalf("exit %d: %v: %q", code, err, out)
		}
		var most int64
		for _, r := range doc.Checks {
			if r.Metric != "peak_allocated_bytes" || r.Value == nil || r.Device != -1 || r.Rank < 0 {
				t.Errorf("%+v", r)
				continue
			}
			most = max(most, int64(*r.Value))
		}
		if len(doc.Checks) != 2 || most != top || doc.Passed != c.passed || (code == 0) != c.passed {
			t.Errorf("--max-peak %d: exit %d, passed %v, peak %d (phases %d), %d checks", c.limit, code, doc.Passed, most, top, len(doc.Checks))
		}
	}
	code, _, errs := run(t, "check", "--no-leak", filepath.Join(dir, "rank0"))
	if code != 1 || !strings.Contains(errs, "--no-leak cannot be checked: phases only, no allocator snapshot") {
		t.Errorf("--no-leak: exit %d: %s", code, errs)
	}
}

// --no-oom fails a run recorded in windows that ran out of memory even
// when the view holds no OOM: its snapshot at the error missing (the real
// oom bundle without it), the OOM observer's record counts.
func TestCheckNoOOMRecorded(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := testfixture.ExtractBundle(testfixture.Testdata(t, "bundles", "windows", "oom.tar.xz"), dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "rank0", "snapshot_oom.pickle")); err != nil {
		t.Fatal(err)
	}
	code, out, errs := run(t, "check", "--no-oom", dir)
	if code != 1 || !strings.Contains(out+errs, "1 out-of-memory events") {
		t.Errorf("exit %d: %s%s", code, out, errs)
	}
}
