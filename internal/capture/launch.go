//go:build !windows

package capture

import (
	"github.com/ptscope/ptscope/internal/report/rundir"

	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Result is the outcome of Run.
type Result struct {
	Dir      string         // the bundle folder
	ExitCode int            // the command's exit code; 128+N when killed by signal N
	Signal   syscall.Signal // the signal that killed the command, or 0
	Manifest Manifest
}

// ErrNotFound wraps a command that could not be started (shells exit 127).
var ErrNotFound = errors.New("command not found")

// Run launches argv with the companion on PYTHONPATH, waits for it, and
// writes the bundle's manifest. The command's stdin, stdout and stderr are
// opts' streams (inherited as is when they are *os.File). SIGINT, SIGTERM,
// SIGHUP, SIGQUIT and SIGUSR2 sent to ptscope are forwarded to the command
// (SIGINT and SIGQUIT only when they did not come from the terminal, which
// already delivers them to the command); SIGUSR1 asks every captured rank
// for a snapshot. ctx is not used to stop the command: the command decides.
func Run(ctx context.Context, opts Options, argv []string) (*Result, error) {
	if len(argv) == 0 {
		return nil, fmt.Errorf("no command given")
	}
	if err := opts.validate(); err != nil {
		return nil, err
	}
	keepBrokenPipes()
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return nil, fmt.Errorf("%s: %w", argv[0], ErrNotFound)
	}
	comp, err := InstallCompanion(opts.CacheDir)
	if err != nil {
		return nil, err
	}
	defer comp.Remove()
	name := opts.Name
	if name == "" {
		name = CommandName(argv)
	}
	start := time.Now()
	dir, err := rundir.NewRunDir(opts.OutDir, name)
	if err != nil {
		if dir == "" {
			return nil, fmt.Errorf("--out %s: %w", opts.OutDir, err)
		}
		// The bundle folder exists; only OUT/latest could not be updated.
		fmt.Fprintf(os.Stderr, "ptscope: warning: %v\n", err)
	}
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	if err := os.MkdirAll(filepath.Join(dir, ".ptscope"), 0o755); err != nil {
		return nil, err
	}
	cfg, _ := json.Marshal(opts.config())
	cwd, _ := os.Getwd()
	host, _ := os.Hostname()
	base := opts.Env
	if base == nil {
		base = os.Environ()
	}
	m := Manifest{
		SchemaVersion: 1, Tool: "ptscope " + opts.Version, Name: name, Command: argv, Cwd: cwd, Host: host,
		StartTime: start.UTC(), Status: "running", Options: cfg, Ranks: []RankInfo{}, Files: []string{}, Warnings: []string{},
		PyTorchCUDAAllocConf: envValue(base, "PYTORCH_CUDA_ALLOC_CONF"),
		Simulated:            opts.Simulate.Mode() != ModeCapture, Mode: opts.Simulate.Mode(),
	}
	if comp.Warning != "" {
		m.Warnings = append(m.Warnings, comp.Warning)
	}
	if err := writeManifest(dir, &m); err != nil {
		return nil, err
	}

	cmd := exec.Command(path, argv[1:]...)
	cmd.Args = argv
	cmd.Stdin, cmd.Stdout, cmd.Stderr = opts.Stdin, opts.Stdout, opts.Stderr
	cmd.Env = childEnv(base, comp.Dir, dir, string(cfg), opts.Simulate.env()...)

	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", argv[0], err)
	}
	var wg sync.WaitGroup
	done := make(chan struct{})
	wg.Add(1)
	go func() { defer wg.Done(); forwardSignals(sigs, done, cmd.Process, dir) }()
	tail := newTailer(dir)
	if opts.StatusTTY && opts.Status != nil && !opts.Quiet {
		wg.Add(1)
		go func() { defer wg.Done(); showStatus(opts.Status, fdOf(opts.Status), opts.Interval, tail, done) }()
	}
	waitErr := cmd.Wait()
	close(done)
	wg.Wait()

	res := &Result{Dir: dir}
	if st, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && st.Signaled() {
		res.Signal = st.Signal()
		res.ExitCode = 128 + int(st.Signal())
	} else if cmd.ProcessState != nil {
		res.ExitCode = cmd.ProcessState.ExitCode()
	} else if waitErr != nil {
		return nil, waitErr
	}
	end := time.Now()
	m.EndTime = ptr(end.UTC())
	m.DurationNs = end.Sub(start).Nanoseconds()
	m.Status = "finished"
	m.ExitCode = res.ExitCode
	if res.Signal != 0 {
		m.Signal = res.Signal.String()
	}
	finishManifest(dir, &m, opts.Ranks)
	finishSimulation(dir, &m, opts.Simulate)
	if err := writeManifest(dir, &m); err != nil {
		return nil, err
	}
	res.Manifest = m
	if opts.Status != nil {
		for _, w := range m.Warnings {
			if opts.Quiet && strings.HasPrefix(w, noCapturePrefix) {
				continue // asked for quiet: it stays in the manifest
			}
			fmt.Fprintf(opts.Status, "ptscope: warning: %s\n", w)
		}
		if !opts.Quiet {
			tail.poll()
			writeSummary(opts.Status, res, tail)
		} else if res.Signal != 0 && res.Signal != syscall.SIGINT && res.Signal != syscall.SIGPIPE {
			// what a shell says of a job killed by a signal (it says
			// nothing for SIGINT and SIGPIPE); ptscope's own status is
			// 128+N and tells the shell nothing of the kind
			fmt.Fprintf(opts.Status, "ptscope: the command was killed by signal %d (%s); exit status %d\n", int(res.Signal), res.Signal, res.ExitCode)
		}
	}
	return res, nil
}

