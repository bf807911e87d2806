package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunClosedStdinStaysClosed: `ptscope run cmd <&-` starts cmd with its
// standard input closed, as the shell would have (it got /dev/null), and
// the bundle's manifest.json is its owner's only, with the token on the
// command line masked (issue 28), or kept with --keep-argv.
func TestRunClosedStdinStaysClosed(t *testing.T) {
	out := t.TempDir()
	dir := t.TempDir()
	stdout, err := os.Create(filepath.Join(dir, "stdout"))
	if err != nil {
		t.Fatal(err)
	}
	defer stdout.Close()
	stderr, err := os.Create(filepath.Join(dir, "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer stderr.Close()
	check := `if [ -e /proc/self/fd/0 ]; then echo "open $(readlink /proc/self/fd/0)"; else echo closed; fi`
	for _, c := range []struct {
		stdin *os.File
		want  string
	}{{nil, "closed"}, {mustOpen(t, os.DevNull), "open /dev/null"}} {
		stdout.Truncate(0)
		stdout.Seek(0, 0)
		p, err := os.StartProcess(os.Args[0], []string{os.Args[0], "-test.run=^TestRunHelperProcess$", "--", "run", "--quiet", "--out", out,
			"--", "sh", "-c", check, "sh", "--hf-token", "hf_abcdefghijklmnopqrstuvwxyz"},
			&os.ProcAttr{Env: append(os.Environ(), "PTSCOPE_TEST_MAIN=1"), Files: []*os.File{c.stdin, stdout, stderr}})
		if err != nil {
			t.Fatal(err)
		}
		if st, err := p.Wait(); err != nil || !st.Success() {
			b, _ := os.ReadFile(stderr.Name())
			t.Fatalf("exit %v %v: %s", st, err, b)
		}
		b, _ := os.ReadFile(stdout.Name())
		if got := strings.TrimSpace(string(b)); got != c.want {
			t.Errorf("stdin %v: the command saw %q, want %q", c.stdin, got, c.want)
		}
	}
	m := filepath.Join(out, "latest", "manifest.json")
	st, err := os.Stat(m)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("manifest.json mode %v, want 0600", st.Mode().Perm())
	}
	var mf struct{ Command []string }
	b, _ := os.ReadFile(m)
	if err := json.Unmarshal(b, &mf); err != nil || mf.Command[len(mf.Command)-1] != "***" || strings.Contains(string(b), "hf_abc") {
		t.Errorf("command kept as %q", mf.Command)
	}
	// --keep-argv keeps it as it was.
	p, err := os.StartProcess(os.Args[0], []string{os.Args[0], "-test.run=^TestRunHelperProcess$", "--", "run", "--quiet", "--keep-argv", "--out", out,
		"--", "sh", "-c", "true", "sh", "--hf-token", "hf_abcdefghijklmnopqrstuvwxyz"},
		&os.ProcAttr{Env: append(os.Environ(), "PTSCOPE_TEST_MAIN=1"), Files: []*os.File{nil, stdout, stderr}})
	if err != nil {
		t.Fatal(err)
	}
	if st, err := p.Wait(); err != nil || !st.Success() {
		t.Fatalf("--keep-argv: exit %v %v", st, err)
	}
	b, _ = os.ReadFile(m)
	if err := json.Unmarshal(b, &mf); err != nil || mf.Command[len(mf.Command)-1] != "hf_abcdefghijklmnopqrstuvwxyz" {
		t.Errorf("--keep-argv: command kept as %q", mf.Command)
	}
}

func mustOpen(t *testing.T, name string) *os.File {
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}
