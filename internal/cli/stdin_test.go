package cli

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
)

// runStdin runs ptscope with in as its standard input.
func runStdin(t *testing.T, in []byte, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var o, e bytes.Buffer
	code = Main(context.Background(), args, bytes.NewReader(in), &o, &e)
	return code, o.String(), e.String()
}

// TestStdinEverywhere: "-" reads the standard input for export and for
// one side of diff as it does for analyze, giving the same result as the
// file itself.
func TestStdinEverywhere(t *testing.T) {
	path := snap("validate_gpt2tiny_fp32.pickle.xz")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, fromFile, _ := run(t, "export", "folded", path)
	code, fromStdin, errs := runStdin(t, data, "export", "folded", "-")
	if code != 0 || fromStdin == "" || fromStdin != fromFile {
		t.Errorf("export folded -: exit %d, %d bytes (file: %d), stderr %q", code, len(fromStdin), len(fromFile), errs)
	}
	code, out, errs := runStdin(t, data, "diff", "--json", "-", path)
	if code != 0 || !strings.Contains(out, `"a":{"path":"-"`) {
		t.Errorf("diff - FILE: exit %d, stderr %q", code, errs)
	}
	// torch's max_memory_allocated on both sides (testdata/snapshots/facts.jsonl)
	if !strings.Contains(out, `"peak_allocated":{"a_bytes":1414996992,"b_bytes":1414996992,"delta_bytes":0`) {
		t.Errorf("diff - FILE: peaks differ from the file's")
	}
	code, out, errs = runStdin(t, data, "diff", "-", "-")
	if code != 2 || out != "" || !strings.Contains(errs, "only one side") {
		t.Errorf("diff - -: exit %d, stdout %q, stderr %q", code, out, errs)
	}
}
