package attack_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/ulikunitz/xz"

	"github.com/ptscope/ptscope/internal/attack"
	"github.com/ptscope/ptscope/internal/cli"
	"github.com/ptscope/ptscope/internal/testfixture"
)

// Bounds every case must stay within (docs/security.md).
const (
	maxRSS = 512 << 20
	maxCPU = 10 * time.Second
	hang   = 90 * time.Second // a child still running then has hung
)

// TestMain doubles as ptscope: with PTSCOPE_ATTACK_ARGS set (a JSON list),
// the test binary runs the command those arguments give and exits with its
// code, so each case runs in a process of its own whose peak RSS and CPU
// time the kernel measures.
func TestMain(m *testing.M) {
	if a, ok := os.LookupEnv("PTSCOPE_ATTACK_ARGS"); ok {
		var args []string
		if err := json.Unmarshal([]byte(a), &args); err != nil {
			fmt.Fprintln(os.Stderr, "PTSCOPE_ATTACK_ARGS:", err)
			os.Exit(3)
		}
		code := cli.Main(context.Background(), args, os.Stdin, os.Stdout, os.Stderr)
		if p := os.Getenv("PTSCOPE_ATTACK_STATS"); p != "" {
			os.WriteFile(p, []byte(strconv.FormatInt(vmHWM("self"), 10)), 0o644)
		}
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// vmHWM is the peak RSS of a process's current memory image, from
// /proc/PID/status (0 if unknown). The kernel's rusage peak is no use for a
// child of this process: it starts from the parent's own peak (the child
// shares the parent's memory until it execs).
func vmHWM(pid string) int64 {
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				kb, _ := strconv.ParseInt(f[0], 10, 64)
				return kb << 10
			}
		}
	}
	return 0
}

type outcome struct {
	code           int
	stdout, stderr string
	wall, cpu      time.Duration
	rss            int64
}

