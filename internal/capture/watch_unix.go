//go:build !windows

package capture

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// The watch is a small helper process: ptscope started again (its own
// binary, PTSCOPE_WATCH=1 in the environment) before the command, in the
// same process group and cgroup as ptscope and the command. It answers two
// questions ptscope cannot answer alone:
//
//   - Did a signal ptscope received reach the whole process group (a
//     terminal's Ctrl-C, `kill -- -PGID`, timeout(1)) or every process of
//     the job (Slurm, systemd)? Then the watch received it too, and the
//     command already has it: ptscope must not forward it a second time.
//     Signals carry no such mark (and Go does not expose siginfo), so the
//     watch is the witness.
//   - Was ptscope killed (SIGKILL, the OOM killer) while the command ran?
//     Then its end of the control pipe closes without the goodbye byte,
//     and the watch stops every process that carries this run's marker in
//     its environment (PTSCOPE_RUN_ID): the command's own children, such
//     as torchrun's workers, which the command's parent-death signal does
//     not reach.
//
// Protocol: stdin is the control pipe (ptscope writes 'q' and closes it
// at a normal end; EOF without 'q' means ptscope died); fd 3 is the report
// pipe: the watch writes 'r' once it handles signals, then one byte per
// signal it receives (the signal number).

const (
	watchEnv     = "PTSCOPE_WATCH"
	watchMarkEnv = "PTSCOPE_WATCH_MARK" // the marker KEY=VALUE the watch looks for
	runIDEnv     = "PTSCOPE_RUN_ID"     // set in the command's environment
)

// watchedSignals are the signals ptscope forwards (and SIGUSR1, which would
// otherwise kill the watch).
var watchedSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2}

// WatchMain runs the watch process when this process is one (Run starts
// the watch as a copy of the running binary, PTSCOPE_WATCH=1 in its
// environment): it reports whether it was, and the code the process must
// then exit with. Every program that can call Run calls it first thing in
// main (cmd/ptscope; the test binaries of the packages whose tests call Run,
// in their TestMain): a binary that does not would run its own main again.
func WatchMain() (code int, isWatch bool) {
	if os.Getenv(watchEnv) != "1" {
		return 0, false
	}
	return watchMain(), true
}

// watchMain is the watch process.
func watchMain() int {
	report := os.NewFile(3, "report")
	if report == nil {
		return 2
	}
	sigs := make(chan os.Signal, 64)
	signal.Notify(sigs, watchedSignals...)
	signal.Ignore(syscall.SIGPIPE)
	if _, err := report.Write([]byte{'r'}); err != nil {
		return 2
	}
	ctl := make(chan bool, 1) // true: goodbye; false: ptscope is gone
	go func() {
		b, _ := io.ReadAll(os.Stdin)
		ctl <- bytes.IndexByte(b, 'q') >= 0
	}()
	for {
		select {
		case s := <-sigs:
			_, _ = report.Write([]byte{byte(s.(syscall.Signal))})
		case bye := <-ctl:
			if !bye {
				stopMarked(os.Getenv(watchMarkEnv), 5*time.Second)
			}
			return 0
		}
	}
}

