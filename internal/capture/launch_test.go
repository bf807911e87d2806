//go:build !windows

package capture

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ptscope/ptscope/internal/bundle"
	"github.com/ptscope/ptscope/internal/testfixture"
)

// python3 without torch is what CI has; tests that need "no torch" skip
// when torch happens to be importable, and the companion's capture path is
// exercised against testdata/faketorch (a tiny stand-in for torch's API).

func needPython(t *testing.T) string {
	t.Helper()
	return testfixture.Python(t)
}

// torchImportable says, once, whether python3 can import torch.
var torchImportable = sync.OnceValue(func() bool {
	p, err := testfixture.PythonPath()
	return err == nil && exec.Command(p, "-c", "import torch").Run() == nil
})

type runOut struct {
	res            *Result
	stdout, stderr string
	status         string
}

func testOptions(t testing.TB, extraEnv ...string) Options {
	o := DefaultOptions()
	o.OutDir = filepath.Join(t.TempDir(), "out")
	o.CacheDir = filepath.Join(t.TempDir(), "cache")
	o.Interval = 50 * time.Millisecond
	o.Version = "test"
	env := []string{}
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "PYTHONPATH", "RANK", "LOCAL_RANK", "WORLD_SIZE", "PTSCOPE_BUNDLE", "PTSCOPE_CONFIG":
			continue
		}
		env = append(env, kv)
	}
	o.Env = append(env, extraEnv...)
	return o
}

func fakeTorchEnv(t testing.TB) string {
	abs, err := filepath.Abs("testdata/faketorch")
	if err != nil {
		t.Fatal(err)
	}
	return "PYTHONPATH=" + abs
}

func runIt(t testing.TB, o Options, argv ...string) runOut {
	t.Helper()
	var stdout, stderr, status bytes.Buffer
	o.Stdout, o.Stderr, o.Status = &stdout, &stderr, &status
	res, err := Run(context.Background(), o, argv)
	if err != nil {
		t.Fatalf("Run(%q): %v", argv, err)
	}
	return runOut{res, stdout.String(), stderr.String(), status.String()}
}

func TestRunPassThrough(t *testing.T) {
	py := needPython(t)
	t.Parallel()
	o := testOptions(t)
	o.Stdin = strings.NewReader("from-stdin\n")
	r := runIt(t, o, py, "-c", `import sys; print("out:" + sys.stdin.readline().strip()); print("err-line", file=sys.stderr); sys.exit(7)`)
	if r.res.ExitCode != 7 || r.res.Signal != 0 {
		t.Errorf("exit = %d signal %v, want 7", r.res.ExitCode, r.res.Signal)
	}
	if r.stdout != "out:from-stdin\n" {
		t.Errorf("stdout = %q", r.stdout)
	}
	if !strings.Contains(r.stderr, "err-line\n") {
		t.Errorf("stderr = %q", r.stderr)
	}
	b, err := bundle.ReadBundle(o.OutDir) // via OUT/latest
	if err != nil {
		t.Fatal(err)
	}
	m := b.Manifest
	if m.ExitCode != 7 || m.Status != "finished" || m.Name != "python3" || m.SchemaVersion != 1 || m.EndTime == nil {
		t.Errorf("manifest = %+v", m)
	}
	if len(m.Command) != 3 || m.Command[1] != "-c" {
		t.Errorf("manifest command = %q", m.Command)
	}
	if m.Cwd == "" || m.StartTime.IsZero() || m.DurationNs <= 0 {
		t.Errorf("manifest times/cwd: %+v", m)
	}
	if !torchImportable() {
		if len(m.Warnings) != 1 || !strings.Contains(m.Warnings[0], "PyTorch is not installed") {
			t.Errorf("warnings = %q", m.Warnings)
		}
		if c := strings.Count(r.status, "warning:"); c != 1 || !strings.Contains(r.status, "PyTorch is not installed") {
			t.Errorf("want exactly one no-torch warning, status output:\n%s", r.status)
		}
	}
}

