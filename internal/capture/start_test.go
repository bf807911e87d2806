//go:build !windows

package capture

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ptscope/ptscope/internal/bundle"
)

// Commands that cannot start get a shell's status (126 found but not
// executable, 127 not there), and a bundle made before execve failed is
// finalised, not left "running".
func TestRunStartFailures(t *testing.T) {
	t.Parallel()
	bin := t.TempDir()
	write := func(name, data string, mode os.FileMode) string {
		p := filepath.Join(bin, name)
		if err := os.WriteFile(p, []byte(data), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	noexec := write("noexec.sh", "#!/bin/sh\necho hi\n", 0o644)
	badInterp := write("badinterp", "#!/no/such/interpreter\n", 0o755)
	garbage := write("garbage", "\x7fELF\x02\x01\x01garbage", 0o755)
	tests := []struct {
		name     string
		argv     []string
		code     int
		reason   string
		manifest bool // execve failed after the bundle was made
	}{
		{"missing", []string{"no-such-command-ptscope"}, 127, "command not found", false},
		{"missing path", []string{filepath.Join(bin, "missing")}, 127, "no such file or directory", false},
		{"not executable", []string{noexec}, 126, "permission denied", false},
		{"folder", []string{bin}, 126, "is a folder", false},
		{"bad interpreter", []string{badInterp}, 127, "required file not found", true},
		{"exec format error", []string{garbage}, 126, "exec format error", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o := testOptions(t)
			res, err := Run(context.Background(), o, tt.argv)
			var se *StartError
			if !errors.As(err, &se) || se.Code != tt.code || !strings.Contains(se.Error(), tt.reason) || strings.Contains(se.Error(), "\n") {
				t.Fatalf("err %v, want a StartError %d saying %q", err, tt.code, tt.reason)
			}
			if (tt.code == 127) != errors.Is(err, ErrNotFound) && se.Err == nil {
				t.Errorf("errors.Is(ErrNotFound) = %v", errors.Is(err, ErrNotFound))
			}
			if !tt.manifest {
				if res != nil {
					t.Errorf("result %+v for a command never found", res)
				}
				if _, err := os.Stat(o.OutDir); err == nil {
					t.Errorf("a bundle was made for a command never found")
				}
				return
			}
			b, err := bundle.ReadBundle(o.OutDir)
			if err != nil {
				t.Fatal(err)
			}
			m := b.Manifest
			if m.Status != "failed_to_start" || m.ExitCode != tt.code || m.EndTime == nil || len(m.Warnings) == 0 || !strings.Contains(m.Warnings[len(m.Warnings)-1], tt.reason) {
				t.Errorf("manifest status %q exit %d end %v warnings %q", m.Status, m.ExitCode, m.EndTime, m.Warnings)
			}
			if res == nil || res.Dir == "" || res.ExitCode != tt.code {
				t.Errorf("result %+v", res)
			}
		})
	}
}

func TestLookPathNotExecutableOnPath(t *testing.T) {
	bin := t.TempDir()
	p := filepath.Join(bin, "ptscope-test-onpath")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin)
	_, err := lookPath("ptscope-test-onpath")
	var se *StartError
	if !errors.As(err, &se) || se.Code != 126 || !strings.Contains(se.Reason, p+" is not executable") {
		t.Errorf("err %v, want 126 naming %s", err, p)
	}
	_, err = lookPath("ptscope-test-nowhere")
	if !errors.As(err, &se) || se.Code != 127 || !errors.Is(err, ErrNotFound) {
		t.Errorf("err %v, want 127 command not found", err)
	}
}

// When the bundle folder cannot be made the command runs anyway, after one
// warning, and its status comes back.
func TestRunWithoutBundleFolder(t *testing.T) {
	t.Parallel()
	o := testOptions(t)
	notADir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notADir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	o.OutDir = filepath.Join(notADir, "out")
	r := runIt(t, o, "sh", "-c", "echo ran; exit 3")
	if r.res.ExitCode != 3 || r.stdout != "ran\n" || r.res.Dir != "" {
		t.Errorf("exit %d stdout %q dir %q", r.res.ExitCode, r.stdout, r.res.Dir)
	}
	lines := strings.Split(strings.TrimSpace(r.status), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "ptscope: warning: cannot create a bundle folder in "+o.OutDir) ||
		!strings.HasSuffix(lines[0], "; the command runs without capture") || !strings.HasPrefix(lines[1], "ptscope: no bundle (exit 3,") {
		t.Errorf("status output:\n%s", r.status)
	}
	// the same with --quiet: the one warning only
	o.Quiet = true
	r = runIt(t, o, "sh", "-c", "exit 0")
	if strings.Count(r.status, "\n") != 1 || !strings.Contains(r.status, "runs without capture") {
		t.Errorf("quiet status output:\n%s", r.status)
	}
}
