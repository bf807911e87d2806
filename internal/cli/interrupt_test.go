//go:build unix

package cli

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ptscope/ptscope/internal/kineto/gen"
	"github.com/ptscope/ptscope/internal/snapshot/snapgen"
	"github.com/ptscope/ptscope/internal/testfixture"
)

// TestInterruptHelperProcess is not a test: it is ptscope's main (with its
// signal handling and its server) when TestInterrupt re-executes the test
// binary with PTSCOPE_TEST_INTERRUPT=1.
func TestInterruptHelperProcess(t *testing.T) {
	if os.Getenv("PTSCOPE_TEST_INTERRUPT") != "1" {
		return
	}
	args := os.Args
	for i, a := range args {
		if a == "--" {
			args = args[i+1:]
			break
		}
	}
	ctx, stop := SignalContext()
	code := serveOptions.Main(ctx, args, os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// bigInputs writes a 1M-entry snapshot and a ~150 MB trace: inputs that
// take seconds to read and analyse here.
func bigInputs(t *testing.T) (snap, trace string) {
	dir := t.TempDir()
	snap = filepath.Join(dir, "big.pickle")
	f, err := os.Create(snap)
	if err != nil {
		t.Fatal(err)
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	if err := snapgen.Write(bw, snapgen.Options{Entries: 1_000_000, Seed: 1, Model: snapgen.ModelGPT2Small}); err != nil {
		t.Fatal(err)
	}
	if err := bw.Flush(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	gz, err := os.Open(testfixture.Testdata(t, "bundles", "lm_small_bf16", "rank0", "trace_step4.pt.trace.json.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer gz.Close()
	zr, err := gzip.NewReader(gz)
	if err != nil {
		t.Fatal(err)
	}
	src, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	trace = filepath.Join(dir, "big.pt.trace.json")
	tf, err := os.Create(trace)
	if err != nil {
		t.Fatal(err)
	}
	tw := bufio.NewWriterSize(tf, 1<<20)
	if _, err := gen.Generate(tw, src, 150<<20); err != nil {
		t.Fatal(err)
	}
	if err := tw.Flush(); err != nil {
		t.Fatal(err)
	}
	tf.Close()
	return snap, trace
}

// visible lists the entries of dir that look like output: anything but a
// hidden temporary name.
func visible(dir string) []string {
	var out []string
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), ".") {
			out = append(out, e.Name())
		}
	}
	return out
}

// priorRun writes a complete run into out with cmd (analyze or trace) on a
// small real input, as a user's earlier run left it, and returns what out
// then holds and where latest points.
func priorRun(t *testing.T, cmd, out string) (entries []string, latest string) {
	t.Helper()
	in := testfixture.Testdata(t, "snapshots", "oom_fragmentation.pickle.xz")
	if cmd == "trace" {
		in = testfixture.Testdata(t, "bundles", "lm_small_bf16", "rank0", "trace_step4.pt.trace.json.gz")
	}
	var so, se bytes.Buffer
	if code := Main(context.Background(), []string{cmd, "--out", out, in}, strings.NewReader(""), &so, &se); code != 0 {
		t.Fatalf("%s --out: exit %d: %s", cmd, code, se.String())
	}
	return visible(out), latestOf(out)
}

// latestOf is where out/latest points (a link, or a file naming the folder).
func latestOf(out string) string {
	p := filepath.Join(out, "latest")
	if l, err := os.Readlink(p); err == nil {
		return l
	}
	b, _ := os.ReadFile(p)
	return string(b)
}

// TestInterrupt sends SIGINT to analyze, trace, export and serve while
// they work: each ends within a second with exit 130 and "interrupted",
// and leaves no run folder, latest link or export file (issue 28: analyze
// ran on for 13 s, trace exited 0, export wrote the whole file). SIGKILL
// leaves only hidden temporary names. Where an earlier run is in the
// folder, it and latest stay as they were.
func TestInterrupt(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: generates 250 MB of inputs")
	}
	snap, trace := bigInputs(t)
	cases := []struct {
		name  string
		args  func(out string) []string
		ready string // stderr line that says the command is serving
	}{
		{"analyze", func(out string) []string { return []string{"analyze", "--out", out, snap} }, ""},
		{"trace", func(out string) []string { return []string{"trace", "--out", out, trace} }, ""},
		{"export", func(out string) []string {
			return []string{"export", "memory-viz", "-o", filepath.Join(out, "x.json"), snap}
		}, ""},
		{"serve", func(string) []string { return []string{"serve", "--addr", "127.0.0.1:0", snap, trace} }, "ptscope serve: http"},
	}
	for _, c := range cases {
		delays := []time.Duration{300 * time.Millisecond, 1200 * time.Millisecond}
		if c.ready != "" {
			delays = []time.Duration{0, time.Second}
		}
		for _, delay := range delays {
			for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGKILL} {
				if sig == syscall.SIGKILL && (c.ready != "" || delay > 300*time.Millisecond) {
					continue
				}
				out := t.TempDir()
				var before []string
				var latest string
				if c.name == "analyze" || c.name == "trace" {
					before, latest = priorRun(t, c.name, out)
				}
				cmd := exec.Command(os.Args[0], append([]string{"-test.run=^TestInterruptHelperProcess$", "--"}, c.args(out)...)...)
				cmd.Env = append(os.Environ(), "PTSCOPE_TEST_INTERRUPT=1")
				var stderr bytes.Buffer
				pr, pw := io.Pipe()
				cmd.Stderr = io.MultiWriter(&stderr, pw)
				cmd.Stdout = io.Discard
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				ready := make(chan struct{})
				go func() {
					sc := bufio.NewScanner(pr)
					closed := false
					for sc.Scan() {
						if !closed && (c.ready == "" || strings.Contains(sc.Text(), c.ready)) {
							close(ready)
							closed = true
						}
					}
				}()
				if c.ready != "" {
					select {
					case <-ready:
					case <-time.After(30 * time.Second):
						cmd.Process.Kill()
						t.Fatalf("%s: not ready after 30 s", c.name)
					}
				}
				time.Sleep(delay)
				sent := time.Now()
				cmd.Process.Signal(sig)
				waited := make(chan error, 1)
				go func() { waited <- cmd.Wait() }()
				var err error
				select {
				case err = <-waited:
				case <-time.After(10 * time.Second):
					cmd.Process.Kill()
					t.Fatalf("%s: still running 10 s after %v", c.name, sig)
				}
				took := time.Since(sent)
				pw.Close()
				code := cmd.ProcessState.ExitCode()
				t.Logf("%-8s %v at %v: exit %d after %v", c.name, sig, delay, code, took.Round(time.Millisecond))
				if v := visible(out); !slices.Equal(v, before) && (sig == syscall.SIGKILL || code != 0) {
					t.Errorf("%s %v: left %q (before: %q)", c.name, sig, v, before)
				}
				if l := latestOf(out); l != latest && (sig == syscall.SIGKILL || code != 0) {
					t.Errorf("%s %v: latest moved from %q to %q", c.name, sig, latest, l)
				}
				if sig == syscall.SIGKILL {
					continue
				}
				if code == 0 && c.ready == "" {
					continue // it finished before the signal: its output is complete
				}
				if code != ExitInterrupted || !strings.Contains(stderr.String(), "ptscope: interrupted") {
					t.Errorf("%s: exit %d (%v), stderr %q", c.name, code, err, stderr.String())
				}
				if took > time.Second {
					t.Errorf("%s: ended %v after SIGINT", c.name, took)
				}
			}
		}
	}
}