func TestRunNotPython(t *testing.T) {
	t.Parallel()
	o := testOptions(t)
	r := runIt(t, o, "sh", "-c", "echo plain; exit 4")
	if r.res.ExitCode != 4 || r.stdout != "plain\n" {
		t.Errorf("exit %d stdout %q", r.res.ExitCode, r.stdout)
	}
	if !strings.Contains(r.status, "no Python process loaded the ptscope companion") {
		t.Errorf("status = %q", r.status)
	}
	_, err := Run(context.Background(), o, []string{"no-such-command-ptscope"})
	if err == nil || !strings.Contains(err.Error(), "command not found") {
		t.Errorf("missing command: %v", err)
	}
}

func TestRunKilledBySignal(t *testing.T) {
	py := needPython(t)
	t.Parallel()
	r := runIt(t, testOptions(t), py, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGTERM)")
	if r.res.Signal != syscall.SIGTERM || r.res.ExitCode != 128+15 {
		t.Errorf("signal %v exit %d, want SIGTERM/143", r.res.Signal, r.res.ExitCode)
	}
	if r.res.Manifest.Signal != "terminated" {
		t.Errorf("manifest signal = %q", r.res.Manifest.Signal)
	}
}

func TestRunForwardsSignals(t *testing.T) {
	py := needPython(t)
	o := testOptions(t)
	ready := filepath.Join(t.TempDir(), "ready")
	script := `
import signal, sys, time, pathlib
def h(n, f):
    print("got", signal.Signals(n).name, flush=True)
    if n == signal.SIGTERM:
        sys.exit(3)
signal.signal(signal.SIGTERM, h)
signal.signal(signal.SIGUSR2, h)
pathlib.Path(sys.argv[1]).write_text("x")
while True:
    time.sleep(0.01)
`
	done := make(chan runOut)
	go func() { done <- runIt(t, o, py, "-c", script, ready) }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := os.Stat(ready); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("child never became ready")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Run has signal.Notify active: these reach Run, not the default action.
	_ = syscall.Kill(os.Getpid(), syscall.SIGUSR2)
	time.Sleep(200 * time.Millisecond)
	_ = syscall.Kill(os.Getpid(), syscall.SIGUSR1) // snapshot request, not forwarded
	time.Sleep(200 * time.Millisecond)
	_ = syscall.Kill(os.Getpid(), syscall.SIGTERM)
	var r runOut
	select {
	case r = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("command did not end after SIGTERM")
	}
	if r.res.ExitCode != 3 {
		t.Errorf("exit %d, want 3 (handler's exit)", r.res.ExitCode)
	}
	if r.stdout != "got SIGUSR2\ngot SIGTERM\n" {
		t.Errorf("stdout = %q", r.stdout)
	}
	req, err := os.ReadFile(filepath.Join(r.res.Dir, ".ptscope", "snapshot_request"))
	if err != nil || string(req) != "1" {
		t.Errorf("snapshot_request = %q, %v", req, err)
	}
}

