//go:build !windows

package capture

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ptscope/ptscope/internal/bundle"
	"github.com/ptscope/ptscope/internal/report/rundir"
)

// Result is the outcome of Run.
type Result struct {
	Dir      string         // the bundle folder ("" when none could be made: nothing was captured)
	ExitCode int            // the command's exit code; 128+N when killed by signal N
	Signal   syscall.Signal // the signal that killed the command, or 0
	Manifest bundle.Manifest
}

// ErrNotFound is wrapped by the StartError of a command that is not there
// (shells exit 127).
var ErrNotFound = errors.New("command not found")

// groupWindow is how long ptscope waits for the watch to say it received a
// signal too (a process-group or job-wide signal) before forwarding it.
const groupWindow = 500 * time.Millisecond

// forwardedSignals are the signals Run handles: all but SIGUSR1 are
// forwarded to the command unless it already received them.
var forwardedSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2}

// Run launches argv with the companion on PYTHONPATH, waits for it, and
// writes the bundle's manifest. The command's stdin, stdout and stderr are
// opts' streams (inherited as is when they are *os.File; a pipe as stderr
// is relayed, see relay). SIGINT, SIGTERM, SIGHUP, SIGQUIT and SIGUSR2 sent
// to ptscope are forwarded to the command unless they reached the whole
// process group or job, which the command is part of (see watch); SIGUSR1
// asks every captured rank for a snapshot. On Linux the command is killed
// when ptscope is, and so are its children (the watch). ctx is not used to
// stop the command: the command decides.
//
// A command that cannot be started is a *StartError (with the exit status
// a shell gives); its bundle, if one was made, is finalised first. When the
// bundle folder or the companion cannot be made, the command runs anyway,
// without capture, after one warning.
func Run(ctx context.Context, opts Options, argv []string) (*Result, error) {
	if len(argv) == 0 {
		return nil, fmt.Errorf("no command given")
	}
	if err := opts.validate(); err != nil {
		return nil, err
	}
	keepBrokenPipes()
	status := opts.Status
	if status == nil {
		status = io.Discard
	}
	path, err := lookPath(argv[0])
	if err != nil {
		return nil, err
	}
	name := opts.Name
	if name == "" {
		name = CommandName(argv)
	}
	base := opts.Env
	if base == nil {
		base = os.Environ()
	}
	cfg, _ := json.Marshal(opts.config())
	l := &launch{opts: opts, argv: argv, path: path, base: base, cfg: cfg, start: time.Now(), status: status}
	l.m = l.newManifest(name)
	dir, comp, why := prepareCapture(opts, name, &l.m, status)
	defer comp.Remove()
	if why != "" {
		fmt.Fprintf(status, "ptscope: warning: %s; the command runs without capture\n", why)
	}
	l.dir, l.comp = dir, comp
	l.res = &Result{Dir: dir}
	tail, rl, failed, err := l.runRanks()
	if err != nil {
		return failed, err
	}
	if err := l.finish(); err != nil {
		return nil, err
	}
	l.report(tail, rl)
	return l.res, nil
}

// launch is one Run: what it starts the command with, the manifest it
// writes and the result so far.
type launch struct {
	opts   Options
	argv   []string
	path   string    // the command's executable
	base   []string  // the environment the children's build on
	cfg    []byte    // the options as the companion reads them
	start  time.Time // when the run began
	status io.Writer
	dir    string     // the bundle folder ("": no capture)
	comp   *Companion // the companion on PYTHONPATH (nil: none)
	m      bundle.Manifest
	res    *Result
}

// newManifest is the manifest of a run named name as it starts.
func (l *launch) newManifest(name string) bundle.Manifest {
	opts := l.opts
	m := bundle.Manifest{
		SchemaVersion: 1, Tool: "ptscope " + opts.Version, Name: name, Command: opts.manifestArgv(l.argv),
		StartTime: l.start.UTC(), Status: bundle.StatusRunning, Options: l.cfg, Ranks: []bundle.RankInfo{}, Files: []string{}, Warnings: []string{}, Signals: []bundle.SignalRecord{},
		PyTorchCUDAAllocConf: envValue(l.base, "PYTORCH_CUDA_ALLOC_CONF"),
		Simulated:            opts.Simulate.Mode() != ModeCapture, Mode: opts.Simulate.Mode(),
	}
	m.Cwd, _ = os.Getwd()
	m.Host, _ = os.Hostname()
	return m
}