func runChild(t *testing.T, stdin io.Reader, args ...string) outcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hang)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0])
	js, _ := json.Marshal(args)
	stats := filepath.Join(t.TempDir(), "stats")
	cmd.Env = append(os.Environ(), "PTSCOPE_ATTACK_ARGS="+string(js), "PTSCOPE_ATTACK_STATS="+stats, "COLUMNS=100")
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr, cmd.Stdin = &so, &se, stdin
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Poll the peak as well: a command that exits from its memory
	// watchdog writes no stats.
	var polled atomic.Int64
	done := make(chan struct{})
	go func() {
		pid := strconv.Itoa(cmd.Process.Pid)
		for {
			if v := vmHWM(pid); v > polled.Load() {
				polled.Store(v)
			}
			select {
			case <-done:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	err := cmd.Wait()
	close(done)
	o := outcome{stdout: so.String(), stderr: se.String(), wall: time.Since(start), rss: polled.Load()}
	if b, rerr := os.ReadFile(stats); rerr == nil {
		if v, _ := strconv.ParseInt(string(b), 10, 64); v > o.rss {
			o.rss = v
		}
	}
	if ctx.Err() != nil {
		t.Fatalf("%v: still running after %v (hang)", args, hang)
	}
	if ee, ok := err.(*exec.ExitError); ok {
		o.code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		o.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return o
}

// inProcess reports whether a case runs through cli.Main in this process,
// in parallel with the others: the small cases and those about the answer
// to a malformed input (coercion, format), whose inputs are a few MB at
// most. The others (bombs, nesting, huge strings, many values, CPU, the
// budget) are about a bound on memory or CPU time, which only a process of
// their own measures: the heap, the peak RSS, the runtime's soft memory
// limit and the rusage CPU time are the process's, shared by every case
// running in it.
func inProcess(c attack.Case) bool {
	return len(c.Args) == 0 && (c.Small || c.Class == "coercion" || c.Class == "format")
}

// runHere runs the command through cli.Main in this process.
func runHere(t *testing.T, stdin io.Reader, args ...string) outcome {
	t.Helper()
	if stdin == nil {
		stdin = strings.NewReader("")
	}
	var so, se bytes.Buffer
	done := make(chan int, 1)
	start := time.Now()
	go func() { done <- cli.Main(context.Background(), args, stdin, &so, &se) }()
	select {
	case code := <-done:
		return outcome{code: code, stdout: so.String(), stderr: se.String(), wall: time.Since(start)}
	case <-time.After(hang):
		t.Fatalf("%v: still running after %v (hang)", args, hang)
	}
	panic("unreachable")
}

// TestCases runs every hostile input through the real command, in a child
// process where a bound on memory or CPU is measured (inProcess): the exit
// code and message must be the case's, with one line on stderr for an
// error (no stack dump), within the RSS and CPU bounds.
func TestCases(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("peak RSS is measured with Linux rusage")
	}
	dir := t.TempDir()
	for _, c := range attack.Cases() {
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(dir, strings.ReplaceAll(c.Name, "/", "_")+"_"+c.File)
			if err := os.WriteFile(path, c.Make(), 0o644); err != nil {
				t.Fatal(err)
			}
			args := []string{c.Command}
			tmp := t.TempDir()
			for _, a := range c.Args {
				if strings.Contains(a, "{second}") {
					second := filepath.Join(tmp, "second_"+c.File)
					if err := os.WriteFile(second, c.Second(), 0o644); err != nil {
						t.Fatal(err)
					}
					a = strings.ReplaceAll(a, "{second}", second)
				}
				args = append(args, strings.ReplaceAll(a, "{tmp}", tmp))
			}
			args = append(args, path)
			var stdin io.Reader
			if c.Stdin {
				f, err := os.Open(path)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				stdin, args[len(args)-1] = f, "-"
			}
			var o outcome
			if inProcess(c) {
				o = runHere(t, stdin, args...)
				t.Logf("%-28s exit %d  wall %5.2fs  (in this process)", c.Name, o.code, o.wall.Seconds())
			} else {
				o = runChild(t, stdin, args...)
				t.Logf("%-28s exit %d  wall %5.2fs  cpu %5.2fs  peak RSS %4d MiB", c.Name, o.code, o.wall.Seconds(), o.cpu.Seconds(), o.rss>>20)
			}
			// The input's name must not be what matches.
			out := strings.ReplaceAll(o.stdout+o.stderr, path, "INPUT")
			if o.code != c.Exit {
				t.Errorf("exit %d, want %d; stderr: %s", o.code, c.Exit, clip(o.stderr))
			}
			if !strings.Contains(out, c.Want) {
				t.Errorf("output lacks %q; stderr: %s", c.Want, clip(o.stderr))
			}
			if c.NotWant != "" && strings.Contains(out, c.NotWant) {
				t.Errorf("output holds %q", c.NotWant)
			}
			if written := int64(len(o.stdout)) + dirBytes(t, tmp); c.MaxOutput > 0 && written > c.MaxOutput {
				t.Errorf("wrote %d bytes (stdout and files), bound %d", written, c.MaxOutput)
			}
			checkStderr(t, o.code, o.stderr)
			limit := int64(maxRSS)
			if c.MaxRSS > 0 {
				limit = c.MaxRSS
			}
			if o.rss > limit {
				t.Errorf("peak RSS %d MiB, bound %d MiB", o.rss>>20, limit>>20)
			}
			if o.cpu > maxCPU || o.wall > maxCPU && inProcess(c) {
				t.Errorf("CPU time %v, bound %v", o.cpu, maxCPU)
			}
		})
	}
}

// dirBytes is the size of the files in dir.
func dirBytes(t *testing.T, dir string) int64 {
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, e := range ents {
		if fi, err := e.Info(); err == nil {
			n += fi.Size()
		}
	}
	return n
}

