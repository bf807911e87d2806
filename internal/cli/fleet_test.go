package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ptscope/ptscope/internal/check"
	"github.com/ptscope/ptscope/internal/fleet/fleetgen"
	"github.com/ptscope/ptscope/internal/input"
	"github.com/ptscope/ptscope/internal/testfixture"
	"github.com/ptscope/ptscope/internal/units"
)

// writeFleet writes n ranks of a real snapshot (validate_gpt2tiny_fp32,
// rank 0 at 1.3x its sizes), with the real out-of-memory run as rank 9 when
// n > 9, and a synthetic FSDP trace per rank with rank 7 loading its data
// slowly.
func writeFleet(t *testing.T, n int) string {
	t.Helper()
	read := func(name string) []byte {
		r, err := input.NewSource(0, nil, nil).Open(snap(name))
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		b, err := io.ReadAll(r)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	dir := t.TempDir()
	o := fleetgen.Options{Ranks: n, Snapshot: read("validate_gpt2tiny_fp32.pickle.xz"), Sizes: map[int]float64{0: 1.3},
		SlowData: []int{7}, Traces: true, TraceSteps: 3, Special: map[int][]byte{}}
	if n > 9 {
		o.Special[9] = read("oom_capacity.pickle.xz")
	}
	if _, err := fleetgen.Write(dir, o); err != nil {
		t.Fatal(err)
	}
	return dir
}

func checkScreen(t *testing.T, out string, maxLines int) {
	t.Helper()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) > maxLines {
		t.Errorf("%d lines (at most %d):\n%s", len(lines), maxLines, out)
	}
	for _, l := range lines {
		if utf8.RuneCountInString(l) > 100 {
			t.Errorf("line over 100 columns: %q", l)
		}
	}
}

