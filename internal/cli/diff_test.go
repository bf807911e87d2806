package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ptscope/ptscope/internal/export"
	"github.com/ptscope/ptscope/internal/input"
)

const bundleTracePath = "../../testdata/bundles/lm_small_bf16/rank0/trace_step4.pt.trace.json.gz"

// shortTrace writes the bundle's trace without its events shorter than
// 20 us into dir: a second real-derived trace to compare with.
func shortTrace(t *testing.T, dir string) string {
	t.Helper()
	var buf bytes.Buffer
	if _, err := export.TrimTrace(context.Background(), func() (io.ReadCloser, error) { return input.NewSource(0, nil, nil).Open(bundleTracePath) }, &buf,
		export.TraceTrim{MinDuration: 20_000}); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "short.pt.trace.json")
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	p := filepath.Join("testdata", name)
	if *update {
		os.WriteFile(p, []byte(got), 0o644)
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (go test ./internal/cli -update after checking):\n%s", p, got)
	}
}

func checkWidth(t *testing.T, out string, width int) {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if n := len([]rune(l)); n > width {
			t.Errorf("line of %d columns over %d: %q", n, width, l)
		}
	}
}

// TestDiffGolden: the text of a memory and a trace comparison at 80 and
// 100 columns, every line within the width.
func TestDiffGolden(t *testing.T) {
	dir := t.TempDir()
	short := shortTrace(t, dir)
	for _, c := range []struct {
		name string
		a, b string
	}{
		{"diff_memory", snap("validate_gpt2tiny_fp32.pickle.xz"), snap("leak_gpt2_2l.pickle.xz")},
		{"diff_trace", bundleTracePath, short},
	} {
		for _, width := range []string{"80", "100"} {
			t.Setenv("COLUMNS", width)
			code, out, errs := run(t, "diff", c.a, c.b)
			if code != 0 {
				t.Fatalf("%s: exit %d: %s", c.name, code, errs)
			}
			out = strings.ReplaceAll(out, dir, "$TMP")
			w := 80
			if width == "100" {
				w = 100
			}
			checkWidth(t, out, w)
			golden(t, c.name+"_"+width+".golden", out)
		}
	}
}

