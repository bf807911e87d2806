package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/pprof/profile"
	"github.com/ptscope/ptscope/internal/load"
	"github.com/ptscope/ptscope/internal/memory"
	"github.com/ptscope/ptscope/internal/testfixture"
)

// validateSnap is a committed real GPT-2 tiny training snapshot recorded
// from before the model was made: torch measured max_memory_allocated =
// 1,414,996,992 B (testdata/snapshots/facts.jsonl).
const validatePeak = 1414996992

func exportRun(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return run(t, append([]string{"export"}, args...)...)
}

// TestExportFormats runs each format end to end on real inputs and checks
// the file with its consumer's rules.
func TestExportFormats(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	in := snap("validate_gpt2tiny_fp32.pickle.xz")

	// pprof: a file pprof parses, in-use total = the peak torch measured
	pb := filepath.Join(dir, "mem.pb.gz")
	code, out, errs := exportRun(t, "pprof", "-o", pb, in)
	if code != 0 || out != "" || !strings.HasPrefix(errs, "wrote "+pb+": pprof heap profile, 1.32 GiB in use") {
		t.Fatalf("pprof: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	p := readPprof(t, pb)
	var inuse int64
	for _, s := range p.Sample {
		inuse += s.Value[1]
	}
	if inuse != validatePeak || p.DefaultSampleType != "inuse_space" {
		t.Errorf("pprof in-use %d B (default %s), want %d B", inuse, p.DefaultSampleType, int64(validatePeak))
	}
	if st, _ := os.Stat(pb); st.Mode().Perm() != 0o644 {
		t.Errorf("mode %v", st.Mode())
	}

	// folded to stdout: lines add up to the peak
	code, out, errs = exportRun(t, "folded", in)
	if code != 0 {
		t.Fatalf("folded: exit %d: %s", code, errs)
	}
	var total int64
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		n, err := strconv.ParseInt(line[strings.LastIndexByte(line, ' ')+1:], 10, 64)
		if err != nil {
			t.Fatalf("folded line %q", line)
		}
		total += n
	}
	if total != validatePeak {
		t.Errorf("folded total %d B, want %d B", total, int64(validatePeak))
	}

	// folded at the end: what the final segments hold
	code, out, _ = exportRun(t, "folded", "--at", "end", in)
	if code != 0 || !strings.Contains(out, "(") {
		t.Errorf("folded --at end: exit %d", code)
	}

	// perfetto of a snapshot: counter tracks
	pj := filepath.Join(dir, "mem.json")
	if code, _, errs = exportRun(t, "perfetto", "-o", pj, in); code != 0 {
		t.Fatalf("perfetto: exit %d: %s", code, errs)
	}
	var doc struct {
		TraceEvents []struct {
			Ph   string         `json:"ph"`
			Name string         `json:"name"`
			Args map[string]any `json:"args"`
		} `json:"traceEvents"`
	}
	readJSON(t, pj, &doc)
	counters := map[string]int{}
	for _, e := range doc.TraceEvents {
		if e.Ph == "C" {
			counters[e.Name]++
		}
	}
	if counters["allocated"] == 0 || counters["reserved"] == 0 || counters["allocated by category"] == 0 {
		t.Errorf("perfetto counters %v", counters)
	}

	// memory-viz of one step: segments and device_traces
	vj := filepath.Join(dir, "viz.json")
	code, _, errs = exportRun(t, "memory-viz", "--steps", "1-1", "-o", vj, in)
	if code != 0 || !strings.Contains(errs, "device 0 entries 1308..2429") {
		t.Fatalf("memory-viz: exit %d: %s", code, errs)
	}
	var viz struct {
		Segments     []map[string]any   `json:"segments"`
		DeviceTraces [][]map[string]any `json:"device_traces"`
	}
	readJSON(t, vj, &viz)
	if len(viz.Segments) == 0 || len(viz.DeviceTraces) != 1 || len(viz.DeviceTraces[0]) != 2430-1308 {
		t.Fatalf("memory-viz: %d segments, %d traces", len(viz.Segments), len(viz.DeviceTraces))
	}
	for _, k := range []string{"action", "addr", "size", "frames"} {
		if _, ok := viz.DeviceTraces[0][0][k]; !ok {
			t.Errorf("trace entry lacks %s: %v", k, viz.DeviceTraces[0][0])
		}
	}
	code, _, errs = exportRun(t, "memory-viz", "--from", "step:1", "--to", "step:2", "--min-size", "1MiB", "-o", vj, in)
	if code != 0 || !strings.Contains(errs, "entries 1308..3548") || !strings.Contains(errs, "at least 1.00 MiB") {
		t.Errorf("memory-viz --from/--to: exit %d: %s", code, errs)
	}
	// -o *.pickle: the same snapshot as a pickle, which analyze reads
	vp := filepath.Join(dir, "viz.pickle")
	if code, _, errs = exportRun(t, "memory-viz", "-o", vp, in); code != 0 || !strings.Contains(errs, "memory_viz snapshot pickle, 3,551 trace entries") {
		t.Fatalf("memory-viz pickle: exit %d: %s", code, errs)
	}
	if code, out, errs = run(t, "analyze", vp); code != 0 || !strings.Contains(out, "1,414,996,992 B") {
		t.Errorf("analyze of the pickle export: exit %d: %s", code, errs)
	}

	// perfetto of a trace, cut to a step
	tj := filepath.Join(dir, "trace.json")
	tr := filepath.Join("..", "..", "testdata", "bundles", "lm_small_bf16", "rank0", "trace_step4.pt.trace.json.gz")
	code, _, errs = exportRun(t, "perfetto", "--steps", "2", "--min-duration", "5us", "-o", tj, tr)
	if code != 0 || !strings.Contains(errs, "ProfilerStep#2..#2") {
		t.Fatalf("perfetto of a trace: exit %d: %s", code, errs)
	}
	var tdoc map[string]json.RawMessage
	readJSON(t, tj, &tdoc)
	if _, ok := tdoc["deviceProperties"]; !ok {
		t.Error("the trace's metadata was not kept")
	}
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// TestExportBundle: a bundle exports its rank's last snapshot.
func TestExportBundle(t *testing.T) {
	b := filepath.Join("..", "..", "testdata", "bundles", "lm_small_bf16")
	code, out, errs := exportRun(t, "folded", b)
	if code != 0 || out == "" || !strings.Contains(errs, "folded stacks") {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if code, _, errs = exportRun(t, "folded", "--rank", "3", b); code != 2 || !strings.Contains(errs, "no snapshot of rank 3") {
		t.Errorf("--rank 3: exit %d: %s", code, errs)
	}
}

// TestExportErrors: bad usage and bad input exit 2 with one line, and a
// failed export leaves no file behind.
func TestExportErrors(t *testing.T) {
	dir := t.TempDir()
	in := snap("validate_gpt2tiny_fp32.pickle.xz")
	tr := filepath.Join("..", "..", "testdata", "bundles", "lm_small_bf16", "rank0", "trace_step4.pt.trace.json.gz")
	broken := filepath.Join(dir, "broken.pickle")
	os.WriteFile(broken, append([]byte{0x80, 0x04}, bytes.Repeat([]byte{0xff}, 64)...), 0o644)
	target := filepath.Join(dir, "out.pb.gz")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{}, "give a format"},
		{[]string{"pdf", in}, `unknown format "pdf"`},
		{[]string{"pprof"}, "give exactly one input"},
		{[]string{"pprof", in, in}, "give exactly one input"},
		{[]string{"pprof", filepath.Join(dir, "missing.pickle")}, "missing.pickle"},
		{[]string{"pprof", "-o", target, broken}, "broken.pickle"},
		{[]string{"pprof", "-o", target, tr}, "is a profiler trace; pprof exports allocator snapshots"},
		{[]string{"memory-viz", tr}, "is a profiler trace"},
		{[]string{"folded", "--min-duration", "1ms", in}, "--min-duration does not apply to a snapshot"},
		{[]string{"perfetto", "--at", "end", tr}, "--at does not apply to a trace"},
		{[]string{"perfetto", "--steps", "1-2", in}, "--steps applies to perfetto of a trace and to memory-viz"},
		{[]string{"pprof", "-o", target, "--at", "step:9", in}, "step 9 is out of range: device 0 has 4 steps"},
		{[]string{"pprof", "--at", "soon", in}, `invalid point "soon"`},
		{[]string{"memory-viz", "--steps", "2-1", in}, "not a step range"},
		{[]string{"memory-viz", "--steps", "1", "--from", "5", in}, "not both"},
		{[]string{"memory-viz", "--from", "3000", "--to", "10", in}, "holds no entry"},
		{[]string{"memory-viz", "--min-size", "lots", in}, "--min-size"},
		{[]string{"perfetto", "--steps", "7-9", tr}, "no ProfilerStep#7..#9 in the trace (it holds #2, #3)"},
		{[]string{"pprof", "--device", "3", in}, "has no device 3"},
		{[]string{"folded", "--rank", "0", in}, "--rank applies to bundles"},
	} {
		code, out, errs := exportRun(t, c.args...)
		if code != 2 || out != "" || strings.Count(strings.TrimSpace(errs), "\n") != 0 || !strings.Contains(errs, c.want) {
			t.Errorf("export %v: exit %d, stdout %q, stderr %q; want exit 2 and one line with %q", c.args, code, out, errs, c.want)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*out.pb.gz*")); len(left) != 0 {
		t.Errorf("failed exports left %v", left)
	}
	code, out, _ := run(t, "help", "export")
	if code != 0 || !strings.Contains(out, "memory-viz") || !strings.Contains(out, "--min-duration") {
		t.Errorf("help export: exit %d\n%s", code, out)
	}
}

// TestExportNoHistory: a snapshot taken without memory history exports the
// blocks alive at the dump.
func TestExportNoHistory(t *testing.T) {
	code, out, errs := exportRun(t, "folded", snap("legacy_list_history.pickle.xz"))
	if code != 0 || out == "" || !strings.Contains(errs, "at the dump (no trace recorded, 413 MiB allocated)") {
		t.Errorf("exit %d: %s", code, errs)
	}
}

// A bundle's snapshot exports with what its rank recorded, as analyze
// reads it: the real FSDP2 trainer's inventory names its sharded
// parameters, which the snapshot alone would not (their stacks are
// FSDP's). The pprof's in-use parameter bytes equal analyze's.
func TestExportBundleRoles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := testfixture.ExtractTrainerBundle(testfixture.Root(t), "fsdp2", dir); err != nil {
		t.Fatal(err)
	}
	set, err := load.Snapshots(context.Background(), []string{dir}, load.SnapshotOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var want int64
	for _, c := range set.Report.Inputs[len(set.Report.Inputs)-1].Devices[0].Categories {
		if c.Category == memory.CatParameter {
			want = c.Bytes
		}
	}
	pb := filepath.Join(t.TempDir(), "mem.pb.gz")
	if code, _, errs := exportRun(t, "pprof", "-o", pb, dir); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	p := readPprof(t, pb)
	var got int64
	for _, s := range p.Sample {
		if len(s.Label["category"]) > 0 && s.Label["category"][0] == "parameter" {
			got += s.Value[1]
		}
	}
	if want <= 0 || got != want {
		t.Errorf("pprof parameters %d B in use, analyze %d B", got, want)
	}
}

// readPprof parses the pprof profile at path.
func readPprof(t *testing.T, path string) *profile.Profile {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
