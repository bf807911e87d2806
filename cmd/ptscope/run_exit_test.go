//go:build !windows

package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ptscope/ptscope/internal/bundle"
)

// TestMain doubles as ptscope: the tests below re-execute the test binary
// with PTSCOPE_TEST_MAIN=1 and ptscope's arguments after "--", and it runs
// main as the ptscope binary does (the watch process of run included), so
// that the process-level end of `ptscope run` (exit code, death by signal)
// is observed from outside.
func TestMain(m *testing.M) {
	if os.Getenv("PTSCOPE_TEST_MAIN") == "1" {
		args := os.Args[1:]
		for i, a := range args {
			if a == "--" {
				args = args[i+1:]
				break
			}
		}
		if len(args) == 3 && args[0] == "countsig" {
			os.Exit(countSignals(args[1], args[2]))
		}
		os.Args = append([]string{"ptscope"}, args...)
		main()
		return
	}
	os.Exit(m.Run())
}

// countSignals is a command for ptscope run to start: it writes ready,
// counts the SIGTERM, SIGINT, SIGHUP and SIGUSR2 it receives until 1 s
// after the first (longer than ptscope waits before forwarding), writes the
// count to count and exits 0.
func countSignals(ready, count string) int {
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGUSR2)
	if err := os.WriteFile(ready, []byte("r"), 0o644); err != nil {
		return 2
	}
	n := 0
	var end <-chan time.Time
	for {
		select {
		case <-sigs:
			n++
			if end == nil {
				end = time.After(time.Second)
			}
		case <-end:
			if os.WriteFile(count, []byte(strconv.Itoa(n)), 0o644) != nil {
				return 2
			}
			return 0
		}
	}
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
	bin := t.TempDir()
	noexec, badInterp := filepath.Join(bin, "noexec.sh"), filepath.Join(bin, "badinterp")
	if os.WriteFile(noexec, []byte("#!/bin/sh\n"), 0o644) != nil || os.WriteFile(badInterp, []byte("#!/no/such/interpreter\n"), 0o755) != nil {
		t.Fatal("cannot write the test scripts")
	}
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
		{"not executable", []string{noexec}, 126, 0, "", "ptscope: " + noexec + ": permission denied (not executable)"},
		{"bad interpreter", []string{badInterp}, 127, 0, "", "ptscope: " + badInterp + ": cannot execute: required file not found (the #! interpreter or the program's loader is missing)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if tt.signal != 0 && signal.Ignored(tt.signal) {
				// inherited (nohup ignores SIGHUP): ptscope, started with
				// it ignored too, cannot die by it
				t.Skipf("%v is ignored in this process", tt.signal)
			}
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

// waitForFile waits until path exists.
func waitForFile(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never appeared", path)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A signal sent to the whole process group (Slurm, `kill -- -PGID`,
// timeout(1), a terminal's Ctrl-C) reaches the command once: ptscope does
// not forward what the command already got. One sent to ptscope alone is
// forwarded, once. Each case runs several ptscope processes at the same
// time: the old forwarding delivered a group SIGTERM twice in most runs.
func TestRunProcessGroupSignal(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		sig   syscall.Signal
		group bool
		runs  int
	}{
		{"SIGTERM to the group", syscall.SIGTERM, true, 6},
		{"SIGINT to the group", syscall.SIGINT, true, 3},
		{"SIGHUP to the group", syscall.SIGHUP, true, 3},
		{"SIGTERM to ptscope", syscall.SIGTERM, false, 2},
		{"SIGUSR2 to ptscope", syscall.SIGUSR2, false, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			errs := make(chan error, tt.runs)
			for range tt.runs {
				go func() { errs <- signalOnce(t.TempDir(), tt.sig, tt.group) }()
			}
			for range tt.runs {
				if err := <-errs; err != nil {
					t.Error(err)
				}
			}
		})
	}
}

// signalOnce runs ptscope in a process group of its own with countsig as
// the command, sends sig to the group or to ptscope, and checks that the
// command got it once and that the manifest says how it went.
func signalOnce(tmp string, sig syscall.Signal, group bool) error {
	ready, count, out := filepath.Join(tmp, "ready"), filepath.Join(tmp, "count"), filepath.Join(tmp, "out")
	cmd := exec.Command(os.Args[0], "-test.run=^TestRunHelperProcess$", "--", "run", "--quiet", "--out", out, "--",
		os.Args[0], "-test.run=^TestRunHelperProcess$", "--", "countsig", ready, count)
	cmd.Env = append(os.Environ(), "PTSCOPE_TEST_MAIN=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // its own group, as a shell's job
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	defer cmd.Process.Kill()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(ready); err == nil {
			break
		}
		if time.Now().After(deadline) {
			return errors.New("the command never started")
		}
	}
	target := cmd.Process.Pid
	if group {
		target = -target
	}
	if err := syscall.Kill(target, sig); err != nil {
		return err
	}
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("ptscope: %v\n%s", err, stderr.String())
	}
	n, err := os.ReadFile(count)
	if err != nil || string(n) != "1" {
		return fmt.Errorf("the command received %v %s times (%v), want once", sig, n, err)
	}
	b, err := bundle.ReadBundle(out)
	if err != nil {
		return err
	}
	if s := b.Manifest.Signals; len(s) != 1 || s[0].Signal != sig.String() || s[0].ToGroup != group || s[0].Forwarded == group || s[0].Time.IsZero() {
		return fmt.Errorf("manifest signals %+v, want one %v with to_group %v, forwarded %v", s, sig, group, !group)
	}
	return nil
}

// ptscope's lines after the run start on a line of their own, also when the
// command's last output did not end one (`... 2>&1 | tee log`).
func TestRunProcessOwnLine(t *testing.T) {
	t.Parallel()
	cmd := ptscopeProcess(t, "run", "--out", t.TempDir(), "--", "sh", "-c", "echo start; printf 'step 3/10' >&2; exit 1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out // one pipe, as 2>&1
	_ = cmd.Run()
	want := "start\nstep 3/10\nptscope: warning: nothing was captured: "
	if !strings.HasPrefix(out.String(), want) || !strings.Contains(out.String(), "\nptscope: bundle ") {
		t.Errorf("output %q, want it to start with %q", out.String(), want)
	}
}
