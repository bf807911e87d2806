package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// alive reports whether pid runs (a zombie waiting to be reaped does not).
func alive(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// pid (comm) state ...: comm may hold spaces and parentheses
	rest := string(data[bytes.LastIndexByte(data, ')')+1:])
	f := strings.Fields(rest)
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}

// A SIGKILL of ptscope does not leave the command running, nor the
// processes it started (torchrun's workers): the command gets its
// parent-death signal, the watch stops the rest (SIGTERM, then SIGKILL for
// one that ignores SIGTERM).
func TestRunProcessKilled(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	pids := filepath.Join(tmp, "pids")
	script := `sleep 300 & a=$!; sh -c "trap '' TERM; sleep 300" & b=$!; echo $$ $a $b > ` + pids + `.tmp; mv ` + pids + `.tmp ` + pids + `; wait`
	cmd := ptscopeProcess(t, "run", "--quiet", "--out", filepath.Join(tmp, "out"), "--", "sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitForFile(t, pids)
	data, err := os.ReadFile(pids)
	if err != nil {
		t.Fatal(err)
	}
	var procs []int
	for _, f := range strings.Fields(string(data)) {
		n, err := strconv.Atoi(f)
		if err != nil {
			t.Fatal(err)
		}
		procs = append(procs, n)
	}
	if len(procs) != 3 {
		t.Fatalf("pids %q", data)
	}
	for _, p := range procs {
		if !alive(p) {
			t.Fatalf("process %d not running before the kill", p)
		}
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	deadline := time.Now().Add(15 * time.Second) // SIGTERM, 5 s, SIGKILL
	for {
		var left []int
		for _, p := range procs {
			if alive(p) {
				left = append(left, p)
			}
		}
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			for _, p := range left {
				_ = syscall.Kill(p, syscall.SIGKILL)
			}
			t.Fatalf("still running after ptscope was killed: %v (of the command %d and its children %v)", left, procs[0], procs[1:])
		}
		time.Sleep(50 * time.Millisecond)
	}
}
