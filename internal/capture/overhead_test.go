//go:build !windows

package capture

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ptscope/ptscope/internal/testfixture"
)

// The overhead that README and docs/bundle.md state for the default
// capture comes from the step times kept in scripts/gpu/results/
// overhead-windows (four overhead.sh runs on H100 hosts):
// scripts/overhead_pool.py pools their interleaved pairs into the numbers
// stated, and judges the 3% goal on them.
func TestOverheadPoolKeptResults(t *testing.T) {
	py := needPython(t)
	t.Parallel()
	root := testfixture.Root(t)
	res, _ := filepath.Glob(filepath.Join(root, "scripts", "gpu", "results", "overhead-windows", "*.tgz"))
	if len(res) != 4 {
		t.Fatalf("kept results %v", res)
	}
	args := append([]string{filepath.Join(root, "scripts", "overhead_pool.py"), "--goal", "3"}, res...)
	out, err := exec.Command(py, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for _, want := range []string{
		// CPU-bound HF Trainer: 29 pairs, +2.9% median (docs/bundle.md)
		"pooled       hf   default    pairs  29  median   +2.9%  mean   +3.6%",
		// the previous default, history over the run, on run A's repeats
		"pooled       hf   histrun    pairs   5  median   +5.7%",
		// GPU-bound transformer_lm
		"pooled       lm   default    pairs   6  median   +1.0%",
		"PASS hf: default capture +2.9% median step time, median of 29 interleaved pairs (goal <= 3%)",
		"PASS lm: default capture +1.0% median step time, median of 6 interleaved pairs (goal <= 3%)",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	// a tighter goal than the pooled median fails the verdict
	args[2] = "2"
	if out, err := exec.Command(py, args...).CombinedOutput(); err == nil || !strings.Contains(string(out), "FAIL hf:") {
		t.Errorf("--goal 2: %v\n%s", err, out)
	}
}
