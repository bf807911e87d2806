//go:build linux

package capture

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// stopMarked ends every process carrying the marker: SIGTERM first, SIGKILL
// for those that ignore it, the command's children included.
func TestStopMarked(t *testing.T) {
	t.Parallel()
	mark := runIDEnv + "=" + newRunID()
	var cmds []*exec.Cmd
	for _, script := range []string{
		"sleep 60 & sleep 60 & wait",   // children that die of SIGTERM
		"trap '' TERM; sleep 60; wait", // ignores SIGTERM, and so does its child
	} {
		c := exec.Command("sh", "-c", script)
		c.Env = append(os.Environ(), mark)
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, c)
	}
	other := exec.Command("sleep", "60") // not marked: left alone
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	defer other.Process.Kill()
	deadline := time.Now().Add(5 * time.Second)
	for len(markedProcesses(mark)) < 5 {
		if time.Now().After(deadline) {
			t.Fatalf("marked processes: %v, want 5", markedProcesses(mark))
		}
		time.Sleep(10 * time.Millisecond)
	}
	start := time.Now()
	stopMarked(mark, 300*time.Millisecond)
	if left := markedProcesses(mark); len(left) != 0 {
		t.Errorf("still there: %v", left)
	}
	for _, c := range cmds {
		err := c.Wait()
		ws := c.ProcessState.Sys().(syscall.WaitStatus)
		if !ws.Signaled() {
			t.Errorf("%q: %v, want killed", c.Args, err)
		}
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("took %v", d)
	}
	if err := other.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("an unmarked process was stopped: %v", err)
	}
	if strings.Contains(mark, " ") {
		t.Fatal("bad mark")
	}
}

// The watch reports the signals it receives, and sawToo matches a report
// within the window once.
func TestWatchReports(t *testing.T) {
	t.Parallel()
	w := startWatch(runIDEnv + "=" + newRunID())
	if w == nil {
		t.Fatal("no watch")
	}
	defer w.close()
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGUSR2, syscall.SIGQUIT} {
		at := time.Now()
		if err := w.cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
		if !w.sawToo(sig, at, 2*time.Second) {
			t.Errorf("%v: no report", sig)
		}
		if w.sawToo(sig, at, 10*time.Millisecond) {
			t.Errorf("%v: one report matched twice", sig)
		}
	}
	// ptscope's own signal, not the watch's: no report
	if w.sawToo(syscall.SIGTERM, time.Now(), 100*time.Millisecond) {
		t.Errorf("report without a signal")
	}
	// the watch survived them all
	if err := w.cmd.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("watch gone: %v", err)
	}
}
