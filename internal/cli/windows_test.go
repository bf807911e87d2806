package cli

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/ptscope/ptscope/internal/testfixture"
)

// windowedBundle extracts a real bundle recorded in stack windows
// (testdata/bundles/windows) into a folder of the test.
func windowedBundle(t *testing.T, name string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	if err := testfixture.ExtractBundle(filepath.Join("..", "..", "testdata", "bundles", "windows", name+".tar.xz"), dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

// The commands on a rank recorded in stack windows: analyze prints one
// report with the windows' line; check holds the run's own peak (torch's
// 1,450,765,312 B, above the best window's 1,286,925,312 B) to
// --max-peak; export writes the peak view's window; diff compares runs.
func TestWindowedCommands(t *testing.T) {
	t.Parallel()
	leak := windowedBundle(t, "leak")
	code, out, errs := run(t, "analyze", leak)
	if code != 0 {
		t.Fatalf("analyze: exit %d: %s", code, errs)
	}
	for _, want := range []string{"allocator history in 6 stack windows",
		"stack windows: setup+steps 0-4, 6, 10, 18 (peak); peak 1.20 GiB in window 4 of 4, the run's 1.35 GiB", "peak-outside-windows", "pattern LEAK"} {
		if !strings.Contains(out, want) {
			t.Errorf("analyze lacks %q", want)
		}
	}
	if n := strings.Count(out, "ptscope analyze "); n != 1 {
		t.Errorf("%d reports", n)
	}
	for _, line := range strings.Split(out, "\n") {
		if w := len([]rune(line)); w > 100 {
			t.Errorf("%d columns: %s", w, line)
		}
	}

	code, out, _ = run(t, "check", "--max-peak", "1.3GiB", leak)
	if code != 1 || !strings.Contains(out, "peak allocated 1.35 GiB") {
		t.Errorf("check 1.3GiB: exit %d: %s", code, out)
	}
	if code, out, _ = run(t, "check", "--max-peak", "1.4GiB", leak); code != 0 {
		t.Errorf("check 1.4GiB: exit %d: %s", code, out)
	}

	pb := filepath.Join(t.TempDir(), "leak.pb.gz")
	code, _, errs = run(t, "export", "pprof", "-o", pb, leak)
	if code != 0 || !strings.Contains(errs, "at entry 320 (peak, 1.20 GiB allocated)") {
		t.Errorf("export: exit %d: %s", code, errs)
	}

	code, out, errs = run(t, "diff", windowedBundle(t, "lightning_roots"), leak)
	if code != 0 || !strings.Contains(out, "rank 0") {
		t.Errorf("diff: exit %d: %s %s", code, out, errs)
	}
}
