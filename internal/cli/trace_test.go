package cli

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ptscope/ptscope/internal/kineto/gen"
	"github.com/ptscope/ptscope/internal/testfixture"
)

func traceRun(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var o, e bytes.Buffer
	code = Main(context.Background(), append([]string{"trace"}, args...), strings.NewReader(""), &o, &e)
	return code, o.String(), e.String()
}

// bundleTrace is the real trace of the committed ptscope run bundle (an
// H200, transformer_lm small, bf16, two profiled steps).
var bundleTrace = filepath.Join("..", "..", "testdata", "bundles", "lm_small_bf16", "rank0", "trace_step4.pt.trace.json.gz")

// realTrace is a real fixture trace: ../shared/fixtures, else the
// repository's copy (testdata/traces/real).
func realTrace(t *testing.T, name string) string { return testfixture.Path(t, name) }

// synthTrace is a committed synthetic trace (testdata/traces/README.md).
func synthTrace(name string) string { return filepath.Join("..", "..", "testdata", "traces", name) }

// fits fails when a line of out is wider than width columns.
func fits(t *testing.T, out string, width int) {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if n := utf8.RuneCountInString(l); n > width {
			t.Errorf("line of %d columns (> %d): %q", n, width, l)
		}
	}
}

func TestTraceViews(t *testing.T) {
	for view, want := range map[string]string{
		"operators": "aten::addmm", "kernels": "cutlass_80_simt_sgemm", "steps": "Phases",
		"idle": "kernel wait", "comm": "No communication kernels", "memory": "peak allocated",
	} {
		code, out, errs := traceRun(t, "--view", view, "--top", "5", bundleTrace)
		if view == "kernels" {
			want = "m_bf16_128x128_tn_align1"
		}
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("--view %s: exit %d, missing %q: %s%s", view, code, want, out, errs)
		}
		fits(t, out, 100)
	}
	code, out, _ := traceRun(t, "--view", "operators", "--group-by-shape", bundleTrace)
	if code != 0 || !strings.Contains(out, "input shapes") || !strings.Contains(out, "[[") {
		t.Errorf("--group-by-shape: exit %d\n%s", code, out)
	}
	code, out, _ = traceRun(t, "--view", "steps", "--drop-last-step", bundleTrace)
	if code != 0 || !strings.Contains(out, "ProfilerStep#2") || strings.Contains(out, "ProfilerStep#3") {
		t.Errorf("--drop-last-step: exit %d\n%s", code, out)
	}
	for _, bad := range [][]string{{"--view", "bogus"}, {"--top", "0"}, {"--steps", "some"}} {
		if code, _, errs := traceRun(t, append(bad, bundleTrace)...); code != 2 || errs == "" {
			t.Errorf("%v: exit %d %s", bad, code, errs)
		}
	}
}