// forwardSignals passes signals on to the command until done is closed;
// SIGUSR1 becomes a snapshot request for the companion instead.
func forwardSignals(sigs <-chan os.Signal, done <-chan struct{}, p *os.Process, dir string) {
	requests := 0
	for {
		select {
		case <-done:
			return
		case s := <-sigs:
			sig := s.(syscall.Signal)
			switch {
			case sig == syscall.SIGUSR1:
				requests++
				_ = writeFileAtomic(filepath.Join(dir, ".ptscope", "snapshot_request"), []byte(strconv.Itoa(requests)))
			case (sig == syscall.SIGINT || sig == syscall.SIGQUIT) && terminalForeground():
				// the terminal sent it to the whole foreground group, the command included
			default:
				_ = p.Signal(sig)
			}
		}
	}
}

// showStatus keeps the live status line on the terminal's bottom row until
// done: the rows above become a scroll region (as apt does for its progress
// bar), so the command's own output scrolls above the status and is never
// overwritten. Without a known terminal size it redraws a line in place.
func showStatus(w io.Writer, fd uintptr, interval time.Duration, tail *tailer, done <-chan struct{}) {
	t := time.NewTicker(interval)
	defer t.Stop()
	rows := 0 // rows of the scroll region set up, 0 = none
	for {
		select {
		case <-done:
			if rows > 0 {
				// reset the region, clear the status row, put the cursor back
				fmt.Fprintf(w, "\x1b7\x1b[r\x1b[%d;1H\x1b[2K\x1b8", rows)
			} else {
				fmt.Fprint(w, "\r\x1b[K")
			}
			return
		case <-t.C:
			tail.poll()
			line := tail.statusLine()
			if line == "" {
				continue
			}
			r, c := terminalSize(fd)
			if r < 3 || c < 20 {
				fmt.Fprint(w, "\x1b[K"+line+"\r")
				continue
			}
			if len(line) > c-1 {
				line = line[:c-1]
			}
			if r != rows {
				// make room for the status row, then confine scrolling to the rows above it
				fmt.Fprintf(w, "\n\x1b7\x1b[1;%dr\x1b8\x1b[1A", r-1)
				rows = r
			}
			fmt.Fprintf(w, "\x1b7\x1b[%d;1H\x1b[2K%s\x1b8", rows, line)
		}
	}
}

func fdOf(w io.Writer) uintptr {
	if f, ok := w.(*os.File); ok {
		return f.Fd()
	}
	return ^uintptr(0)
}