// TestDiffJSONGolden: the document of two small real snapshots.
func TestDiffJSONGolden(t *testing.T) {
	t.Parallel()
	code, out, errs := run(t, "diff", "--json", snap("oom_capacity.pickle.xz"), snap("oom_fragmentation.pickle.xz"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var v any
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatal(err)
	}
	pretty, _ := json.MarshalIndent(v, "", "  ")
	golden(t, "diff_oom.json.golden", string(pretty)+"\n")
}

// TestDiffJSONContract: the keys scripts rely on, and the peaks of two real
// snapshots and their change within 1% of what torch measured
// (testdata/snapshots/facts.jsonl: 1,414,996,992 B and 415,645,696 B).
func TestDiffJSONContract(t *testing.T) {
	t.Parallel()
	code, out, errs := run(t, "diff", "--json", snap("validate_gpt2tiny_fp32.pickle.xz"), snap("expandable_gpt2_2l.pickle.xz"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var doc struct {
		SchemaVersion int    `json:"schema_version"`
		Tool          string `json:"tool"`
		Command       string `json:"command"`
		Memory        []struct {
			PeakAllocated struct {
				A      int64    `json:"a_bytes"`
				B      int64    `json:"b_bytes"`
				Delta  int64    `json:"delta_bytes"`
				Change *float64 `json:"change_ratio"`
			} `json:"peak_allocated"`
			Stacks []struct {
				Status string `json:"status"`
				Frames []any  `json:"frames"`
			} `json:"stacks"`
			Phases []struct {
				Phase string `json:"phase"`
			} `json:"phases"`
		} `json:"memory"`
		Trace    []any `json:"trace"`
		Findings []struct {
			ID       string `json:"id"`
			Severity string `json:"severity"`
		} `json:"findings"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.SchemaVersion != 2 || doc.Tool != "ptscope" || doc.Command != "diff" || len(doc.Memory) != 1 || doc.Trace == nil {
		t.Fatalf("envelope %+v", doc)
	}
	p := doc.Memory[0].PeakAllocated
	const ta, tb = 1414996992, 415645696
	if !within(p.A, ta) || !within(p.B, tb) || !within(p.Delta, tb-ta) || p.Change == nil {
		t.Errorf("peaks %d -> %d (%d); torch %d -> %d (%d)", p.A, p.B, p.Delta, int64(ta), int64(tb), int64(tb-ta))
	}
	if len(doc.Memory[0].Stacks) == 0 || doc.Memory[0].Stacks[0].Status == "" || len(doc.Memory[0].Phases) == 0 {
		t.Errorf("stacks/phases missing")
	}
	if len(doc.Findings) == 0 || doc.Findings[0].ID != "peak-decrease" {
		t.Errorf("findings %+v", doc.Findings)
	}
	if strings.Contains(out, "_us\"") {
		t.Error("a _us key in the document")
	}
}

func within(got, want int64) bool {
	d := float64(got - want)
	if d < 0 {
		d = -d
	}
	w := float64(want)
	if w < 0 {
		w = -w
	}
	return d <= 0.01*w
}

// TestDiffBundlesAndFolders: bundles compare snapshots and traces; an
// --out run folder is written; mismatched kinds and bad input exit 2.
func TestDiffBundlesAndFolders(t *testing.T) {
	t.Parallel()
	b := filepath.Join("..", "..", "testdata", "bundles", "lm_small_bf16")
	phasesOnly := filepath.Join("..", "..", "testdata", "simulate", "real2")
	code, out, errs := run(t, "diff", b, b)
	if code != 0 || !strings.Contains(out, "Memory: rank 0, snapshot_end.pickle, device 0") || !strings.Contains(out, "Trace: rank 0") {
		t.Fatalf("bundles: exit %d: %s\n%s", code, errs, out)
	}
	dir := t.TempDir()
	code, _, errs = run(t, "diff", "--out", dir, snap("validate_gpt2tiny_fp32.pickle.xz"), snap("leak_gpt2_2l.pickle.xz"))
	if code != 0 || !strings.Contains(errs, "wrote ") {
		t.Fatalf("--out: exit %d: %s", code, errs)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "*_diff_validate_gpt2tiny_fp32_vs_leak_gpt2_2l", "report.json")); len(m) != 1 {
		t.Errorf("run folder: %v", m)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"diff", snap("validate_gpt2tiny_fp32.pickle.xz")}, "give two inputs"},
		{[]string{"diff", snap("validate_gpt2tiny_fp32.pickle.xz"), bundleTracePath}, "diff compares snapshots with snapshots and traces with traces"},
		{[]string{"diff", snap("validate_gpt2tiny_fp32.pickle.xz"), filepath.Join(dir, "nope.pickle")}, "nope.pickle"},
		{[]string{"diff", phasesOnly, phasesOnly}, "the bundle holds no snapshot and no trace (phases only)"},
		{[]string{"diff", filepath.Join(phasesOnly, "rank1"), b}, "the bundle holds no snapshot and no trace (phases only)"},
		{[]string{"diff", "--top", "0", "a", "b"}, "--top must be at least 1, not 0"},
		{[]string{"diff", "--top", "-1", "a", "b"}, "--top must be at least 1, not -1"},
		{[]string{"check", "--baseline", snap("leak_gpt2_2l.pickle.xz"), snap("validate_gpt2tiny_fp32.pickle.xz")}, "--baseline needs"},
		{[]string{"check", "--max-peak-increase", "5%", snap("validate_gpt2tiny_fp32.pickle.xz")}, "need --baseline"},
		{[]string{"check", "--baseline", snap("leak_gpt2_2l.pickle.xz"), "--max-step-time-increase", "5%", snap("validate_gpt2tiny_fp32.pickle.xz")}, "needs profiler traces on both sides"},
		{[]string{"check", "--baseline", snap("leak_gpt2_2l.pickle.xz"), "--max-peak-increase", "lots", snap("validate_gpt2tiny_fp32.pickle.xz")}, "--max-peak-increase"},
	} {
		code, out, errs := run(t, c.args...)
		if code != 2 || out != "" || strings.Count(strings.TrimSpace(errs), "\n") != 0 || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and one line with %q", c.args, code, out, errs, c.want)
		}
	}
}

// TestCheckBaseline: exit 1 when the peak or the step time grew more than
// allowed, 0 otherwise.
func TestCheckBaseline(t *testing.T) {
	t.Parallel()
	small, big := snap("leak_gpt2_2l.pickle.xz"), snap("validate_gpt2tiny_fp32.pickle.xz")
	code, out, errs := run(t, "check", "--baseline", small, "--max-peak-increase", "5%", big)
	if code != 1 || !strings.Contains(errs, "peak allocated grew +80.9% (746 MiB -> 1.32 GiB) > 5.0%") || !strings.Contains(out, "device 0: peak allocated 746 MiB -> 1.32 GiB") {
		t.Errorf("growth: exit %d\n%s%s", code, out, errs)
	}
	if code, out, errs = run(t, "check", "--baseline", big, "--max-peak-increase", "5%", small); code != 0 || !strings.Contains(out, "check passed") {
		t.Errorf("shrink: exit %d\n%s%s", code, out, errs)
	}
	if code, _, errs = run(t, "check", "--baseline", small, "--max-peak-increase", "90%", big); code != 0 {
		t.Errorf("within 90%%: exit %d %s", code, errs)
	}
	short := shortTrace(t, t.TempDir())
	// without its short events the step is faster: no regression one way,
	// a regression the other
	if code, _, errs = run(t, "check", "--baseline", bundleTracePath, "--max-step-time-increase", "5%", short); code != 0 {
		t.Errorf("faster trace: exit %d %s", code, errs)
	}
	if code, _, errs = run(t, "check", "--baseline", short, "--max-step-time-increase", "5%", bundleTracePath); code != 1 || !strings.Contains(errs, "average step time grew") {
		t.Errorf("slower trace: exit %d %s", code, errs)
	}
}

// TestDiffHTML: --html writes the comparison page beside the text, which
// it does not change.
func TestDiffHTML(t *testing.T) {
	t.Parallel()
	page := filepath.Join(t.TempDir(), "diff.html")
	a, b := snap("validate_gpt2tiny_fp32.pickle.xz"), snap("leak_gpt2_2l.pickle.xz")
	code, out, errs := run(t, "diff", "--html", page, a, b)
	_, plain, _ := run(t, "diff", a, b)
	h, err := os.ReadFile(page)
	if code != 0 || err != nil || out != plain || !strings.Contains(errs, "wrote "+page) {
		t.Fatalf("exit %d, %v, stderr %q, text changed: %v", code, err, errs, out != plain)
	}
	if !strings.HasPrefix(string(h), "<!doctype html>") || !strings.Contains(string(h), "leak-appeared") {
		t.Errorf("page: %.200s", h)
	}
}