func TestAnalyzeFleet(t *testing.T) {
	t.Parallel()
	dir := writeFleet(t, 12)
	code, out, errs := run(t, "analyze", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"Fleet of 12 ranks: 12 snapshots", "peak allocated", "out of memory 1 rank (9)",
		"fleet-oom", "ptscope analyze --rank 9", "Ranks by peak allocated"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
	checkScreen(t, out, 60)

	code, out, errs = run(t, "analyze", "--json", dir)
	if code != 0 {
		t.Fatalf("json: exit %d: %s", code, errs)
	}
	var doc struct {
		SchemaVersion int    `json:"schema_version"`
		Command       string `json:"command"`
		Fleet         bool   `json:"fleet"`
		Ranks         int    `json:"ranks"`
		Memory        struct {
			Ranks         []map[string]any `json:"ranks"`
			PeakAllocated map[string]any   `json:"peak_allocated"`
			OOMRanks      []int            `json:"oom_ranks"`
		} `json:"memory"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.SchemaVersion != 2 || doc.Command != "analyze" || !doc.Fleet || doc.Ranks != 12 || len(doc.Memory.Ranks) != 12 ||
		doc.Memory.PeakAllocated["max_rank"] != 9.0 || len(doc.Memory.OOMRanks) != 1 {
		t.Errorf("document %+v", doc)
	}

	// --rank: that rank's own report
	code, out, errs = run(t, "analyze", "--rank", "3", dir)
	if code != 0 || strings.Contains(out, "Fleet of") || !strings.Contains(out, "rank3") {
		t.Errorf("--rank 3: exit %d, %s\n%s", code, errs, out)
	}
	code, out, _ = run(t, "analyze", "--json", "--rank", "9", dir)
	var one struct {
		Inputs []struct {
			Devices []struct {
				OOMs []any `json:"ooms"`
			} `json:"devices"`
		} `json:"inputs"`
	}
	if err := json.Unmarshal([]byte(out), &one); code != 0 || err != nil || len(one.Inputs) != 1 || len(one.Inputs[0].Devices[0].OOMs) == 0 {
		t.Errorf("--rank 9 --json: exit %d, %v, %+v", code, err, one)
	}
	// --fleet off: every input's report and the comparison
	code, out, _ = run(t, "analyze", "--fleet", "off", dir)
	if code != 0 || strings.Contains(out, "Fleet of") || strings.Count(out, "rank") < 12 {
		t.Errorf("--fleet off: exit %d", code)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--rank", "99"}, "no input of rank 99"},
		{[]string{"--fleet", "maybe"}, "--fleet must be auto, on or off"},
		{[]string{"--html", filepath.Join(t.TempDir(), "x.html")}, "--html draws one rank"},
	} {
		code, _, errs := run(t, append(append([]string{"analyze"}, c.args...), dir)...)
		if code != 2 || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, %q", c.args, code, errs)
		}
	}
}

// A few ranks get the usual reports; --fleet on summarises them anyway.
func TestAnalyzeFewRanks(t *testing.T) {
	t.Parallel()
	dir := writeFleet(t, 3)
	code, out, _ := run(t, "analyze", dir)
	if code != 0 || strings.Contains(out, "Fleet of") {
		t.Errorf("3 ranks: exit %d, a fleet summary", code)
	}
	code, out, _ = run(t, "analyze", "--fleet", "on", dir)
	if code != 0 || !strings.Contains(out, "Fleet of 3 ranks") {
		t.Errorf("--fleet on: exit %d\n%s", code, out)
	}
	code, _, errs := run(t, "analyze", "--fleet", "on", snap("oom_capacity.pickle.xz"))
	if code != 2 || !strings.Contains(errs, "no input with a rank") {
		t.Errorf("--fleet on without ranks: exit %d, %s", code, errs)
	}
}

func TestTraceFleet(t *testing.T) {
	t.Parallel()
	dir := writeFleet(t, 12)
	code, out, errs := run(t, "trace", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"Fleet of 12 ranks: 12 traces", "average step", "stragglers  rank 7", "collective start skew", "ptscope trace --rank 7"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
	checkScreen(t, out, 60)
	code, out, errs = run(t, "trace", "--rank", "7", "--view", "comm", dir)
	if code != 0 || strings.Contains(out, "Fleet of") || !strings.Contains(out, "rank7") {
		t.Errorf("--rank 7: exit %d %s\n%s", code, errs, out)
	}
	out2 := t.TempDir()
	code, _, errs = run(t, "trace", "--out", out2, dir)
	if code != 0 || !strings.Contains(errs, "wrote ") {
		t.Fatalf("--out: exit %d, %s", code, errs)
	}
	for _, f := range []string{"report.txt", "report.json", "README.md", "step_by_rank.png", "gpu_utilization_by_rank.png"} {
		if _, err := os.Stat(filepath.Join(out2, "latest", f)); err != nil {
			t.Error(err)
		}
	}
}

func TestCheckFleet(t *testing.T) {
	t.Parallel()
	dir := writeFleet(t, 12)
	code, out, errs := run(t, "check", "--max-peak", "100GiB", "--min-gpu-util", "10%", dir)
	if code != 0 || !strings.Contains(out, "check passed (12 ranks)") {
		t.Errorf("passing: exit %d\n%s\n%s", code, out, errs)
	}
	code, out, errs = run(t, "check", "--max-peak", "1.5GiB", "--no-oom", dir)
	if code != 1 || !strings.Contains(errs, "peak allocated > 1.50 GiB on 2 of 12 ranks: rank 9 (78.1 GiB), rank 0") ||
		!strings.Contains(errs, "out-of-memory events on 1 of 12 ranks: rank 9") || !strings.Contains(out, "memory: 12 ranks") {
		t.Errorf("failing: exit %d\n%s\n%s", code, out, errs)
	}
	// --json: every rank's value of every threshold, the same verdict
	code, out, _ = run(t, "check", "--json", "--max-peak", "1.5GiB", "--no-oom", dir)
	var doc check.Doc
	if err := json.Unmarshal([]byte(out), &doc); err != nil || code != 1 || doc.Passed || len(doc.Failures) != 2 || len(doc.Checks) != 2*12 {
		t.Errorf("--json: exit %d, %v, %d checks, failures %q", code, err, len(doc.Checks), doc.Failures)
	}
	failed := map[int]bool{}
	for _, c := range doc.Checks {
		if !c.Passed {
			failed[c.Rank] = true
		}
	}
	if len(failed) != 2 || !failed[0] || !failed[9] {
		t.Errorf("--json: failed ranks %v, want 0 and 9", failed)
	}
	code, _, errs = run(t, "check", "--min-gpu-util", "90%", dir)
	if code != 1 || !strings.Contains(errs, "GPU utilization < 90.0% on 12 of 12 ranks") {
		t.Errorf("trace threshold: exit %d\n%s", code, errs)
	}
	code, out, errs = run(t, "check", "--no-oom", "--rank", "9", dir)
	if code != 1 || !strings.Contains(errs, "on 1 of 1 ranks: rank 9") {
		t.Errorf("--rank 9: exit %d\n%s\n%s", code, out, errs)
	}
}

func TestExportParquet(t *testing.T) {
	t.Parallel()
	dir := writeFleet(t, 10)
	out := filepath.Join(t.TempDir(), "tables")
	code, _, errs := run(t, "export", "parquet", "-o", out, dir)
	if code != 0 || !strings.Contains(errs, "wrote "+out+": 10 tables") || !strings.Contains(errs, "10 ranks from 20 inputs") {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, name := range []string{"ranks", "snapshots", "memory_steps", "peak_groups", "peak_stacks", "trace_steps", "operators", "kernels", "collectives", "findings"} {
		if st, err := os.Stat(filepath.Join(out, name+".parquet")); err != nil || st.Size() < 100 {
			t.Errorf("%s: %v", name, err)
		}
	}
	// one rank, one file; a second export replaces the tables
	code, _, errs = run(t, "export", "parquet", "--rank", "9", "--top-stacks", "3", "-o", out, dir)
	if code != 0 || !strings.Contains(errs, "1 rank from 2 inputs") {
		t.Errorf("--rank 9: exit %d: %s", code, errs)
	}
	code, _, errs = run(t, "export", "parquet", "-o", out, snap("oom_capacity.pickle.xz"))
	if code != 0 || !strings.Contains(errs, "1 rank from 1 input") {
		t.Errorf("a file without a rank: exit %d: %s", code, errs)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"export", "parquet", dir}, "give the output folder with -o DIR"},
		{[]string{"export", "parquet", "--at", "end", "-o", out, dir}, "--at does not apply"},
		{[]string{"export", "pprof", "--top-stacks", "3", dir}, "apply to parquet"},
		{[]string{"export", "parquet", "-o", out, t.TempDir()}, "no snapshot or trace found"},
	} {
		code, _, errs := run(t, c.args...)
		if code != 2 || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, %q", c.args, code, errs)
		}
	}
}

// A fleet recorded without allocator snapshots (phases only, as
// --memory=false records) is checked against the peaks of its phases (here
// read from phases.jsonl itself), never passes a threshold that needs a
// snapshot, and its table says "phases only" rather than "unreadable".
func TestCheckFleetPhasesOnly(t *testing.T) {
	t.Parallel()
	src := filepath.Join("..", "..", "testdata", "simulate", "real2")
	dir := t.TempDir()
	testfixture.CopyFile(t, filepath.Join(src, "manifest.json"), filepath.Join(dir, "manifest.json"))
	for i := range 10 {
		for _, f := range []string{"process.json", "phases.jsonl"} {
			testfixture.CopyFile(t, filepath.Join(src, "rank0", f), filepath.Join(dir, fmt.Sprintf("rank%d", i), f))
		}
	}
	var top int64
	data, err := os.ReadFile(filepath.Join(src, "rank0", "phases.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var ph struct {
			Before int64 `json:"max_allocated_before_bytes"`
			After  int64 `json:"max_allocated_after_bytes"`
		}
		if err := json.Unmarshal([]byte(line), &ph); err != nil {
			t.Fatal(err)
		}
		top = max(top, ph.Before, ph.After)
	}
	lim := strconv.FormatInt(top, 10)
	if code, out, errs := run(t, "check", "--max-peak", lim, dir); code != 0 || !strings.Contains(out, "check passed (10 ranks)") {
		t.Errorf("--max-peak %s: exit %d\n%s\n%s", lim, code, out, errs)
	}
	below := strconv.FormatInt(top-1, 10)
	code, _, errs := run(t, "check", "--max-peak", below, dir)
	if code != 1 || !strings.Contains(errs, "on 10 of 10 ranks: rank 0 ("+units.Bytes(top)+", from its phases)") {
		t.Errorf("--max-peak %s: exit %d\n%s", below, code, errs)
	}
	code, out, _ := run(t, "check", "--json", "--max-peak", lim, "--no-leak", dir)
	var doc check.Doc
	if err := json.Unmarshal([]byte(out), &doc); err != nil || code != 1 || doc.Passed || len(doc.Checks) != 20 ||
		len(doc.Failures) != 1 || !strings.Contains(doc.Failures[0], "unchecked (no allocator snapshot) on 10 of 10 ranks: rank 0 (phases only: --no-leak)") {
		t.Fatalf("--no-leak: exit %d, %v, %+v", code, err, doc)
	}
	for _, c := range doc.Checks {
		if c.Device != -1 || (c.Metric == "peak_allocated_bytes") != (c.Value != nil) || (c.Metric == "peak_allocated_bytes") != c.Passed {
			t.Errorf("%+v", c)
		}
	}
	if code, out, errs := run(t, "analyze", dir); code != 0 || strings.Count(out, "phases only") < 5 || strings.Contains(out, "unreadable") {
		t.Errorf("analyze: exit %d\n%s\n%s", code, out, errs)
	}
}
