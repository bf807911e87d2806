package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWrongKind: an input of the wrong kind for a command or flag (or an
// empty one) is one line that names what it is and what reads it, exit 2,
// nothing on stdout.
func TestWrongKind(t *testing.T) {
	t.Parallel()
	trace := filepath.Join("..", "..", "testdata", "traces", "ddp1.pt.trace.json.gz")
	traces := filepath.Join("..", "..", "testdata", "traces", "fsdp")
	snapshots := filepath.Join("..", "..", "testdata", "snapshots")
	pickle := snap("validate_gpt2tiny_fp32.pickle.xz")
	empty := filepath.Join(t.TempDir(), "empty.json")
	if err := os.WriteFile(empty, []byte(`{"traceEvents": []}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"analyze", trace}, trace + ": offset 0: a Kineto profiler trace, not an allocator snapshot: read it with ptscope trace"},
		{[]string{"trace", pickle}, pickle + ": offset 0: an allocator snapshot, not a Kineto trace: read it with ptscope analyze"},
		{[]string{"check", "--max-dataloader", "10%", pickle}, "--min-gpu-util and --max-dataloader apply to profiler traces; " + pickle + " is an allocator snapshot"},
		{[]string{"analyze", "--fleet", "on", traces}, "--fleet on: no snapshot under " + traces + ", only profiler traces: use ptscope trace --fleet on"},
		{[]string{"trace", "--fleet", "on", snapshots}, "--fleet on: no profiler trace under " + snapshots + ", only snapshots: use ptscope analyze --fleet on"},
		// an empty trace is an error, not a report on 0 events
		{[]string{"trace", empty}, empty + ": offset 19: the trace holds no events (expected a non-empty traceEvents array)"},
		{[]string{"estimate", "--model", "gpt2", "--calibrate", pickle}, pickle + " is a file; --calibrate takes the folder of a ptscope run bundle"},
	} {
		code, out, errs := run(t, c.args...)
		// warnings aside (testdata/snapshots holds a memory timeline export,
		// which a folder search skips with a warning)
		var lines []string
		for _, l := range strings.SplitAfter(errs, "\n") {
			if !strings.HasPrefix(l, "ptscope: warning: ") {
				lines = append(lines, l)
			}
		}
		errs = strings.Join(lines, "")
		if code != 2 || out != "" || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want one line with %q", c.args, code, out, errs, c.want)
		}
	}
}
