//go:build !windows

package cli

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
)

// TestRunHelperProcess is not a test: it is ptscope's main when the tests
// below re-execute the test binary with PTSCOPE_TEST_MAIN=1, so that the
// process-level exit of `ptscope run` (exit code, death by signal) can be
// observed from outside.
func TestRunHelperProcess(t *testing.T) {
	if os.Getenv("PTSCOPE_TEST_MAIN") != "1" {
		return
	}
	args := os.Args
	for i, a := range args {
		if a == "--" {
			args = args[i+1:]
			break
		}
	}
	os.Exit(Main(context.Background(), args, os.Stdin, os.Stdout, os.Stderr))
}

func ptscopeProcess(t *testing.T, args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], append([]string{"-test.run=^TestRunHelperProcess$", "--"}, args...)...)
	cmd.Env = append(os.Environ(), "PTSCOPE_TEST_MAIN=1")
	return cmd
}

func TestRunProcessExit(t *testing.T) {
	out := t.TempDir()
	tests := []struct {
		name   string
		cmd    []string
		code   int
		signal syscall.Signal
		stdout string
	}{
		{"exit code", []string{"sh", "-c", "echo hi; exit 3"}, 3, 0, "hi\n"},
		{"success", []string{"sh", "-c", "echo ok"}, 0, 0, "ok\n"},
		{"killed by SIGTERM", []string{"sh", "-c", "kill -TERM $$"}, -1, syscall.SIGTERM, ""},
		{"killed by SIGKILL", []string{"sh", "-c", "kill -KILL $$"}, -1, syscall.SIGKILL, ""},
		{"not found", []string{"no-such-command-ptscope"}, 127, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := ptscopeProcess(t, append([]string{"run", "--quiet", "--out", out, "--"}, tt.cmd...)...)
			stdout, err := cmd.Output()
			var ee *exec.ExitError
			if err != nil && !errors.As(err, &ee) {
				t.Fatal(err)
			}
			ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
			if tt.signal != 0 {
				if !ws.Signaled() || ws.Signal() != tt.signal {
					t.Errorf("ptscope ended with %v, want death by %v", ws, tt.signal)
				}
			} else if ws.Signaled() || ws.ExitStatus() != tt.code {
				t.Errorf("ptscope exit %d (signaled %v), want %d", ws.ExitStatus(), ws.Signaled(), tt.code)
			}
			if string(stdout) != tt.stdout {
				t.Errorf("stdout %q, want %q", stdout, tt.stdout)
			}
		})
	}
}
