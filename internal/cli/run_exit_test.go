//go:build !windows

package cli

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
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

// TestRunProcessExit runs ptscope as a process and checks what a calling
// shell sees: the command's exit code, 128+N for a death by signal N (and,
// for SIGHUP/SIGINT/SIGTERM/SIGKILL, ptscope's own death by it), and on
// stderr nothing but ptscope's one-line note (no Go runtime dump).
func TestRunProcessExit(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	tests := []struct {
		name   string
		cmd    []string
		code   int            // exit status when not signaled
		signal syscall.Signal // ptscope's own death, when re-raised
		stdout string
		note   string // ptscope's stderr with --quiet
	}{
		{"exit code", []string{"sh", "-c", "echo hi; exit 3"}, 3, 0, "hi\n", ""},
		{"success", []string{"sh", "-c", "echo ok"}, 0, 0, "ok\n", ""},
		{"SIGTERM", []string{"sh", "-c", "kill -TERM $$"}, -1, syscall.SIGTERM, "", "killed by signal 15 (terminated); exit status 143"},
		{"SIGKILL", []string{"sh", "-c", "kill -KILL $$"}, -1, syscall.SIGKILL, "", "killed by signal 9 (killed); exit status 137"},
		{"SIGHUP", []string{"sh", "-c", "kill -HUP $$"}, -1, syscall.SIGHUP, "", "killed by signal 1 (hangup); exit status 129"},
		{"SIGSEGV", []string{"sh", "-c", "kill -SEGV $$"}, 139, 0, "", "killed by signal 11 (segmentation fault); exit status 139"},
		{"SIGABRT", []string{"sh", "-c", "kill -ABRT $$"}, 134, 0, "", "killed by signal 6 (aborted); exit status 134"},
		{"SIGBUS", []string{"sh", "-c", "kill -BUS $$"}, 135, 0, "", "killed by signal 7 (bus error); exit status 135"},
		{"SIGFPE", []string{"sh", "-c", "kill -FPE $$"}, 136, 0, "", "killed by signal 8 (floating point exception); exit status 136"},
		{"SIGILL", []string{"sh", "-c", "kill -ILL $$"}, 132, 0, "", "killed by signal 4 (illegal instruction); exit status 132"},
		{"SIGQUIT", []string{"sh", "-c", "kill -QUIT $$"}, 131, 0, "", "killed by signal 3 (quit); exit status 131"},
		{"SIGTRAP", []string{"sh", "-c", "kill -TRAP $$"}, 133, 0, "", "killed by signal 5 (trace/breakpoint trap); exit status 133"},
		{"SIGSYS", []string{"sh", "-c", "kill -SYS $$"}, 159, 0, "", "killed by signal 31 (bad system call); exit status 159"},
		{"SIGUSR1", []string{"sh", "-c", "kill -USR1 $$"}, 138, 0, "", "killed by signal 10 (user defined signal 1); exit status 138"},
		{"SIGALRM", []string{"sh", "-c", "kill -ALRM $$"}, 142, 0, "", "killed by signal 14 (alarm clock); exit status 142"},
		{"SIGPIPE", []string{"sh", "-c", "kill -PIPE $$"}, 141, 0, "", ""},
		{"SIGINT", []string{"sh", "-c", "kill -INT $$"}, -1, syscall.SIGINT, "", ""},
		{"not found", []string{"no-such-command-ptscope"}, 127, 0, "", "ptscope: no-such-command-ptscope: command not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cmd := ptscopeProcess(t, append([]string{"run", "--quiet", "--out", out, "--"}, tt.cmd...)...)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
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
				t.Errorf("ptscope exit %d (signaled %v %v), want %d", ws.ExitStatus(), ws.Signaled(), ws.Signal(), tt.code)
			}
			if stdout.String() != tt.stdout {
				t.Errorf("stdout %q, want %q", stdout.String(), tt.stdout)
			}
			// the note only; no "goroutine", "SIGSEGV:", "PC=" of a runtime dump
			got := strings.TrimSuffix(stderr.String(), "\n")
			if tt.note == "" && got != "" || tt.note != "" && (!strings.HasSuffix(got, tt.note) || strings.Contains(got, "\n")) {
				t.Errorf("stderr %q, want the one line %q", stderr.String(), tt.note)
			}
		})
	}
}

// A closed pipe on ptscope's own stdout and stderr (`ptscope run ... 2>&1 |
// head` after head exited) never changes the status: ptscope's summary and
// warnings fail to print, the command's 3 comes back.
func TestRunProcessBrokenPipe(t *testing.T) {
	t.Parallel()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	defer w.Close()
	cmd := ptscopeProcess(t, "run", "--out", t.TempDir(), "--", "sh", "-c", "exit 3")
	cmd.Stdout, cmd.Stderr = w, w
	err = cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ws.Signaled() || ws.ExitStatus() != 3 {
		t.Errorf("ptscope ended with %v (signal %v), want exit 3", ws.ExitStatus(), ws.Signal())
	}
}