func TestSitecustomizeChaining(t *testing.T) {
	py := needPython(t)
	t.Parallel()
	user := t.TempDir()
	if err := os.WriteFile(filepath.Join(user, "sitecustomize.py"), []byte("import os\nprint('user-sitecustomize', flush=True)\nUSER_MARK = 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	o := testOptions(t, "PYTHONPATH="+user)
	r := runIt(t, o, py, "-c", "import sitecustomize, sys; print('mark', getattr(sitecustomize, 'USER_MARK', None)); print('companion', 'ptscope_companion' in sys.modules)")
	want := "user-sitecustomize\nmark 1\ncompanion True\n"
	if r.stdout != want || r.res.ExitCode != 0 {
		t.Errorf("stdout = %q (exit %d), want %q; stderr %q", r.stdout, r.res.ExitCode, want, r.stderr)
	}
	// A failing user sitecustomize is reported like Python does and the program still runs.
	if err := os.WriteFile(filepath.Join(user, "sitecustomize.py"), []byte("raise ValueError('boom')\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r = runIt(t, o, py, "-c", "print('ran')")
	if r.stdout != "ran\n" || !strings.Contains(r.stderr, "Error in sitecustomize") || !strings.Contains(r.stderr, "boom") {
		t.Errorf("failing sitecustomize: stdout %q stderr %q", r.stdout, r.stderr)
	}
}

func TestFakeTorchCapture(t *testing.T) {
	py := needPython(t)
	t.Parallel()
	o := testOptions(t, fakeTorchEnv(t))
	o.History = "run" // the whole run in the end snapshot (windows: windowed_test.go)
	o.Trace = true
	o.Schedule = Schedule{Wait: 1, Warmup: 1, Active: 2, Repeat: 1}
	o.SnapshotAt = SnapshotAt{End: true, Steps: []int{2}}
	r := runIt(t, o, py, "testdata/faketrain.py", "6", "sleep")
	if r.res.ExitCode != 0 || !strings.Contains(r.stdout, "max_memory_allocated=") {
		t.Fatalf("exit %d stdout %q stderr %q", r.res.ExitCode, r.stdout, r.stderr)
	}
	b, err := bundle.ReadBundle(r.res.Dir)
	if err != nil {
		t.Fatal(err)
	}
	m := b.Manifest
	if m.DeviceName != "Fake GPU" || m.DeviceTotalMemoryBytes != 1<<30 || m.WorldSize != 1 || m.TorchVersion != "0.0-fake" || m.Name != "faketrain" {
		t.Errorf("manifest facts: %+v", m)
	}
	if len(m.Warnings) != 0 {
		t.Errorf("warnings: %q", m.Warnings)
	}
	if len(b.Ranks) != 1 {
		t.Fatalf("ranks = %d", len(b.Ranks))
	}
	rk := b.Ranks[0]
	if rk.Info.Steps != 6 || len(rk.Phases) != 18 {
		t.Errorf("steps %d phases %d, want 6 and 18", rk.Info.Steps, len(rk.Phases))
	}
	wantOrder := []string{"forward", "backward", "optimizer"}
	for i, p := range rk.Phases {
		if p.Name != wantOrder[i%3] || p.Step != i/3 || p.EndTimeUs < p.StartTimeUs || p.Rank != 0 {
			t.Errorf("phase %d = %+v", i, p)
		}
	}
	// faketrain: parameters 8 MiB; forward allocates two 4 MiB outputs and frees one.
	if p := rk.Phases[0]; p.AllocatedBeforeBytes != 8<<20 || p.AllocatedAfterBytes != 12<<20 || !p.Stacks {
		t.Errorf("first forward %+v", p)
	}
	// the optimizer of step 0 creates 16 MiB of state and a 2 MiB temporary
	if p := rk.Phases[2]; p.AllocatedAfterBytes-p.AllocatedBeforeBytes != 16<<20 || p.MaxAllocatedAfterBytes != 38<<20 || p.MaxReservedAfterBytes != 38<<20 {
		t.Errorf("first optimizer %+v", p)
	}
	// steps 0-2 record stacks (warm-up), 3-5 do not
	for i, p := range rk.Phases {
		if p.Stacks != (p.Step < 3) {
			t.Errorf("phase %d (step %d) stacks %v", i, p.Step, p.Stacks)
		}
	}
	if len(rk.Live) < 2 || rk.Live[len(rk.Live)-1].DeviceTotalBytes != 1<<30 || rk.Live[len(rk.Live)-1].Step != 6 {
		t.Errorf("live samples %d, last %+v", len(rk.Live), rk.Live[len(rk.Live)-1])
	}
	var snaps []string
	for _, s := range rk.Snapshots {
		snaps = append(snaps, filepath.Base(s))
	}
	if strings.Join(snaps, ",") != "snapshot_step2.pickle,snapshot_end.pickle" {
		t.Errorf("snapshots = %q", snaps)
	}
	// schedule wait=1,warmup=1,active=2: steps 3-4 recorded, trace at step 4
	if len(rk.Traces) != 1 || filepath.Base(rk.Traces[0]) != "trace_step4.pt.trace.json.gz" {
		t.Errorf("traces = %q", rk.Traces)
	}
	f := rk.Info.Features
	for _, k := range []string{"memory_history", "oom_observer", "optimizer_hooks", "memory_metadata", "profiler"} {
		if !f[k] {
			t.Errorf("feature %s not detected: %v", k, f)
		}
	}
	if rk.Info.MaxAllocatedBytes != 38<<20 || rk.Info.DeviceName != "Fake GPU" {
		t.Errorf("process.json: %+v", rk.Info)
	}
	// two attention modules of 1M fp32 parameters each, no autocast
	if p := rk.Info.Precision; p == nil || len(p.ParameterBytesByDtype) != 1 || p.ParameterBytesByDtype["float32"] != 8<<20 || p.AutocastCUDA || p.FSDP {
		t.Errorf("precision = %+v", p)
	}
	// The snapshot carries phase annotations, and module paths and stacks
	// only in the warm-up (module hooks run in stacked steps only). Per
	// stacked step, h0.attn allocates its forward output, and its backward
	// a temporary and its weight's gradient under its path (3 x 3).
	check := `
import pickle, sys, collections
s = pickle.load(open(sys.argv[1], "rb"))
ann = collections.Counter(a["name"] for a in s["external_annotations"])
allocs = [e for e in s["device_traces"][0] if e["action"] == "alloc"]
meta = collections.Counter((e.get("user_metadata"), bool(e.get("frames"))) for e in allocs)
steps = [a["name"] for a in s["external_annotations"] if a["name"].startswith("ptscope:step#") and a["stage"] == "START"]
print(ann["ptscope:forward"], ann["ptscope:backward"], ann["ptscope:optimizer"], meta[("h0.attn", True)], meta[("h0.attn", False)],
      meta[("h1.attn", True)], meta[("h1.attn", False)], s["fake_history_options"]["stacks"], s["fake_history_options"]["global_record_annotations"],
      [c["context"] for c in s["fake_history_calls"]], ",".join(x[len("ptscope:step#"):] for x in steps))
`
	out, err := exec.Command(py, "-c", check, rk.Snapshots[1]).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "12 12 12 9 0 9 0 python True ['alloc', None] 0,1,2,3,4,5" {
		t.Errorf("snapshot content: %q %v", out, err)
	}
}

// TestFakeTorchOOMCaught: a program that catches its out-of-memory errors
// and goes on keeps the first's record, which its snapshot and inventory
// describe, and the count of all.
func TestFakeTorchOOMCaught(t *testing.T) {
	py := needPython(t)
	t.Parallel()
	r := runIt(t, testOptions(t, fakeTorchEnv(t)), py, "testdata/faketrain.py", "5", "retry")
	if r.res.ExitCode != 0 {
		t.Fatalf("exit %d stderr %q", r.res.ExitCode, r.stderr)
	}
	b, err := bundle.ReadBundle(r.res.Dir)
	if err != nil {
		t.Fatal(err)
	}
	rk := b.Ranks[0]
	if o := rk.OOM; o == nil || o.RequestedBytes != 2<<30 || o.Step != 1 || o.Phase != "forward" || o.Count != 2 || o.Snapshot != "snapshot_oom.pickle" {
		t.Fatalf("oom = %+v, want the first of two (step 1, 2 GiB)", rk.OOM)
	}
	if len(rk.Phases) == 0 || rk.Phases[len(rk.Phases)-1].Step != 4 {
		t.Errorf("phases end %+v, want the run's last step 4", rk.Phases[len(rk.Phases)-1:])
	}
	if log, err := os.ReadFile(filepath.Join(r.res.Dir, "companion.log")); err != nil ||
		!strings.Contains(string(log), "CUDA out of memory at step 1 (requested 2147483648 bytes); snapshot written to ") {
		t.Errorf("companion.log: %v %s", err, log)
	}
	if !strings.Contains(r.status, "step 1 (first of 2)") {
		t.Errorf("status:\n%s", r.status)
	}
	joined := strings.Join(b.Manifest.Warnings, "\n")
	if want := "rank 0 ran out of GPU memory 2 times, first at step 1 (requested 2147483648 bytes); see " + filepath.Join("rank0", "snapshot_oom.pickle"); !strings.Contains(joined, want) {
		t.Errorf("warnings %q, want %q", joined, want)
	}
}

func TestFakeTorchOOM(t *testing.T) {
	py := needPython(t)
	t.Parallel()
	o := testOptions(t, fakeTorchEnv(t))
	o.MaxSnapshotBytes = 1 // budget exhausted at once: OOM snapshot is still written
	r := runIt(t, o, py, "testdata/faketrain.py", "5", "oom")
	if r.res.ExitCode != 1 || !strings.Contains(r.stderr, "CUDA out of memory") {
		t.Fatalf("exit %d stderr %q", r.res.ExitCode, r.stderr)
	}
	b, err := bundle.ReadBundle(r.res.Dir)
	if err != nil {
		t.Fatal(err)
	}
	rk := b.Ranks[0]
	if rk.OOM == nil || rk.OOM.RequestedBytes != 2<<30 || rk.OOM.Step != 1 || rk.OOM.Snapshot != "snapshot_oom.pickle" {
		t.Fatalf("oom = %+v", rk.OOM)
	}
	if len(rk.Snapshots) != 1 || filepath.Base(rk.Snapshots[0]) != "snapshot_oom.pickle" {
		t.Errorf("snapshots = %q (end snapshot must be refused by the 1-byte budget)", rk.Snapshots)
	}
	// what the tensors were when it ran out: parameters and optimizer state
	// (the gradients of step 0 were freed by zero_grad)
	var oomInv *bundle.Inventory
	for i := range rk.Inventories {
		if rk.Inventories[i].At == "oom" {
			oomInv = &rk.Inventories[i]
		}
	}
	if oomInv == nil || oomInv.Step != 1 || oomInv.Bytes(bundle.KindParameter) != 8<<20 || oomInv.Bytes(bundle.KindOptimizerState) != 16<<20 || oomInv.Bytes(bundle.KindGradient) != 0 {
		t.Errorf("oom inventory %+v", oomInv)
	}
	if last := rk.Phases[len(rk.Phases)-1]; last.Name != "forward" || last.Step != 1 || !last.Aborted {
		t.Errorf("last phase %+v, want step 1's forward, aborted", last)
	}
	joined := strings.Join(b.Manifest.Warnings, "\n")
	if !strings.Contains(joined, "ran out of GPU memory at step 1") || !strings.Contains(joined, "companion logged") {
		t.Errorf("warnings = %q", b.Manifest.Warnings)
	}
	if !strings.Contains(r.stderr, "max-snapshot-size") {
		t.Errorf("budget warning missing from stderr: %q", r.stderr)
	}
}

func TestFakeTorchRanks(t *testing.T) {
	py := needPython(t)
	t.Parallel()
	tests := []struct {
		name      string
		ranks     []int
		launch    []string
		wantRanks []int
		warn      string
	}{
		{"all ranks", nil, []string{"2"}, []int{0, 1}, ""},
		{"rank 1 only", []int{1}, []string{"2"}, []int{1}, ""},
		{"LOCAL_RANK only", []int{0}, []string{"2", "--local-only"}, []int{0}, ""},
		{"no match", []int{5}, []string{"2"}, nil, "no process matched --ranks"},
		{"launcher initialises CUDA", nil, []string{"2", "--init-cuda"}, []int{0, 1}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := testOptions(t, fakeTorchEnv(t))
			o.Ranks = tt.ranks
			argv := append([]string{py, "testdata/fakelaunch.py"}, tt.launch...)
			argv = append(argv, "testdata/faketrain.py", "3")
			r := runIt(t, o, argv...)
			if r.res.ExitCode != 0 {
				t.Fatalf("exit %d: %s", r.res.ExitCode, r.stderr)
			}
			b, err := bundle.ReadBundle(r.res.Dir)
			if err != nil {
				t.Fatal(err)
			}
			var got []int
			for _, rk := range b.Ranks {
				got = append(got, rk.Rank)
				if rk.Info.Steps != 3 || len(rk.Phases) != 9 {
					t.Errorf("rank %d: steps %d phases %d", rk.Rank, rk.Info.Steps, len(rk.Phases))
				}
			}
			if !reflect.DeepEqual(got, tt.wantRanks) {
				t.Errorf("captured ranks %v, want %v", got, tt.wantRanks)
			}
			if tt.warn != "" && !strings.Contains(strings.Join(b.Manifest.Warnings, "\n"), tt.warn) {
				t.Errorf("warnings %q, want %q", b.Manifest.Warnings, tt.warn)
			}
			if tt.warn == "" && len(b.Manifest.Warnings) != 0 {
				t.Errorf("unexpected warnings %q", b.Manifest.Warnings)
			}
			for _, rk := range b.Ranks {
				if filepath.Base(rk.Dir) != fmt.Sprintf("rank%d", rk.Rank) {
					t.Errorf("rank folder %s: a second process claimed rank %d", rk.Dir, rk.Rank)
				}
			}
			if tt.launch[len(tt.launch)-1] != "--local-only" && len(tt.wantRanks) > 0 && b.Manifest.WorldSize != 2 {
				t.Errorf("world size %d, want 2", b.Manifest.WorldSize)
			}
		})
	}
}

// TestFakeTorchLoopShapes runs each loop shape for 4 steps with stacks in
// step 2 only: the companion's global module hooks run in step 0 (where it
// finds the root modules) and step 2, and steps 1 and 3 run with instance
// hooks on the roots only, so every shape's steps and phases must come out
// the same from both hook modes.
func TestFakeTorchLoopShapes(t *testing.T) {
	py := needPython(t)
	t.Parallel()
	tests := []struct {
		mode string
		step string // one step's phases, "S" for its index: step:phase[(attrs)]
		// module calls per step, root calls per step (no other module
		// running), distinct root modules
		calls, rootCalls, roots int
	}{
		{"train", "S:forward S:backward S:optimizer", 5, 1, 1},
		// the forward and backward of optimizer.step(closure) are phases of their own
		{"closure", "S:forward(closure) S:backward(closure) S:optimizer", 5, 1, 1},
		{"wrapped", "S:forward S:backward S:optimizer", 5, 1, 1},
		{"accum", "S:forward S:backward S:forward S:backward S:optimizer", 10, 2, 1},
		{"forward", "S:forward", 5, 1, 1},
		{"bf16", "S:forward S:backward S:optimizer", 5, 1, 1},
		// accelerate turns autocast on inside the model's forward
		{"accel", "S:forward S:backward S:optimizer", 5, 1, 1},
		// Lightning: training_step calls three submodules: one forward phase
		{"roots", "S:forward(roots=3) S:backward S:optimizer", 6, 3, 3},
		{"lightning", "S:forward(closure,roots=3) S:backward(closure) S:optimizer", 6, 3, 3},
		// evaluation under no_grad: a phase per root call, a step per iteration
		{"nograd", "S:forward S:forward S:forward", 6, 3, 3},
		// DDP's forward calls the model: the DDP module is the root
		{"ddp", "S:forward S:backward S:optimizer", 6, 1, 1},
	}
	const steps = 4
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			t.Parallel()
			o := testOptions(t, fakeTorchEnv(t))
			o.RecordSteps = RecordSteps{Mode: "steps", Ranges: [][2]int{{2, 2}}}
			r := runIt(t, o, py, "testdata/faketrain.py", strconv.Itoa(steps), tt.mode)
			if r.res.ExitCode != 0 {
				t.Fatalf("exit %d: %s", r.res.ExitCode, r.stderr)
			}
			b, err := bundle.ReadBundle(r.res.Dir)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range b.Ranks[0].Phases {
				s := fmt.Sprintf("%d:%s", p.Step, p.Name)
				var attrs []string
				if p.Closure {
					attrs = append(attrs, "closure")
				}
				if p.Roots > 0 {
					attrs = append(attrs, fmt.Sprintf("roots=%d", p.Roots))
				}
				if len(attrs) > 0 {
					s += "(" + strings.Join(attrs, ",") + ")"
				}
				if p.Parent != "" {
					s += "<" + p.Parent
				}
				if p.Aborted {
					s += "!aborted"
				}
				if p.Stacks != (p.Step == 2) {
					s += "!stacks"
				}
				got = append(got, s)
			}
			var want []string
			for i := 0; i < steps; i++ {
				want = append(want, strings.ReplaceAll(tt.step, "S", strconv.Itoa(i)))
			}
			if strings.Join(got, " ") != strings.Join(want, " ") {
				t.Errorf("phases\n got %s\nwant %s", strings.Join(got, " "), strings.Join(want, " "))
			}
			if b.Ranks[0].Info.Steps != steps {
				t.Errorf("steps %d, want %d", b.Ranks[0].Info.Steps, steps)
			}
			// Global hooks take every module call of steps 0 and 2 off the
			// fast path, root hooks only the roots' calls of steps 1 and 3.
			slow := 2*tt.calls + 2*tt.rootCalls
			wantCalls := fmt.Sprintf("module_calls fast=%d slow=%d", steps*tt.calls-slow, slow)
			if !strings.Contains(r.stdout, wantCalls+"\n") {
				t.Errorf("stdout %q, want %q", r.stdout, wantCalls)
			}
			var proc struct {
				ModuleHooks struct {
					Calls       int `json:"calls"`
					GlobalSteps int `json:"global_steps"`
					Roots       int `json:"roots"`
				} `json:"module_hooks"`
				Calls map[string]int `json:"companion_calls"`
			}
			data, err := os.ReadFile(filepath.Join(b.Ranks[0].Dir, "process.json"))
			if err == nil {
				err = json.Unmarshal(data, &proc)
			}
			if err != nil {
				t.Fatal(err)
			}
			if h := proc.ModuleHooks; h.Calls != slow || h.GlobalSteps != 2 || h.Roots != tt.roots {
				t.Errorf("module_hooks %+v, want %d calls, 2 global steps, %d roots", h, slow, tt.roots)
			}
			// What the companion asks of torch: at most two allocator stats
			// calls per phase (its start and end; one where a phase ends as
			// the next begins), one per root call (a pending forward's end)
			// and one per step boundary; the history switched as the window
			// of step 2 begins and ends (and as the set-up window ends); the
			// backward's root labelled only in the stacked step and the one
			// after it (resetting the module path its labels left).
			c := proc.Calls
			stats := c["allocator_stats"] - c["live_samples"]
			if limit := 2*len(b.Ranks[0].Phases) + steps*(1+tt.rootCalls) + 4; stats > limit || stats < len(b.Ranks[0].Phases) {
				t.Errorf("companion_calls %v: %d allocator stats calls outside the live sampler, want %d..%d", c, stats, len(b.Ranks[0].Phases), limit)
			}
			if c["phase_records"] != len(b.Ranks[0].Phases) || c["history_switches"] != 3 || c["backward_root_hooks"] > 2 {
				t.Errorf("companion_calls %v: want %d phase records, 3 history switches, at most 2 backward root hooks", c, len(b.Ranks[0].Phases))
			}
			// recorded once, at the first forward: 2 x 1M parameters (3 in
			// the Lightning-like model, found through training_step's self)
			want2 := bundle.Precision{ParameterBytesByDtype: map[string]int64{"float32": 8 << 20}}
			if tt.mode == "roots" || tt.mode == "lightning" || tt.mode == "nograd" {
				want2.ParameterBytesByDtype["float32"] = 12 << 20
			}
			switch tt.mode {
			case "bf16":
				want2 = bundle.Precision{ParameterBytesByDtype: map[string]int64{"bfloat16": 4 << 20}, AutocastCUDA: true, AutocastDtype: "bfloat16"}
			case "accel":
				want2.AutocastCUDA, want2.AutocastDtype = true, "bfloat16"
			}
			if p := b.Ranks[0].Info.Precision; p == nil || !reflect.DeepEqual(*p, want2) {
				t.Errorf("precision = %+v, want %+v", p, want2)
			}
		})
	}
}