// TestTraceJSON checks the v2 document on the committed real trace: the
// envelope, complete tables, times in ns (absolute instants Unix ns) and
// no key in microseconds.
func TestTraceJSON(t *testing.T) {
	code, out, errs := traceRun(t, "--json", "--top", "3", bundleTrace)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var doc struct {
		SchemaVersion int    `json:"schema_version"`
		Tool          string `json:"tool"`
		Command       string `json:"command"`
		Ranks         []struct {
			TimeOrigin string `json:"time_origin"`
			StepSource string `json:"step_source"`
			Steps      []struct {
				Name        string           `json:"name"`
				StartTimeNS int64            `json:"start_ns"`
				DurationNS  int64            `json:"duration_ns"`
				Breakdown   map[string]int64 `json:"breakdown"`
				Phases      map[string]int64 `json:"phases"`
			} `json:"steps"`
			Operators []json.RawMessage `json:"operators"`
			Kernels   []json.RawMessage `json:"kernels"`
			Findings  []struct {
				ID       string             `json:"id"`
				Severity string             `json:"severity"`
				Numbers  map[string]float64 `json:"numbers"`
				At       struct {
					Rank *int `json:"rank"`
				} `json:"at"`
			} `json:"findings"`
		} `json:"ranks"`
		Findings []json.RawMessage `json:"findings"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.SchemaVersion != 2 || doc.Tool != "ptscope" || doc.Command != "trace" || len(doc.Ranks) != 1 || doc.Findings == nil {
		t.Fatalf("envelope %d %q %q, %d ranks", doc.SchemaVersion, doc.Tool, doc.Command, len(doc.Ranks))
	}
	if !strings.HasPrefix(out, `{"schema_version":2,"tool":"ptscope","command":"trace",`) {
		t.Errorf("the envelope does not come first: %.80s", out)
	}
	r := doc.Ranks[0]
	if r.TimeOrigin != "unix" || r.StepSource != "profiler_step" || len(r.Steps) != 2 {
		t.Fatalf("rank %+v", r)
	}
	// --top trims text only: the JSON holds every row
	if len(r.Operators) < 50 || len(r.Kernels) < 30 {
		t.Errorf("%d operators, %d kernels: the JSON must be complete", len(r.Operators), len(r.Kernels))
	}
	for _, s := range r.Steps {
		// the run started 2026-11-21 (the bundle's manifest)
		if s.StartTimeNS < 1795277900e9 || s.StartTimeNS > 1795278000e9 {
			t.Errorf("%s starts at %d, not Unix ns of the run", s.Name, s.StartTimeNS)
		}
		var b, p int64
		for _, v := range s.Breakdown {
			b += v
		}
		for _, v := range s.Phases {
			p += v
		}
		if b != s.DurationNS || p != s.DurationNS {
			t.Errorf("%s: breakdown %d, phases %d, duration %d", s.Name, b, p, s.DurationNS)
		}
		if s.Breakdown["dataloader_ns"] != s.Phases["data_loading_ns"] {
			t.Errorf("%s: DataLoader %d in the breakdown, %d in the phases", s.Name, s.Breakdown["dataloader_ns"], s.Phases["data_loading_ns"])
		}
	}
	for _, f := range r.Findings {
		if f.At.Rank == nil || *f.At.Rank != 0 || len(f.Numbers) == 0 {
			t.Errorf("finding %s: at %+v, numbers %v", f.ID, f.At, f.Numbers)
		}
		if f.Severity != "info" && f.Severity != "warning" && f.Severity != "critical" {
			t.Errorf("finding %s: severity %q", f.ID, f.Severity)
		}
	}
	var any interface{}
	json.Unmarshal([]byte(out), &any)
	walkKeys(any, func(k string) {
		if strings.HasSuffix(k, "_us") || strings.Contains(k, "_us_") || strings.HasSuffix(k, "_at_ns") {
			t.Errorf("key %q: times are _ns (instants Unix ns)", k)
		}
	})
}

func walkKeys(v interface{}, fn func(string)) {
	switch x := v.(type) {
	case map[string]interface{}:
		for k, c := range x {
			fn(k)
			walkKeys(c, fn)
		}
	case []interface{}:
		for _, c := range x {
			walkKeys(c, fn)
		}
	}
}

func TestTraceBrokenInputs(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.pt.trace.json")
	os.WriteFile(empty, nil, 0o644)
	if code, _, errs := traceRun(t, empty); code != 2 || !strings.Contains(errs, "empty.pt.trace.json") {
		t.Errorf("empty file: exit %d, %q", code, errs)
	}
	if code, _, errs := traceRun(t, filepath.Join(dir, "missing.json")); code != 2 || errs == "" {
		t.Errorf("missing file: exit %d, %q", code, errs)
	}
	// a truncated gzip trace gives a partial report and a warning
	raw, err := os.ReadFile(bundleTrace)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	var plain bytes.Buffer
	plain.ReadFrom(zr)
	cut := filepath.Join(dir, "cut.pt.trace.json")
	os.WriteFile(cut, plain.Bytes()[:plain.Len()*2/3], 0o644)
	code, out, errs := traceRun(t, cut)
	if code != 0 || !strings.Contains(errs, "warning") || !strings.Contains(errs, "truncated") || !strings.Contains(out, "ProfilerStep#2") ||
		!strings.Contains(out, "damaged-trace") {
		t.Errorf("truncated: exit %d\nstderr %s\n%s", code, errs, out)
	}
	// one broken event is repaired or dropped, with a warning
	bad := bytes.Replace(plain.Bytes(), []byte(`"name": "aten::mm"`), []byte(`"name": aten::mm"`), 1)
	badPath := filepath.Join(dir, "bad.pt.trace.json")
	os.WriteFile(badPath, bad, 0o644)
	code, _, errs = traceRun(t, "--json", badPath)
	if code != 0 || !strings.Contains(errs, "dropped") {
		t.Errorf("bad event: exit %d, stderr %q", code, errs)
	}
}

// TestTraceOut: --out writes the run folder as analyze does (report.txt,
// report.json, README.md, charts; "wrote DIR" on stderr), beside --json.
func TestTraceOut(t *testing.T) {
	out := t.TempDir()
	code, stdout, errs := traceRun(t, "--json", "--out", out, "--name", "lm", bundleTrace)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	dir := filepath.Join(out, "latest")
	for _, f := range []string{"report.json", "report.txt", "README.md", "step_breakdown.png", "gpu_utilization.png", "top_operators.png", "top_kernels.png", "memory.png"} {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	if !strings.HasPrefix(errs, "wrote ") || !strings.Contains(errs, "_lm") || strings.Contains(stdout, "wrote") {
		t.Errorf("stderr %q", errs)
	}
	js, _ := os.ReadFile(filepath.Join(dir, "report.json"))
	var a, b interface{}
	if json.Unmarshal(js, &a) != nil || json.Unmarshal([]byte(stdout), &b) != nil {
		t.Fatal("report.json or stdout is not JSON")
	}
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if !bytes.Equal(ja, jb) {
		t.Error("report.json differs from the --json document")
	}
	txt, _ := os.ReadFile(filepath.Join(dir, "report.txt"))
	fits(t, string(txt), 100)
	readme, _ := os.ReadFile(filepath.Join(dir, "README.md"))
	if !strings.Contains(string(readme), "step_breakdown.png") || !strings.Contains(string(readme), "profiling-overhead") {
		t.Errorf("README.md:\n%s", readme)
	}
}

// TestTraceGolden pins the text (80 and 100 columns) and the JSON of the
// committed real trace.
func TestTraceGolden(t *testing.T) {
	for _, c := range []struct {
		golden string
		env    string
		args   []string
	}{
		{"trace_bundle_100.golden", "100", []string{bundleTrace}},
		{"trace_bundle_80.golden", "80", []string{bundleTrace}},
		{"trace_bundle_steps_80.golden", "80", []string{"--view", "steps", bundleTrace}},
		{"trace_bundle_idle_100.golden", "100", []string{"--view", "idle", bundleTrace}},
		{"trace_bundle.golden.json", "100", []string{"--json", bundleTrace}},
		{"trace_fsdp_100.golden", "100", []string{synthTrace("fsdp")}},
		{"trace_fsdp_80.golden", "80", []string{synthTrace("fsdp")}},
		{"trace_fsdp_comm_80.golden", "80", []string{"--view", "comm", synthTrace("fsdp")}},
		{"trace_fsdp.golden.json", "100", []string{"--json", synthTrace("fsdp")}},
		{"trace_dataloader_100.golden", "100", []string{synthTrace("dataloader.pt.trace.json.gz")}},
		{"trace_dataloader_steps_all_80.golden", "80", []string{"--view", "steps", "--steps", "all", synthTrace("dataloader.pt.trace.json.gz")}},
		{"trace_ddp1_80.golden", "80", []string{synthTrace("ddp1.pt.trace.json.gz")}},
		{"trace_gpt2_6l_100.golden", "100", []string{"real:gpt2_6l_dataloader_bottleneck.pt.trace.json.gz"}},
		{"trace_gpt2_6l_80.golden", "80", []string{"real:gpt2_6l_dataloader_bottleneck.pt.trace.json.gz"}},
		{"trace_gpt2tiny_with_stack_100.golden", "100", []string{"real:gpt2tiny_with_stack.pt.trace.json"}},
	} {
		t.Run(c.golden, func(t *testing.T) {
			real := false
			for i, a := range c.args {
				if name, ok := strings.CutPrefix(a, "real:"); ok {
					c.args[i], real = realTrace(t, name), true
				}
			}
			t.Setenv("COLUMNS", c.env)
			code, out, errs := traceRun(t, c.args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			if strings.HasSuffix(c.golden, ".json") {
				var v interface{}
				if err := json.Unmarshal([]byte(out), &v); err != nil {
					t.Fatal(err)
				}
				b, _ := json.MarshalIndent(v, "", " ")
				out = string(b) + "\n"
			} else {
				w := 100
				if c.env == "80" {
					w = 80
				}
				fits(t, out, w)
			}
			if real {
				// the real fixture's path depends on where it was found
				// (../shared, the repository's copy, a temporary file): the
				// golden starts after the path line
				out = afterFirstLine(out)
			}
			golden := filepath.Join("testdata", c.golden)
			if *update {
				os.WriteFile(golden, []byte(out), 0o644)
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if out != string(want) {
				t.Errorf("output differs from %s (go test ./internal/cli -run TraceGolden -update after checking):\n%s", golden, out)
			}
		})
	}
}

// TestTraceSixtySteps: a 60-step trace prints a summary that fits 100
// columns in at most 200 lines (issue 10's bar, on a generated trace; the
// 350 MB version is scripts/bench_trace.sh's).
func TestTraceSixtySteps(t *testing.T) {
	s := gen.Scenarios(0)["dataloader"]
	s.Steps = 60
	s.SlowSteps = map[int]int64{7: 12_000_000, 30: 9_000_000, 31: 20_000_000}
	p := filepath.Join(t.TempDir(), "sixty.pt.trace.json")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write(f); err != nil {
		t.Fatal(err)
	}
	f.Close()
	t.Setenv("COLUMNS", "100")
	code, out, errs := traceRun(t, p)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	fits(t, out, 100)
	if n := strings.Count(out, "\n"); n > 200 {
		t.Errorf("%d lines", n)
	}
	// the first, the last, the slowest and the outliers; the rest summarised
	for _, want := range []string{"ProfilerStep#1 ", "ProfilerStep#60", "ProfilerStep#32 (slowest)", "ProfilerStep#8 (outlier)", "ProfilerStep#31 (outlier)", "55 more steps"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q:\n%s", want, out)
		}
	}
	_, all, _ := traceRun(t, "--steps", "all", "--view", "steps", p)
	if strings.Count(all, "ProfilerStep#") < 120 {
		t.Errorf("--steps all lists %d step rows", strings.Count(all, "ProfilerStep#"))
	}
}

func afterFirstLine(s string) string {
	if _, rest, ok := strings.Cut(s, "\n"); ok {
		return rest
	}
	return s
}

// TestTraceRealFixture: the real fixture's overview says what its recording
// facts are (fixtures README): three steps, aten::mm 153 calls, fp32 kernels
// without tensor cores on an H100, the DataLoader hidden behind GPU work.
func TestTraceRealFixture(t *testing.T) {
	code, out, errs := traceRun(t, realTrace(t, "gpt2_6l_dataloader_bottleneck.pt.trace.json.gz"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"ProfilerStep#2", "ProfilerStep#4", "average", "[critical] no-tensor-cores", "[info] dataloader",
		"14.5% of the host's step time", "sm80_xmma_gemm_f32f32", "NVIDIA H100 80GB HBM3"} {
		if !strings.Contains(out, want) {
			t.Errorf("overview lacks %q", want)
		}
	}
	if !regexp.MustCompile(`\naten::mm +153 +99.0 ms`).MatchString(out) {
		t.Errorf("aten::mm's row (153 calls, 98.968 ms of device time) is not the first operator:\n%s", out)
	}
	fits(t, out, 100)
}

// TestTraceOutSameRank: two traces that both say rank 0 (unrelated runs)
// get a run folder each chart of which has its own name: rank0_ and
// rank0_2_ (the second's charts used to collide with the first's).
func TestTraceOutSameRank(t *testing.T) {
	real := filepath.Join("..", "..", "testdata", "peers", "real")
	ddp := filepath.Join(real, "ddp", "rank0.1795802743110009081.pt.trace.json.gz")
	fsdp := filepath.Join(real, "fsdp2_slow0", "rank0.1795802810039621532.pt.trace.json.gz")
	out := t.TempDir()
	code, _, errs := traceRun(t, "--out", out, ddp, fsdp)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, f := range []string{"rank0_step_breakdown.png", "rank0_2_step_breakdown.png", "rank0_2_top_kernels.png"} {
		if st, err := os.Stat(filepath.Join(out, "latest", f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	readme, _ := os.ReadFile(filepath.Join(out, "latest", "README.md"))
	if !strings.Contains(string(readme), "rank0_2_step_breakdown.png") {
		t.Errorf("README.md does not list the second trace's charts:\n%s", readme)
	}
}
