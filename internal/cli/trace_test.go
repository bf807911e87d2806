package cli

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func traceRun(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var o, e bytes.Buffer
	code = Main(context.Background(), append([]string{"trace"}, args...), strings.NewReader(""), &o, &e)
	return code, o.String(), e.String()
}

func traceFixture(t *testing.T) string {
	t.Helper()
	p := filepath.Join("..", "..", "..", "shared", "fixtures", "gpt2_6l_dataloader_bottleneck.pt.trace.json.gz")
	if _, err := os.Stat(p); err != nil {
		t.Skip("fixture gpt2_6l_dataloader_bottleneck.pt.trace.json.gz not available")
	}
	return p
}

func TestTraceOverview(t *testing.T) {
	code, out, errs := traceRun(t, traceFixture(t))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"ProfilerStep#2", "ProfilerStep#4", "average", "[critical] no_tensor_cores", "[warning] dataloader",
		"DataLoader: 14.5% of host step time", "aten::mm", "153", "sm80_xmma_gemm_f32f32", "NVIDIA H100 80GB HBM3"} {
		if !strings.Contains(out, want) {
			t.Errorf("overview lacks %q", want)
		}
	}
}

func TestTraceViews(t *testing.T) {
	p := traceFixture(t)
	for view, want := range map[string]string{
		"operators": "aten::addmm", "kernels": "cutlass_80_simt_sgemm", "steps": "Phases",
		"idle": "kernel wait", "comm": "No communication kernels", "memory": "peak allocated",
	} {
		code, out, errs := traceRun(t, "--view", view, "--top", "5", p)
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("--view %s: exit %d, missing %q: %s%s", view, code, want, out, errs)
		}
	}
	code, out, _ := traceRun(t, "--view", "operators", "--group-by-shape", p)
	if code != 0 || !strings.Contains(out, "[[4096, 768], [768, 3072]]") && !strings.Contains(out, "input shapes") {
		t.Errorf("--group-by-shape: exit %d\n%s", code, out)
	}
	code, out, _ = traceRun(t, "--view", "steps", "--drop-last-step", p)
	if code != 0 || !strings.Contains(out, "ProfilerStep#3") || strings.Contains(out, "ProfilerStep#4") {
		t.Errorf("--drop-last-step: exit %d\n%s", code, out)
	}
	if code, _, errs := traceRun(t, "--view", "bogus", p); code != 2 || !strings.Contains(errs, "unknown --view") {
		t.Errorf("bad view: exit %d %s", code, errs)
	}
}

func TestTraceJSON(t *testing.T) {
	code, out, errs := traceRun(t, "--json", traceFixture(t))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var doc struct {
		SchemaVersion int `json:"schema_version"`
		Ranks         []struct {
			Rank  int `json:"rank"`
			Steps []struct {
				Name       string           `json:"name"`
				DurationNS int64            `json:"duration_ns"`
				Breakdown  map[string]int64 `json:"breakdown"`
			} `json:"steps"`
			GPUUtilizationRatio float64  `json:"gpu_utilization_ratio"`
			SMEfficiencyRatio   float64  `json:"sm_efficiency_ratio"`
			Occupancy           float64  `json:"achieved_occupancy_ratio"`
			TensorCoreRatio     *float64 `json:"tensor_core_ratio"`
			Operators           []struct {
				Name         string `json:"name"`
				Calls        int    `json:"calls"`
				DeviceSelfNS int64  `json:"device_self_ns"`
			} `json:"operators"`
			Kernels []struct {
				Name       string `json:"name"`
				Calls      int    `json:"calls"`
				TotalNS    int64  `json:"total_ns"`
				TensorCore bool   `json:"tensor_core"`
			} `json:"kernels"`
			Memory struct {
				PeakAllocated int64 `json:"peak_allocated_bytes"`
				PeakReserved  int64 `json:"peak_reserved_bytes"`
			} `json:"memory"`
			Findings []struct{ ID, Severity, Message string } `json:"findings"`
		} `json:"ranks"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.SchemaVersion != 1 || len(doc.Ranks) != 1 {
		t.Fatalf("doc %+v", doc)
	}
	r := doc.Ranks[0]
	if len(r.Steps) != 3 {
		t.Fatalf("steps %+v", r.Steps)
	}
	for _, s := range r.Steps {
		var sum int64
		for _, k := range []string{"kernel_ns", "memcpy_ns", "memset_ns", "communication_ns", "runtime_ns", "dataloader_ns", "cpu_exec_ns", "other_ns"} {
			v, ok := s.Breakdown[k]
			if !ok {
				t.Errorf("breakdown lacks %s", k)
			}
			sum += v
		}
		if sum != s.DurationNS {
			t.Errorf("%s: breakdown sums to %d, duration %d", s.Name, sum, s.DurationNS)
		}
	}
	if r.Operators[0].Name != "aten::mm" || r.Operators[0].Calls != 153 || r.TensorCoreRatio == nil || *r.TensorCoreRatio != 0 {
		t.Errorf("operators[0] %+v tc %v", r.Operators[0], r.TensorCoreRatio)
	}
	if r.GPUUtilizationRatio <= 0.9 || r.GPUUtilizationRatio > 1 || r.SMEfficiencyRatio <= 0 || r.SMEfficiencyRatio > r.GPUUtilizationRatio || r.Occupancy <= 0 || r.Occupancy > 1 {
		t.Errorf("ratios util %.3f sm %.3f occupancy %.3f", r.GPUUtilizationRatio, r.SMEfficiencyRatio, r.Occupancy)
	}
	if r.Kernels[0].Calls != 99 || r.Kernels[0].TensorCore {
		t.Errorf("kernels[0] %+v", r.Kernels[0])
	}
	if r.Memory.PeakAllocated <= 0 || r.Memory.PeakReserved < r.Memory.PeakAllocated {
		t.Errorf("memory %+v", r.Memory)
	}
	ids := map[string]bool{}
	for _, f := range r.Findings {
		ids[f.ID] = true
	}
	if !ids["dataloader"] || !ids["no_tensor_cores"] {
		t.Errorf("findings %+v", r.Findings)
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
	raw, err := os.ReadFile(traceFixture(t))
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
	if code != 0 || !strings.Contains(errs, "warning") || !strings.Contains(errs, "truncated") || !strings.Contains(out, "ProfilerStep#2") {
		t.Errorf("truncated: exit %d\nstderr %s", code, errs)
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

func TestTraceOut(t *testing.T) {
	out := t.TempDir()
	code, stdout, errs := traceRun(t, "--out", out, traceFixture(t))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	dir := filepath.Join(out, "latest")
	for _, f := range []string{"report.json", "report.txt", "step_breakdown.png", "gpu_utilization.png", "top_operators.png", "top_kernels.png", "memory.png"} {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	if !strings.Contains(stdout, "wrote ") {
		t.Errorf("no path printed")
	}
}

func TestTraceOverviewGolden(t *testing.T) {
	code, out, errs := traceRun(t, traceFixture(t))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	golden := filepath.Join("testdata", "trace_overview.golden")
	if *update {
		os.MkdirAll("testdata", 0o755)
		os.WriteFile(golden, []byte(out), 0o644)
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if out != string(want) {
		t.Errorf("trace overview differs from %s (run go test ./internal/cli -run TraceOverviewGolden -update after checking):\n%s", golden, out)
	}
}