func TestFakeTorchCUDAWithoutAllocation(t *testing.T) {
	py := needPython(t)
	t.Parallel()
	o := testOptions(t, fakeTorchEnv(t))
	r := runIt(t, o, py, "-c", "import torch; torch.cuda._lazy_init(); print(torch.cuda.get_device_properties(0).name)")
	if r.res.ExitCode != 0 || r.stdout != "Fake GPU\n" {
		t.Fatalf("exit %d stdout %q stderr %q", r.res.ExitCode, r.stdout, r.stderr)
	}
	m := r.res.Manifest
	if len(m.Ranks) != 0 || len(m.Warnings) != 1 || !strings.Contains(m.Warnings[0], "no process allocated GPU memory") {
		t.Errorf("ranks %d warnings %q", len(m.Ranks), m.Warnings)
	}
}

// The companion must never break the program: an unusable bundle folder or a
// bad configuration costs the capture, not the run.
func TestCompanionNeverBreaksTheRun(t *testing.T) {
	py := needPython(t)
	t.Parallel()
	c, err := InstallCompanion(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	comp := c.Dir
	fake, _ := filepath.Abs("testdata/faketorch")
	notADir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notADir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, bundle, config, wantErr string
	}{
		{"bundle is a file", notADir, `{"trace":true,"snapshot_at":["end"],"snapshot_steps":[1]}`, "cannot write"},
		{"bad config", t.TempDir(), `{not json`, "bad PTSCOPE_CONFIG"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(py, "testdata/faketrain.py", "3")
			cmd.Env = append(os.Environ(), "PYTHONPATH="+comp+":"+fake, "PTSCOPE_BUNDLE="+tt.bundle, "PTSCOPE_CONFIG="+tt.config)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("program failed: %v\n%s", err, stderr.String())
			}
			if first, _, _ := strings.Cut(stdout.String(), "\n"); first != "max_memory_allocated=39845888" {
				t.Errorf("stdout %q", stdout.String())
			}
			if !strings.Contains(stderr.String(), tt.wantErr) {
				t.Errorf("stderr %q lacks %q", stderr.String(), tt.wantErr)
			}
			if n := strings.Count(stderr.String(), "\n"); n > 4 {
				t.Errorf("%d lines of complaints, want each kind once:\n%s", n, stderr.String())
			}
		})
	}
}

// A job that ends in the profiler's wait or warm-up steps gets no trace (torch
// calls on_trace_ready only when an active part ends) and a line saying why.
func TestFakeTorchTraceBeforeActive(t *testing.T) {
	py := needPython(t)
	t.Parallel()
	o := testOptions(t, fakeTorchEnv(t))
	o.Trace = true
	o.Schedule = Schedule{Wait: 1, Warmup: 2, Active: 3, Repeat: 1}
	r := runIt(t, o, py, "testdata/faketrain.py", "2")
	if r.res.ExitCode != 0 {
		t.Fatalf("exit %d stderr %q", r.res.ExitCode, r.stderr)
	}
	want := "the job ended after 2 steps, before the profiler's first active step (step 4 of --schedule"
	if n := strings.Count(r.stderr, want); n != 1 {
		t.Errorf("stderr has the explanation %d times, want once: %q", n, r.stderr)
	}
	b, err := bundle.ReadBundle(r.res.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Ranks) != 1 || len(b.Ranks[0].Traces) != 0 {
		t.Errorf("ranks %d, traces %v", len(b.Ranks), b.Ranks[0].Traces)
	}
}