// checkStderr: an error is one line (plus warnings), never a Go panic or an
// internal error.
func checkStderr(t *testing.T, code int, stderr string) {
	t.Helper()
	for _, bad := range []string{"goroutine ", "panic:", "internal error", "fatal error:"} {
		if strings.Contains(stderr, bad) {
			t.Fatalf("stderr holds %q: %s", bad, clip(stderr))
		}
	}
	if code == 2 {
		var errs int
		for _, l := range strings.Split(strings.TrimSpace(stderr), "\n") {
			if strings.HasPrefix(l, "ptscope: ") && !strings.HasPrefix(l, "ptscope: warning: ") {
				errs++
			}
		}
		if errs < 1 {
			t.Errorf("exit 2 without an error line: %s", clip(stderr))
		}
	}
}

func clip(s string) string {
	if len(s) > 600 {
		return s[:600] + "..."
	}
	return s
}

// realInputs are the repository's real artifacts, decompressed: the
// mutations start from them.
func realInputs(t *testing.T) map[string][]byte {
	out := map[string][]byte{}
	for _, p := range []string{
		testfixture.Testdata(t, "snapshots", "oom_fragmentation.pickle.xz"),
		testfixture.Testdata(t, "snapshots", "legacy_list_history.pickle.xz"),
		testfixture.Testdata(t, "bundles", "lm_small_bf16", "rank0", "trace_step4.pt.trace.json.gz"),
	} {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		var r io.Reader
		if strings.HasSuffix(p, ".xz") {
			r, err = xz.NewReader(f)
		} else {
			r, err = gzip.NewReader(f)
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(r)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(p)] = b
	}
	return out
}

// TestMutatedArtifacts damages real artifacts (cut short, bytes changed,
// stretches zeroed, deleted or repeated) and reads each through the
// command in this process: exit 0 or 2 with one error line, never a panic,
// within the time and heap bounds.
func TestMutatedArtifacts(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	dir := t.TempDir()
	var peak atomic.Int64
	stop := watchHeap(&peak)
	defer stop()
	worst := int64(0)
	for name, data := range realInputs(t) {
		cmd := "analyze"
		if strings.Contains(name, "trace") {
			cmd = "trace"
		}
		codes := map[int]int{}
		for i, b := range attack.Mutate(data, uint64(len(name)), 40) {
			path := filepath.Join(dir, fmt.Sprintf("%d_%s", i, strings.TrimSuffix(strings.TrimSuffix(name, ".xz"), ".gz")))
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			var so, se bytes.Buffer
			done := make(chan int, 1)
			runtime.GC()
			base := heapNow()
			peak.Store(base)
			start := time.Now()
			go func() {
				done <- cli.Main(context.Background(), []string{cmd, "--json", path}, strings.NewReader(""), &so, &se)
			}()
			var code int
			select {
			case code = <-done:
			case <-time.After(hang):
				t.Fatalf("%s mutation %d: still running after %v", name, i, hang)
			}
			if d := time.Since(start); d > maxCPU {
				t.Errorf("%s mutation %d: took %v", name, i, d)
			}
			if grew := peak.Load() - base; grew > maxRSS {
				t.Errorf("%s mutation %d: the heap grew by %d MiB", name, i, grew>>20)
			} else {
				worst = max(worst, grew)
			}
			codes[code]++
			if code != 0 && code != 2 {
				t.Errorf("%s mutation %d: exit %d", name, i, code)
			}
			checkStderr(t, code, se.String())
			os.Remove(path)
		}
		t.Logf("%s: exit codes %v", name, codes)
	}
	t.Logf("largest heap growth for one input: %d MiB", worst>>20)
}

func heapNow() int64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64())
}

// watchHeap samples the heap every millisecond into peak until stop.
func watchHeap(peak *atomic.Int64) (stop func()) {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	done := make(chan struct{})
	go func() {
		tk := time.NewTicker(time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-done:
				return
			case <-tk.C:
				metrics.Read(s)
				if v := int64(s[0].Value.Uint64()); v > peak.Load() {
					peak.Store(v)
				}
			}
		}
	}()
	return func() { close(done) }
}
