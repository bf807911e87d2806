//go:build !windows

package capture

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// runWithFiles runs argv with stdout and stderr as given and ptscope's
// status lines on stderr, as the CLI does.
func runWithFiles(t *testing.T, o Options, stdout, stderr *os.File, argv ...string) *Result {
	t.Helper()
	o.Stdout, o.Stderr, o.Status = stdout, stderr, stderr
	res, err := Run(context.Background(), o, argv)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// pipeOutput returns a pipe's write end and a function that closes it and
// returns what was written.
func pipeOutput(t *testing.T) (*os.File, func() string) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan string)
	go func() { b, _ := io.ReadAll(r); r.Close(); got <- string(b) }()
	return w, func() string { w.Close(); return <-got }
}

const noCaptureLine = "ptscope: warning: nothing was captured: no Python process loaded the ptscope companion"

// ptscope's lines after the run start on a line of their own, whether the
// command's stderr is a pipe (relayed), the same pipe as stdout (2>&1, one
// relay keeps the order) or a file (its last byte is read).
func TestRunOwnLine(t *testing.T) {
	t.Parallel()
	t.Run("pipe", func(t *testing.T) {
		t.Parallel()
		w, done := pipeOutput(t)
		res := runWithFiles(t, testOptions(t), os.Stdout, w, "sh", "-c", "printf 'progress 50%%' >&2; exit 4")
		got := done()
		if res.ExitCode != 4 || !strings.HasPrefix(got, "progress 50%\n"+noCaptureLine) {
			t.Errorf("exit %d, stderr %q", res.ExitCode, got)
		}
	})
	t.Run("pipe, ends with a newline", func(t *testing.T) {
		t.Parallel()
		w, done := pipeOutput(t)
		runWithFiles(t, testOptions(t), os.Stdout, w, "sh", "-c", "echo done >&2")
		if got := done(); !strings.HasPrefix(got, "done\n"+noCaptureLine) {
			t.Errorf("stderr %q", got)
		}
	})
	t.Run("2>&1", func(t *testing.T) {
		t.Parallel()
		w, done := pipeOutput(t)
		script := "for i in 1 2 3 4 5 6 7 8 9 10; do echo out$i; echo err$i >&2; done; printf tail"
		runWithFiles(t, testOptions(t), w, w, "sh", "-c", script)
		var want strings.Builder
		for i := 1; i <= 10; i++ {
			want.WriteString("out" + strconv.Itoa(i) + "\nerr" + strconv.Itoa(i) + "\n")
		}
		want.WriteString("tail\n" + noCaptureLine)
		if got := done(); !strings.HasPrefix(got, want.String()) {
			t.Errorf("output %q, want it to start with %q", got, want.String())
		}
	})
	t.Run("file", func(t *testing.T) {
		t.Parallel()
		p := filepath.Join(t.TempDir(), "log")
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		runWithFiles(t, testOptions(t), f, f, "sh", "-c", "echo first; printf 'no newline' >&2")
		f.Close()
		got, _ := os.ReadFile(p)
		if !strings.HasPrefix(string(got), "first\nno newline\n"+noCaptureLine) {
			t.Errorf("file %q", got)
		}
	})
}

// The relay does not swallow a closed pipe: the command sees it as it would
// have without ptscope (sh dies of SIGPIPE).
func TestRelayClosedPipe(t *testing.T) {
	t.Parallel()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	defer w.Close()
	res := runWithFiles(t, testOptions(t), w, w, "sh", "-c", "i=0; while [ $i -lt 100000 ]; do echo x; i=$((i+1)); done; exit 5")
	if res.ExitCode != 141 {
		t.Errorf("exit %d, want 141 (the command's SIGPIPE)", res.ExitCode)
	}
}