// runRanks runs the command once, or once per simulated rank until one
// fails, recording each exit and the signals forwarded. It returns the
// last child's status tail and stderr relay; when a child cannot start,
// the result to return (nil for an error other than a StartError) and the
// error, the manifest written as failed to start.
func (l *launch) runRanks() (tail *tailer, rl *relay, failed *Result, err error) {
	opts, dir, res := l.opts, l.dir, l.res
	ranks := []int{-1} // -1: one child, as the options say
	if len(opts.Simulate.Ranks) > 1 {
		ranks = opts.Simulate.Ranks
	}
	for i, r := range ranks {
		env := l.base
		if dir != "" {
			ccfg, extra := l.cfg, opts.Simulate.env()
			if r >= 0 {
				ccfg, extra = opts.childConfig(r), opts.Simulate.forRank(r).env()
			}
			env = childEnv(l.base, l.comp.Dir, dir, string(ccfg), extra...)
		}
		c, err := runChild(l.path, l.argv, env, opts, dir, l.status)
		if err != nil {
			failed, err := l.failedStart(err)
			return nil, nil, failed, err
		}
		res.ExitCode, res.Signal, tail, rl = c.exitCode, c.signal, c.tail, c.relay
		l.m.Signals = append(l.m.Signals, c.signals...)
		if (res.ExitCode != 0 || res.Signal != 0) && i+1 < len(ranks) {
			l.m.Warnings = append(l.m.Warnings, fmt.Sprintf("simulation: rank %d ended with exit status %d; ranks %s were not simulated", r, res.ExitCode, bundle.RankList(ranks[i+1:])))
			break
		}
	}
	return tail, rl, nil, nil
}

// failedStart handles a child that could not start (err): a StartError
// is written to the manifest, when there is a bundle, and returned with
// its exit code; any other error is returned alone.
func (l *launch) failedStart(err error) (*Result, error) {
	var se *StartError
	if errors.As(err, &se) && l.dir != "" {
		m := &l.m
		end := time.Now()
		m.EndTime, m.DurationNs = ptr(end.UTC()), end.Sub(l.start).Nanoseconds()
		m.Status, m.ExitCode = bundle.StatusFailedToStart, se.Code
		m.Warnings = append(m.Warnings, se.Error())
		if err := bundle.WriteManifest(l.dir, m); err != nil {
			fmt.Fprintf(l.status, "ptscope: warning: %v\n", err)
		}
	}
	if se != nil {
		return &Result{Dir: l.dir, ExitCode: se.Code, Manifest: l.m}, se
	}
	return nil, err
}

// finish completes the manifest with the end, status and exit, and, with
// a bundle, its ranks (argv masked unless opts.KeepArgv) and simulation,
// and writes it.
func (l *launch) finish() error {
	opts, dir, res, m := l.opts, l.dir, l.res, &l.m
	end := time.Now()
	m.EndTime = ptr(end.UTC())
	m.DurationNs = end.Sub(l.start).Nanoseconds()
	m.Status = bundle.StatusFinished
	m.ExitCode = res.ExitCode
	if res.Signal != 0 {
		m.Signal = res.Signal.String()
	}
	if dir != "" {
		bundle.FinishManifest(dir, m, opts.Ranks)
		if !opts.KeepArgv {
			for i := range m.Ranks {
				m.Ranks[i].Argv = MaskArgv(m.Ranks[i].Argv)
			}
			maskArgvFiles(dir)
		}
		finishSimulation(dir, m, opts.Simulate)
		if err := bundle.WriteManifest(dir, m); err != nil {
			return err
		}
	}
	res.Manifest = *m
	return nil
}

