package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ptscope/ptscope/internal/snapshot/snapgen"
	"github.com/ptscope/ptscope/internal/testfixture"
)

var update = flag.Bool("update", false, "rewrite golden files")

func run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var o, e bytes.Buffer
	code = Main(context.Background(), args, strings.NewReader(""), &o, &e)
	return code, o.String(), e.String()
}

func snap(name string) string { return filepath.Join("..", "..", "testdata", "snapshots", name) }

func TestDemoGolden(t *testing.T) {
	code, out, errs := run(t, "demo")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	golden := filepath.Join("testdata", "demo.golden")
	if *update {
		os.WriteFile(golden, []byte(out), 0o644)
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if out != string(want) {
		t.Errorf("demo output differs from %s (run go test ./internal/cli -update after checking):\n%s", golden, out)
	}
	// The report states the peak that torch measured: 5,538,270,208 B.
	if !strings.Contains(out, "5,538,270,208 B") {
		t.Error("peak line missing")
	}
}

// The JSON contract of docs/json.md: the keys scripts rely on.
func TestAnalyzeJSONContract(t *testing.T) {
	code, out, errs := run(t, "analyze", "--json", snap("leak_gpt2_2l.pickle.xz"), snap("oom_fragmentation.pickle.xz"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	if doc["schema_version"].(float64) != 2 || doc["tool"] != "ptscope" || doc["command"] != "analyze" {
		t.Errorf("envelope %v %v %v", doc["schema_version"], doc["tool"], doc["command"])
	}
	if strings.Contains(out, "_us\"") {
		t.Error("a _us key in the v2 document")
	}
	inputs := doc["inputs"].([]any)
	if len(inputs) != 2 || len(doc["comparison"].([]any)) != 2 {
		t.Fatalf("inputs %d", len(inputs))
	}
	need := func(m map[string]any, keys ...string) {
		t.Helper()
		for _, k := range keys {
			if _, ok := m[k]; !ok {
				t.Errorf("missing key %q", k)
			}
		}
	}
	leak := inputs[0].(map[string]any)["devices"].([]any)[0].(map[string]any)
	need(leak, "device", "has_history", "peak", "categories_at_peak", "stacks_at_peak", "top_allocations", "pattern", "leak", "ooms",
		"truncated", "findings", "steps", "fragmentation", "timeline")
	need(leak["peak"].(map[string]any), "allocated_bytes", "reserved_bytes", "time_ns", "phase")
	need(leak["categories_at_peak"].([]any)[0].(map[string]any), "category", "bytes", "count")
	top := leak["top_allocations"].([]any)[0].(map[string]any)
	need(top, "bytes", "category", "stack", "origin")
	st := leak["stacks_at_peak"].([]any)[int(top["stack"].(float64))].(map[string]any)
	need(st, "bytes", "source", "user_frame", "frames")
	need(st["frames"].([]any)[0].(map[string]any), "filename", "line", "name", "kind")
	if leak["pattern"] != "leak" || leak["leak"].(map[string]any)["per_step_bytes"].(float64) <= 0 {
		t.Errorf("pattern %v leak %v", leak["pattern"], leak["leak"])
	}
	need(leak["findings"].([]any)[0].(map[string]any), "id", "severity", "message", "recommendation", "numbers")
	tl := leak["timeline"].(map[string]any)
	need(tl, "first_index", "start_ns", "allocated_max_bytes", "reserved_max_bytes", "categories", "phases")
	need(leak["fragmentation"].(map[string]any), "efficiency_at_peak_ratio", "efficiency_at_end_ratio", "segments", "pools")
	oom := inputs[1].(map[string]any)["devices"].([]any)[0].(map[string]any)["ooms"].([]any)
	if len(oom) != 2 {
		t.Fatalf("ooms %d", len(oom))
	}
	o := oom[1].(map[string]any)
	need(o, "requested_bytes", "device_free_bytes", "allocated_bytes", "reserved_bytes", "verdict", "frames")
	if o["verdict"] != "fragmentation" || o["requested_bytes"].(float64) != 800<<20 {
		t.Errorf("oom = %v", o)
	}
	need(doc["comparison"].([]any)[0].(map[string]any), "efficiency_at_peak_ratio", "pattern", "top_category")
}

var fixtureTrace = filepath.Join("..", "..", "..", "shared", "fixtures", "gpt2_6l_dataloader_bottleneck.pt.trace.json.gz")

func TestCheckExitCodes(t *testing.T) {
	_, err := os.Stat(fixtureTrace)
	haveTrace := err == nil
	cases := []struct {
		args []string
		code int
	}{
		{[]string{"check", "--max-peak", "100GiB", snap("leak_gpt2_2l.pickle.xz")}, 0},
		{[]string{"check", "--max-peak", "500MiB", snap("leak_gpt2_2l.pickle.xz")}, 1},
		{[]string{"check", "--no-leak", snap("leak_gpt2_2l.pickle.xz")}, 1},
		{[]string{"check", "--no-leak", snap("validate_gpt2tiny_fp32.pickle.xz")}, 0},
		{[]string{"check", "--min-efficiency", "90%", snap("oom_fragmentation.pickle.xz")}, 1},
		{[]string{"check", "--no-oom", snap("oom_capacity.pickle.xz")}, 1},
		{[]string{"check", snap("leak_gpt2_2l.pickle.xz")}, 2},                       // no threshold
		{[]string{"check", "--max-peak", "lots", snap("leak_gpt2_2l.pickle.xz")}, 2}, // bad size
		{[]string{"check", "--max-peak", "1GiB", "no/such/file"}, 2},
		// The fixture trace: GPU busy (98%); the DataLoader takes 14.5% of the
		// host step, hidden behind queued GPU work: 0.14% of the step.
		{[]string{"check", "--min-gpu-util", "80%", fixtureTrace}, 0},
		{[]string{"check", "--max-dataloader", "0.1%", fixtureTrace}, 1},
		{[]string{"check", "--max-dataloader", "0.2", fixtureTrace}, 0},
		{[]string{"check", "--min-gpu-util", "99.9%", fixtureTrace}, 1},
		{[]string{"check", "--min-gpu-util", "80%", snap("leak_gpt2_2l.pickle.xz")}, 2}, // no trace there
	}
	for _, c := range cases {
		if !haveTrace && strings.Contains(strings.Join(c.args, " "), fixtureTrace) {
			continue // ../shared/fixtures not beside the repository
		}
		code, _, errs := run(t, c.args...)
		if code != c.code {
			t.Errorf("%v: exit %d, want %d (%s)", c.args, code, c.code, errs)
		}
	}
}

// Broken inputs give a correct report or exit 2 with one line naming the
// file; never a panic.
func TestBrokenInputs(t *testing.T) {
	dir := t.TempDir()
	good, err := os.ReadFile(filepath.Join("..", "pickle", "testdata", "shared_p4.pickle"))
	if err != nil {
		t.Fatal(err)
	}
	real := mustXZ(t, snap("leak_gpt2_2l.pickle.xz"))
	evil, _ := os.ReadFile(filepath.Join("..", "pickle", "testdata", "evil_p4.pickle"))
	files := map[string][]byte{
		"empty.pickle":          {},
		"truncated.pickle":      real[:len(real)/3],
		"not_a_snapshot.pickle": good,
		"evil.pickle":           evil,
		"text.json":             []byte(`{"segments": 3}`),
		"garbage.pickle":        append([]byte{0x80, 0x04}, bytes.Repeat([]byte{0xff}, 100)...),
	}
	for i := 0; i < 20; i++ {
		b := append([]byte(nil), real...)
		b[(i*7919+13)%len(b)] ^= byte(1 << (i % 8))
		files["flip"+string(rune('a'+i))+".pickle"] = b
	}
	for name, data := range files {
		p := filepath.Join(dir, name)
		os.WriteFile(p, data, 0o644)
		code, _, errs := run(t, "analyze", p)
		switch code {
		case 0:
		case 2:
			if n := strings.Count(strings.TrimSpace(errs), "\n"); n != 0 || !strings.Contains(errs, name) {
				t.Errorf("%s: error is not one line naming the file: %q", name, errs)
			}
		default:
			t.Errorf("%s: exit %d: %s", name, code, errs)
		}
	}
	if _, err := os.Stat("/tmp/ptscope_pwned"); err == nil {
		t.Fatal("a pickle ran a command")
	}
}

func mustXZ(t *testing.T, path string) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var buf bytes.Buffer
	r, err := inputReader(f)
	if err != nil {
		t.Fatal(err)
	}
	buf.ReadFrom(r)
	return buf.Bytes()
}

func TestOutFolder(t *testing.T) {
	out := t.TempDir()
	code, _, errs := run(t, "analyze", "--out", out, "--name", "leak", snap("leak_gpt2_2l.pickle.xz"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(errs, "wrote "+out) {
		t.Errorf("stderr %q does not say where the run folder is", errs)
	}
	latest := filepath.Join(out, "latest")
	for _, f := range []string{"report.txt", "report.json", "README.md", "memory_timeline.svg", "overview.svg",
		"top_consumers.svg", "categories.svg", "block_sizes.svg", "efficiency.svg"} {
		st, err := os.Stat(filepath.Join(latest, f))
		if err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	readme, _ := os.ReadFile(filepath.Join(latest, "README.md"))
	if !strings.Contains(string(readme), "`leak`") {
		t.Error("README.md lacks the leak finding")
	}
}

func TestHelpAndUsage(t *testing.T) {
	if code, out, _ := run(t, "help", "analyze"); code != 0 || !strings.Contains(out, "Examples:") {
		t.Errorf("help analyze: %d", code)
	}
	if code, _, _ := run(t, "analyze"); code != 2 {
		t.Errorf("analyze without input: exit %d", code)
	}
	if code, _, _ := run(t, "nosuchcommand"); code != 2 {
		t.Errorf("unknown command: exit %d", code)
	}
	if code, out, _ := run(t, "analyze", "--print-rules"); code != 0 || !strings.Contains(out, "attention:") {
		t.Errorf("--print-rules: %d", code)
	}
}

// A real ptscope run bundle (examples/transformer_lm.py small, bf16, 10 steps
// on an H200, scripts/gpu-e2e.sh single): the process printed
// max_memory_allocated=5673316352.
func TestAnalyzeBundle(t *testing.T) {
	code, out, errs := run(t, "analyze", "--json", filepath.Join("..", "..", "testdata", "bundles", "lm_small_bf16"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var doc struct {
		Inputs []struct {
			Bundle *struct {
				Rank             int   `json:"rank"`
				DeviceTotalBytes int64 `json:"device_total_bytes"`
			} `json:"bundle"`
			Phases []struct {
				Phase     string `json:"phase"`
				PeakBytes int64  `json:"peak_bytes"`
			} `json:"phases"`
			Devices []struct {
				Device int `json:"device"`
				Peak   struct {
					AllocatedBytes int64 `json:"allocated_bytes"`
				} `json:"peak"`
				Categories []struct {
					Category string `json:"category"`
					Bytes    int64  `json:"bytes"`
				} `json:"categories_at_peak"`
				ModulesAtPeak []struct {
					Name string `json:"name"`
				} `json:"modules_at_peak"`
			} `json:"devices"`
		} `json:"inputs"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Inputs) != 1 || doc.Inputs[0].Bundle == nil || len(doc.Inputs[0].Devices) != 1 {
		t.Fatalf("want one input of one device from the bundle: %s", out[:min(len(out), 300)])
	}
	in := doc.Inputs[0]
	if in.Bundle.DeviceTotalBytes < 100<<30 {
		t.Errorf("device total %d from the manifest", in.Bundle.DeviceTotalBytes)
	}
	peak := in.Devices[0].Peak.AllocatedBytes
	if e := float64(peak)/5673316352 - 1; e > 0.01 || e < -0.01 {
		t.Errorf("peak %d vs torch 5673316352 (%+.2f%%)", peak, 100*e)
	}
	phases := map[string]int{}
	for _, p := range in.Phases {
		if p.PeakBytes > 0 {
			phases[p.Phase]++
		}
	}
	if phases["forward"] < 5 || phases["backward"] < 5 || phases["optimizer"] < 5 {
		t.Errorf("phases with peaks: %v", phases)
	}
	cats := map[string]int64{}
	for _, c := range in.Devices[0].Categories {
		cats[c.Category] = c.Bytes
	}
	// 124.4M parameters (GPT-2 small shape, untied head? no: tied) in fp32:
	// parameters and AdamW's two moments are recognised from their stacks.
	if cats["parameter"] < 400<<20 || cats["optimizer_state"] < 800<<20 {
		t.Errorf("categories %v", cats)
	}
	var modules bool
	for _, m := range in.Devices[0].ModulesAtPeak {
		if strings.HasPrefix(m.Name, "blocks.") {
			modules = true
		}
	}
	if !modules {
		t.Error("no module paths (user_metadata) in modules_at_peak")
	}
}

// Real GPU runs of scripts/gpu/simulate_e2e.sh (H200 x2, torch 2.11): FSDP2
// medium bf16 under torchrun on 2 GPUs, the same command as one process under
// --simulate-world-size 2, and --no-gpu against a real single-GPU run. The
// *.json files are what examples/transformer_lm.py measured in the process.
func TestAnalyzeSimulatedBundles(t *testing.T) {
	dir := filepath.Join("..", "..", "testdata", "simulate")
	measured := func(name string) int64 {
		b, err := os.ReadFile(filepath.Join(dir, name+".json"))
		if err != nil {
			t.Fatal(err)
		}
		var m struct {
			MaxMemoryAllocated int64 `json:"max_memory_allocated"`
		}
		json.Unmarshal(b, &m)
		return m.MaxMemoryAllocated
	}
	type doc struct {
		Inputs []struct {
			Bundle struct {
				Simulated  bool   `json:"simulated"`
				Mode       string `json:"mode"`
				Simulation string `json:"simulation"`
			} `json:"bundle"`
			Phases []struct {
				PeakBytes int64 `json:"peak_bytes"`
			} `json:"phases"`
		} `json:"inputs"`
	}
	peakOf := func(bundle string) (int64, doc) {
		code, out, errs := run(t, "analyze", "--json", filepath.Join(dir, bundle))
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", bundle, code, errs)
		}
		var d doc
		if err := json.Unmarshal([]byte(out), &d); err != nil {
			t.Fatal(err)
		}
		var p int64
		for _, in := range d.Inputs[:1] {
			for _, ph := range in.Phases {
				p = max(p, ph.PeakBytes)
			}
		}
		return p, d
	}
	sim, d := peakOf("sim2")
	if !d.Inputs[0].Bundle.Simulated || d.Inputs[0].Bundle.Mode != "simulate-world" || d.Inputs[0].Bundle.Simulation == "" {
		t.Errorf("sim2 bundle not marked simulated: %+v", d.Inputs[0].Bundle)
	}
	if real := measured("real2"); sim != real {
		t.Errorf("simulated rank 0 peak %d, real torchrun rank 0 %d", sim, real)
	}
	for _, prec := range []string{"none", "bf16"} {
		fake, d := peakOf("nogpu_" + prec)
		if d.Inputs[0].Bundle.Mode != "fake" {
			t.Errorf("nogpu_%s mode %q", prec, d.Inputs[0].Bundle.Mode)
		}
		real := measured("gpu1_" + prec)
		if e := float64(fake)/float64(real) - 1; e > 0.10 || e < -0.10 {
			t.Errorf("--no-gpu %s: step peak %d vs real %d (%+.1f%%)", prec, fake, real, 100*e)
		}
	}
}

// TestAnalyzeBundlePrecision: the precision a bundle's process.json records
// reaches analyze's fp32-compute finding. The records are the ones the
// companion wrote on the H100 (scripts/gpu-e2e.sh precision; docs/
// validation.md) for examples/transformer_lm.py small, context 512, batch 8:
// with bf16 autocast, the configuration of testdata/bundles/lm_small_bf16, no
// finding; the fp32 run's record on the same bundle checks the wiring.
func TestAnalyzeBundlePrecision(t *testing.T) {
	const (
		bf16 = `{"parameter_bytes_by_dtype": {"float32": 497759232}, "autocast_cuda": true, "fsdp": false, "autocast_dtype": "bfloat16"}`
		fp32 = `{"parameter_bytes_by_dtype": {"float32": 497759232}, "autocast_cuda": false, "fsdp": false}`
	)
	src := filepath.Join("..", "..", "testdata", "bundles", "lm_small_bf16")
	for name, rec := range map[string]string{"bf16": bf16, "fp32": fp32} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
				t.Fatal(err)
			}
			pj := filepath.Join(dir, "rank0", "process.json")
			var info map[string]any
			data, err := os.ReadFile(pj)
			if err == nil {
				err = json.Unmarshal(data, &info)
			}
			if err != nil {
				t.Fatal(err)
			}
			info["precision"] = json.RawMessage(rec)
			if data, err = json.Marshal(info); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(pj, data, 0o644); err != nil {
				t.Fatal(err)
			}
			code, out, errs := run(t, "analyze", dir)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			got := strings.Contains(out, "fp32-compute")
			if want := name == "fp32"; got != want {
				t.Errorf("fp32-compute in the report: %v, want %v", got, want)
			}
			if name == "fp32" && !strings.Contains(out, "Parameters are fp32 (475 MiB)") {
				t.Errorf("the finding should name the 475 MiB of fp32 parameters:\n%s", out)
			}
		})
	}
}

// A snapshot taken without memory history (segments only) is analysed,
// not a crash; check works on it too.
func TestAnalyzeNoHistory(t *testing.T) {
	code, out, errs := run(t, "analyze", snap("legacy_list_history.pickle.xz"))
	if code != 0 || !strings.Contains(out, "no allocation history") || !strings.Contains(out, "no-history") {
		t.Fatalf("exit %d: %s\n%s", code, errs, out)
	}
	if code, _, errs := run(t, "check", "--max-peak", "1GiB", snap("legacy_list_history.pickle.xz")); code != 0 {
		t.Errorf("check: exit %d: %s", code, errs)
	}
}

// Short stacks show the user's .py line and no "??" C++ rows; --stacks full
// prints every frame.
func TestAnalyzeStacks(t *testing.T) {
	cpp := snap("gpt2tiny_train_bf16_cppstacks.pickle.xz")
	_, short, _ := run(t, "analyze", "--top", "3", cpp)
	_, full, _ := run(t, "analyze", "--top", "3", "--stacks", "full", cpp)
	top := func(out string) string {
		i, j := strings.Index(out, "Largest allocations"), strings.Index(out, "By source location")
		return out[i:j]
	}
	s, f := top(short), top(full)
	if strings.Contains(s, "??") || strings.Count(s, "fixtures.py:") < 3 || !strings.Contains(s, "backward called at") {
		t.Errorf("short stacks:\n%s", s)
	}
	if n, m := strings.Count(f, "\n"), strings.Count(s, "\n"); n < 5*m || !strings.Contains(f, "torch::unwind::unwind") || strings.Contains(f, "??") {
		t.Errorf("full stacks (%d lines vs %d short):\n%s", n, m, f)
	}
	if code, _, _ := run(t, "analyze", "--stacks", "some", cpp); code != 2 {
		t.Errorf("--stacks some: exit %d", code)
	}
}

// Text fits COLUMNS; steps are summarised unless --steps all.
func TestAnalyzeWidthAndSteps(t *testing.T) {
	var buf bytes.Buffer
	if err := snapgen.Write(&buf, snapgen.Options{Entries: 100_000, Seed: 2}); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "gen.pickle")
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("COLUMNS", "80")
	code, out, errs := run(t, "analyze", p)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for i, l := range strings.Split(out, "\n") {
		if n := utf8.RuneCountInString(l); n > 80 {
			t.Errorf("line %d has %d columns: %q", i+1, n, l)
		}
	}
	if !strings.Contains(out, "more steps (--steps all)") || strings.Count(out, "\n") > 200 {
		t.Errorf("steps not summarised, or %d lines", strings.Count(out, "\n"))
	}
	_, all, _ := run(t, "analyze", "--steps", "all", p)
	var js struct {
		Inputs []struct {
			Devices []struct {
				Steps []struct {
					Name string `json:"name"`
				} `json:"steps"`
			} `json:"devices"`
		} `json:"inputs"`
	}
	_, doc, _ := run(t, "analyze", "--json", p)
	if err := json.Unmarshal([]byte(doc), &js); err != nil {
		t.Fatal(err)
	}
	steps := js.Inputs[0].Devices[0].Steps
	if len(steps) < 20 || strings.Contains(all, "--steps all") {
		t.Fatalf("%d steps", len(steps))
	}
	for _, s := range steps {
		if !strings.Contains(all, s.Name+" ") {
			t.Errorf("--steps all lacks %s", s.Name)
		}
	}
	if code, _, _ := run(t, "analyze", "--steps", "some", p); code != 2 {
		t.Errorf("--steps some: exit %d", code)
	}
}

// TestAnalyzeOOMBundleGolden: the real OOM trainer's bundle holds
// snapshot_oom.pickle and snapshot_end.pickle (written at exit with no step
// after the error): one report, the OOM's, naming the other.
func TestAnalyzeOOMBundleGolden(t *testing.T) {
	dir := testfixture.TrainerBundle(t, "oom")
	t.Setenv("COLUMNS", "100")
	code, out, errs := run(t, "analyze", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	checkWidth(t, out, 100)
	if n := strings.Count(out, "ptscope analyze "); n != 1 {
		t.Errorf("%d reports", n)
	}
	// the first line names the temporary folder (cut to fit when long)
	head, rest, _ := strings.Cut(out, "\n")
	if !strings.HasPrefix(head, "ptscope analyze ") || !strings.HasSuffix(head, "/rank0/snapshot_oom.pickle") {
		t.Errorf("first line %q", head)
	}
	golden(t, "analyze_oom_bundle_100.golden", rest)
}

// Every finding analyze raises on the testdata snapshots is listed in
// docs/json.md, and its numbers avoid the names that document says were
// removed (the review found low-efficiency still carrying
// efficiency_ratio).
func TestAnalyzeFindingsDocumented(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "json.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, ids, _ := strings.Cut(string(doc), "\nFinding ids: `oom-capacity`")
	ids, _, _ = strings.Cut("`oom-capacity`"+ids, "\n\n")
	paths, _ := filepath.Glob(snap("*.pickle.xz"))
	code, out, errs := run(t, append([]string{"analyze", "--json"}, paths...)...)
	if code != 0 || len(paths) < 5 {
		t.Fatalf("exit %d over %d snapshots: %s", code, len(paths), errs)
	}
	var res struct {
		Inputs []struct {
			Devices []struct {
				Findings []struct {
					ID      string
					Numbers map[string]float64
				}
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, in := range res.Inputs {
		for _, d := range in.Devices {
			for _, f := range d.Findings {
				seen[f.ID] = true
				if !strings.Contains(ids, "`"+f.ID+"`") {
					t.Errorf("finding %s is not in json.md's list", f.ID)
				}
				for _, gone := range []string{"efficiency_ratio"} {
					if _, ok := f.Numbers[gone]; ok {
						t.Errorf("%s: numbers.%s, a name json.md says was removed", f.ID, gone)
					}
				}
			}
		}
	}
	if !seen["low-efficiency"] || len(seen) < 8 {
		t.Errorf("only %d finding ids seen: %v", len(seen), seen)
	}
}