// stopMarked sends SIGTERM to every process whose environment holds mark
// (KEY=VALUE), then SIGKILL to those still there after grace. Linux only
// (it reads /proc); elsewhere it does nothing.
func stopMarked(mark string, grace time.Duration) {
	if mark == "" {
		return
	}
	deadline := time.Now().Add(grace)
	sig := syscall.SIGTERM
	for {
		pids := markedProcesses(mark)
		if len(pids) == 0 {
			return
		}
		if time.Now().After(deadline) {
			sig = syscall.SIGKILL
		}
		for _, p := range pids {
			_ = syscall.Kill(p, sig)
		}
		if sig == syscall.SIGKILL {
			// once more for processes forked meanwhile, then done
			time.Sleep(50 * time.Millisecond)
			for _, p := range markedProcesses(mark) {
				_ = syscall.Kill(p, syscall.SIGKILL)
			}
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// markedProcesses lists the processes (not this one) whose initial
// environment holds mark, read from /proc/PID/environ.
func markedProcesses(mark string) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	want := []byte(mark)
	self := os.Getpid()
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		for _, kv := range bytes.Split(data, []byte{0}) {
			if bytes.Equal(kv, want) {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

// watch is ptscope's side of the watch process.
type watch struct {
	cmd  *exec.Cmd
	ctl  *os.File // control pipe, write end
	mu   sync.Mutex
	seen map[syscall.Signal][]time.Time // signals the watch reported, when
	news chan struct{}                  // a report arrived (never blocks the reader)

	closeOnce sync.Once
}

// startWatch starts the watch process for a command whose environment
// holds mark (KEY=VALUE); nil when it cannot (ptscope then forwards every
// signal, except a terminal's SIGINT and SIGQUIT).
func startWatch(mark string) *watch {
	exe := "/proc/self/exe" // the running binary, even if replaced on disk since
	if runtime.GOOS != "linux" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return nil
		}
	}
	ctlR, ctlW, err := os.Pipe()
	if err != nil {
		return nil
	}
	repR, repW, err := os.Pipe()
	if err != nil {
		ctlR.Close()
		ctlW.Close()
		return nil
	}
	cmd := exec.Command(exe)
	cmd.Args = []string{"ptscope-watch"}
	cmd.Env = append(os.Environ(), watchEnv+"=1", watchMarkEnv+"="+mark)
	cmd.Dir = "/"
	cmd.Stdin = ctlR
	cmd.ExtraFiles = []*os.File{repW}
	err = cmd.Start()
	ctlR.Close()
	repW.Close()
	if err != nil {
		ctlW.Close()
		repR.Close()
		return nil
	}
	w := &watch{cmd: cmd, ctl: ctlW, seen: map[syscall.Signal][]time.Time{}, news: make(chan struct{}, 1)}
	ready := make(chan bool, 1)
	go w.read(repR, ready)
	select {
	case ok := <-ready:
		if ok {
			return w
		}
	case <-time.After(5 * time.Second):
	}
	w.close()
	return nil
}

// read records the watch's reports until the pipe closes.
func (w *watch) read(r *os.File, ready chan<- bool) {
	defer r.Close()
	br := bufio.NewReader(r)
	b, err := br.ReadByte()
	ready <- err == nil && b == 'r'
	if err != nil {
		return
	}
	for {
		b, err := br.ReadByte()
		if err != nil {
			return
		}
		now := time.Now()
		w.mu.Lock()
		sig := syscall.Signal(b)
		w.seen[sig] = append(w.seen[sig], now)
		w.mu.Unlock()
		select {
		case w.news <- struct{}{}:
		default:
		}
	}
}

// sawToo reports whether the watch received sig within window of at (a
// signal ptscope received at at), waiting up to window for the report;
// the report it matched is used up.
func (w *watch) sawToo(sig syscall.Signal, at time.Time, window time.Duration) bool {
	timer := time.NewTimer(time.Until(at.Add(window)))
	defer timer.Stop()
	for {
		w.mu.Lock()
		ts := w.seen[sig]
		for i, t := range ts {
			if t.Before(at.Add(-window)) {
				continue
			}
			w.seen[sig] = append(ts[:i:i], ts[i+1:]...)
			w.mu.Unlock()
			return true
		}
		// drop reports too old to match anything
		keep := ts[:0]
		for _, t := range ts {
			if !t.Before(at.Add(-window)) {
				keep = append(keep, t)
			}
		}
		w.seen[sig] = keep
		w.mu.Unlock()
		select {
		case <-w.news:
		case <-timer.C:
			return false
		}
	}
}

// close ends the watch normally: the command's leftovers are left alone.
func (w *watch) close() {
	if w != nil {
		w.closeOnce.Do(w.doClose)
	}
}

func (w *watch) doClose() {
	_, _ = w.ctl.Write([]byte{'q'})
	w.ctl.Close()
	done := make(chan struct{})
	go func() { _ = w.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		_ = w.cmd.Process.Kill()
	}
}