// report writes the manifest's warnings and the run's summary (quiet:
// only how a signal killed the command), each on a line of its own after
// the command's output (tail, rl: the last child's).
func (l *launch) report(tail *tailer, rl *relay) {
	opts, res, m := l.opts, l.res, &l.m
	// ptscope's lines start on a line of their own
	out := &lineStarter{w: l.status, prefix: func() string { return lineStart(opts.Status, opts.Stderr, rl) }}
	for _, warn := range m.Warnings {
		if opts.Quiet && strings.HasPrefix(warn, bundle.NoCapturePrefix) {
			continue // asked for quiet: it stays in the manifest
		}
		fmt.Fprintf(out, "ptscope: warning: %s\n", warn)
	}
	if !opts.Quiet {
		tail.poll()
		writeSummary(out, res, tail)
	} else if res.Signal != 0 && res.Signal != syscall.SIGINT && res.Signal != syscall.SIGPIPE {
		// what a shell says of a job killed by a signal (it says nothing
		// for SIGINT and SIGPIPE); ptscope's own status is 128+N and
		// tells the shell nothing of the kind
		fmt.Fprintf(out, "ptscope: the command was killed by signal %d (%s); exit status %d\n", int(res.Signal), res.Signal, res.ExitCode)
	}
}

// child is how one launched command ended.
type child struct {
	exitCode int
	signal   syscall.Signal
	signals  []bundle.SignalRecord
	tail     *tailer
	relay    *relay
}

// runChild starts argv with env, forwards signals to it while it runs and
// waits for it; a command that cannot start is a *StartError.
func runChild(path string, argv, env []string, opts Options, dir string, status io.Writer) (*child, error) {
	runID := newRunID()
	env = withVar(env, runIDEnv, runID)
	cmd := exec.Command(path, argv[1:]...)
	cmd.Args = argv
	cmd.Env = env
	cmd.SysProcAttr = childSysProcAttr()
	var rl *relay
	cmd.Stdout, cmd.Stderr, rl = newRelay(opts.Stdout, opts.Stderr)
	cmd.Stdin = opts.Stdin

	w := startWatch(runIDEnv + "=" + runID)
	defer w.close() // before ptscope's own exit: its leftovers are the command's business
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, forwardedSignals...)
	defer signal.Stop(sigs)
	// The parent-death signal fires when the thread that started the
	// command ends: keep this goroutine on its thread until the command
	// has been waited for.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	wait, err := startCmd(cmd, stdinClosed(opts.Stdin))
	if err != nil {
		rl.abort()
		return nil, startError(argv[0], err)
	}
	rl.started()
	fw := &forwarder{p: cmd.Process, dir: dir, watch: w, window: groupWindow}
	var wg sync.WaitGroup
	done := make(chan struct{})
	wg.Add(1)
	go func() { defer wg.Done(); fw.run(sigs, done) }()
	tail := newTailer(dir)
	if opts.StatusTTY && opts.Status != nil && !opts.Quiet && dir != "" {
		wg.Add(1)
		go func() { defer wg.Done(); showStatus(opts.Status, fdOf(opts.Status), opts.Interval, tail, done) }()
	}
	waitErr := wait()
	close(done)
	wg.Wait()
	rl.finish(time.Second)

	c := &child{tail: tail, relay: rl, signals: append([]bundle.SignalRecord{}, fw.records...)}
	if st, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && st.Signaled() {
		c.signal = st.Signal()
		c.exitCode = 128 + int(st.Signal())
	} else if cmd.ProcessState != nil {
		c.exitCode = cmd.ProcessState.ExitCode()
	} else if waitErr != nil {
		return nil, waitErr
	}
	return c, nil
}

// prepareCapture unpacks the companion and makes the bundle folder with its
// first manifest; why says, when either failed, why nothing will be
// captured (dir is then "").
func prepareCapture(opts Options, name string, m *bundle.Manifest, status io.Writer) (dir string, comp *Companion, why string) {
	comp, err := InstallCompanion(opts.CacheDir)
	if err != nil {
		return "", nil, err.Error()
	}
	if comp.Warning != "" {
		m.Warnings = append(m.Warnings, comp.Warning)
	}
	dir, err = rundir.NewRunDir(opts.OutDir, name)
	if err != nil {
		if dir == "" {
			return "", comp, fmt.Sprintf("cannot create a bundle folder in %s: %v", opts.OutDir, errors.Unwrap(err))
		}
		// The bundle folder exists; only OUT/latest could not be updated.
		fmt.Fprintf(status, "ptscope: warning: %v\n", err)
	}
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	if err := os.Mkdir(filepath.Join(dir, ".ptscope"), 0o755); err != nil {
		return "", comp, fmt.Sprintf("cannot write in the bundle folder %s: %v", dir, err)
	}
	if err := bundle.WriteManifest(dir, m); err != nil {
		return "", comp, fmt.Sprintf("cannot write in the bundle folder %s: %v", dir, err)
	}
	return dir, comp, ""
}

