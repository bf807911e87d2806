//go:build !windows

package capture

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/ptscope/ptscope/internal/testfixture"
)

// BenchmarkCompanionHooks measures the Python the companion runs on its hot
// paths (testdata/hookbench.py, over testdata/faketorch, in one process):
// the global forward hooks around one module call ("us/module_call": every
// module call of every step pays it) and the phase and step bookkeeping of
// one training step ("us/step"); and one module call of a 100-module
// forward as faketorch dispatches it, in a stacked step (global hooks), in
// any other step (the root's instance hooks only) and without ptscope
// ("us/call_stacked_step", "us/call_other_step", "us/call_no_ptscope"); and
// what one bookkeeping step asks of torch (allocator stats calls,
// record_function ranges, backward root pre-hooks, memory-fraction queries
// per step). Not included: PyTorch's own cost of
// calling hooks and of its allocator stats, which faketorch stands in for.
func BenchmarkCompanionHooks(b *testing.B) {
	py, err := testfixture.PythonPath()
	if err != nil {
		b.Skip("python3 not found")
	}
	files, _, err := companionFiles()
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	for name, data := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	for i := 0; i < b.N; i++ {
		cmd := exec.Command(py, "testdata/hookbench.py", dir)
		cmd.Env = append(cmd.Environ(), fakeTorchEnv(b))
		out, err := cmd.CombinedOutput()
		if err != nil {
			b.Fatalf("%v\n%s", err, out)
		}
		var r struct {
			ModuleCallUS float64 `json:"module_call_us"`
			StepUS       float64 `json:"step_us"`
			GlobalUS     float64 `json:"call_global_us"`
			RootsUS      float64 `json:"call_roots_us"`
			OffUS        float64 `json:"call_off_us"`
			StatsPerStep float64 `json:"allocator_stats_per_step"`
			RFPerStep    float64 `json:"record_function_per_step"`
			BwPerStep    float64 `json:"backward_root_hooks_per_step"`
			FracPerStep  float64 `json:"memory_fraction_per_step"`
		}
		if err := json.Unmarshal(out, &r); err != nil {
			b.Fatalf("hookbench output %q: %v", out, err)
		}
		b.ReportMetric(r.ModuleCallUS, "us/module_call")
		b.ReportMetric(r.StepUS, "us/step")
		b.ReportMetric(r.GlobalUS, "us/call_stacked_step")
		b.ReportMetric(r.RootsUS, "us/call_other_step")
		b.ReportMetric(r.OffUS, "us/call_no_ptscope")
		b.ReportMetric(r.StatsPerStep, "stats_calls/step")
		b.ReportMetric(r.RFPerStep, "record_functions/step")
		b.ReportMetric(r.BwPerStep, "backward_root_hooks/step")
		b.ReportMetric(r.FracPerStep, "fraction_queries/step")
	}
}