// newRunID is the marker the command's processes carry in their
// environment (PTSCOPE_RUN_ID), unique to this run.
func newRunID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// withVar is env with key set to value (any earlier value removed).
func withVar(env []string, key, value string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); k != key {
			out = append(out, kv)
		}
	}
	return append(out, key+"="+value)
}

// lineStarter writes prefix() before its first write.
type lineStarter struct {
	w       io.Writer
	prefix  func() string
	started bool
}

func (l *lineStarter) Write(p []byte) (int, error) {
	if !l.started {
		l.started = true
		if s := l.prefix(); s != "" {
			if _, err := io.WriteString(l.w, s); err != nil {
				return 0, err
			}
		}
	}
	return l.w.Write(p)
}

// maxSignalRecords bounds the manifest's "signals" under a signal storm.
const maxSignalRecords = 100

// forwarder passes signals on to the command.
type forwarder struct {
	p        *os.Process
	dir      string // the bundle ("" = none: SIGUSR1 is dropped)
	watch    *watch // nil = none: a terminal's SIGINT/SIGQUIT is assumed to reach the command
	window   time.Duration
	records  []bundle.SignalRecord
	requests int
}

func (f *forwarder) run(sigs <-chan os.Signal, done <-chan struct{}) {
	for {
		select {
		case <-done:
			return
		case s := <-sigs:
			f.handle(s.(syscall.Signal), time.Now())
		}
	}
}

// handle passes sig on to the command unless the command got it already;
// SIGUSR1 becomes a snapshot request for the companion instead.
func (f *forwarder) handle(sig syscall.Signal, at time.Time) {
	rec := bundle.SignalRecord{Signal: sig.String(), Time: at.UTC()}
	switch {
	case sig == syscall.SIGUSR1:
		if f.dir != "" {
			f.requests++
			_ = bundle.WriteFileAtomic(filepath.Join(f.dir, ".ptscope", "snapshot_request"), []byte(strconv.Itoa(f.requests)))
		}
	case f.watch != nil:
		rec.ToGroup = f.watch.sawToo(sig, at, f.window)
		// the watch shares ptscope's process group; the command, unless it
		// left it, too
		if !rec.ToGroup || !inMyProcessGroup(f.p.Pid) {
			rec.Forwarded = f.p.Signal(sig) == nil
		}
	case (sig == syscall.SIGINT || sig == syscall.SIGQUIT) && terminalForeground():
		rec.ToGroup = true // the terminal sent it to the whole foreground group, the command included
	default:
		rec.Forwarded = f.p.Signal(sig) == nil
	}
	if len(f.records) < maxSignalRecords {
		f.records = append(f.records, rec)
	}
}

func inMyProcessGroup(pid int) bool {
	pg, err := syscall.Getpgid(pid)
	return err == nil && pg == syscall.Getpgrp()
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

// startCmd starts cmd and returns the function that waits for it. With
// closedStdin the command starts with its standard input closed, as
// ptscope's was (exec.Cmd would give it /dev/null): it is then started by
// os.StartProcess when its output goes to files, as it does from a shell
// (otherwise it gets /dev/null still).
func startCmd(cmd *exec.Cmd, closedStdin bool) (wait func() error, err error) {
	out, okOut := cmd.Stdout.(*os.File)
	errF, okErr := cmd.Stderr.(*os.File)
	if !closedStdin || !okOut || !okErr {
		return cmd.Wait, cmd.Start()
	}
	p, err := os.StartProcess(cmd.Path, cmd.Args, &os.ProcAttr{Dir: cmd.Dir, Env: cmd.Env,
		Files: []*os.File{nil, out, errF}, Sys: cmd.SysProcAttr})
	if err != nil {
		return nil, err
	}
	cmd.Process = p
	return func() error {
		ps, err := p.Wait()
		cmd.ProcessState = ps
		return err
	}, nil
}
