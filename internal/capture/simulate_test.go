//go:build !windows

package capture

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ptscope/ptscope/internal/bundle"
)

func TestSimulateValidateAndEnv(t *testing.T) {
	tests := []struct {
		s    Simulate
		mode string
		err  string
	}{
		{Simulate{}, ModeCapture, ""},
		{Simulate{WorldSize: 8, Rank: 7}, ModeSimulateWorld, ""},
		{Simulate{WorldSize: 8, Rank: 8}, "", "simulate-rank 8 must be in 0..7"},
		{Simulate{WorldSize: 4, Rank: -1}, "", "simulate-rank -1"},
		{Simulate{Rank: 2}, "", "needs --simulate-world-size"},
		{Simulate{WorldSize: -2}, "", "at least 1"},
		{Simulate{NoGPU: true}, ModeFake, ""},
	}
	for _, tt := range tests {
		err := tt.s.validate()
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%+v: err %v, want %q", tt.s, err, tt.err)
			}
			continue
		}
		if err != nil || tt.s.Mode() != tt.mode {
			t.Errorf("%+v: err %v mode %q, want %q", tt.s, err, tt.s.Mode(), tt.mode)
		}
	}
	if (Simulate{}).config() != nil || (Simulate{}).env() != nil {
		t.Error("a real capture has no simulate config or env")
	}
	s := Simulate{WorldSize: 16, Rank: 3}
	if c := s.config(); !reflect.DeepEqual(*c, simulateConfig{Mode: ModeSimulateWorld, WorldSize: 16, Rank: 3}) {
		t.Errorf("config %+v", *c)
	}
	if c := (Simulate{NoGPU: true}).config(); !reflect.DeepEqual(*c, simulateConfig{Mode: ModeFake, WorldSize: 1}) {
		t.Errorf("fake config %+v", *c)
	}
	env := childEnv([]string{"RANK=5", "HOME=/h", "LOCAL_RANK=3", "WORLD_SIZE=2"}, "/comp", "/b", "{}", s.env()...)
	want := map[string]string{"RANK": "3", "WORLD_SIZE": "16", "LOCAL_RANK": "0", "HOME": "/h", "TORCH_DIST_INIT_BARRIER": "0"}
	seen := map[string]int{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		seen[k]++
		if w, ok := want[k]; ok && v != w {
			t.Errorf("%s=%s, want %s", k, v, w)
		}
	}
	for k := range want {
		if seen[k] != 1 {
			t.Errorf("%s appears %d times in %q", k, seen[k], env)
		}
	}
	if len(s.NotCounted()) == 0 || len((Simulate{NoGPU: true}).NotCounted()) == 0 || (Simulate{}).NotCounted() != nil {
		t.Error("NotCounted")
	}
}

func TestFakeTorchSimulateWorld(t *testing.T) {
	py := needPython(t)
	t.Parallel()
	if torchImportable() {
		t.Skip("real torch importable: faketorch would be shadowed")
	}
	o := testOptions(t, fakeTorchEnv(t), "RANK=9", "WORLD_SIZE=1")
	o.Simulate = Simulate{WorldSize: 4, Rank: 2}
	r := runIt(t, o, py, "testdata/fakedist.py", "ok")
	if r.res.ExitCode != 0 {
		t.Fatalf("exit %d stdout %q stderr %q", r.res.ExitCode, r.stdout, r.stderr)
	}
	for _, want := range []string{"backend=fake rank=2 world=4 env=2,4,0", "gathered=[{'rank': 2}, {'rank': 2}, {'rank': 2}, {'rank': 2}]"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout %q lacks %q (stderr %q)", r.stdout, want, r.stderr)
		}
	}
	b, err := bundle.ReadBundle(r.res.Dir)
	if err != nil {
		t.Fatal(err)
	}
	m := b.Manifest
	if !m.Simulated || m.Mode != ModeSimulateWorld || m.WorldSize != 4 || m.Simulation == nil {
		t.Fatalf("manifest: simulated %v mode %q world %d simulation %+v", m.Simulated, m.Mode, m.WorldSize, m.Simulation)
	}
	s := m.Simulation
	wantColl := map[string]int{"all_gather_into_tensor": 3, "reduce_scatter_tensor": 3, "all_reduce": 1, "all_gather_object": 1}
	if s.Rank != 2 || s.WorldSize != 4 || s.Backend != "fake" || !reflect.DeepEqual(s.Collectives, wantColl) || len(s.NotCounted) != 4 {
		t.Errorf("simulation %+v", s)
	}
	if len(b.Ranks) != 1 || b.Ranks[0].Rank != 2 || b.Ranks[0].Info.MaxAllocatedBytes != 16<<20 {
		t.Errorf("ranks %+v", b.Ranks)
	}
	if len(m.Warnings) != 0 {
		t.Errorf("warnings %q", m.Warnings)
	}
	if !strings.Contains(r.status, "simulated: rank 2 of 4 on one GPU") {
		t.Errorf("summary %q", r.status)
	}
}

func TestFakeTorchSimulateFailureNamesTheCollective(t *testing.T) {
	py := needPython(t)
	t.Parallel()
	if torchImportable() {
		t.Skip("real torch importable")
	}
	o := testOptions(t, fakeTorchEnv(t))
	o.Simulate = Simulate{WorldSize: 8, Rank: 5}
	r := runIt(t, o, py, "testdata/fakedist.py", "fail")
	if r.res.ExitCode != 1 {
		t.Fatalf("exit %d, want 1 (stderr %q)", r.res.ExitCode, r.stderr)
	}
	for _, want := range []string{
		"broadcast_object_list from rank 0: the simulated rank 5 receives nothing",
		"simulated rank 5 of 8 on one GPU (--simulate-world-size): ValueError: no stop flag received",
		"the last collective called was torch.distributed.broadcast_object_list at ",
		"ValueError: no stop flag received", // the program's own traceback still prints
	} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	b, err := bundle.ReadBundle(r.res.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if s := b.Manifest.Simulation; s == nil || len(s.Problems) != 2 {
		t.Fatalf("simulation %+v", s)
	}
	found := false
	for _, w := range b.Manifest.Warnings {
		found = found || strings.Contains(w, "simulation: the program failed while ptscope simulated rank 5 of 8")
	}
	if !found {
		t.Errorf("warnings %q", b.Manifest.Warnings)
	}
}

func TestFakeTorchNoGPUWithoutFakeTensorSupport(t *testing.T) {
	// faketorch has no FakeTensorMode: --no-gpu must say so and let the program run.
	py := needPython(t)
	t.Parallel()
	if torchImportable() {
		t.Skip("real torch importable")
	}
	o := testOptions(t, fakeTorchEnv(t))
	o.Simulate = Simulate{NoGPU: true}
	r := runIt(t, o, py, "testdata/faketrain.py", "2")
	if r.res.ExitCode != 0 || !strings.Contains(r.stderr, "cannot set up --no-gpu") {
		t.Fatalf("exit %d stderr %q", r.res.ExitCode, r.stderr)
	}
	m := r.res.Manifest
	if !m.Simulated || m.Mode != ModeFake || m.Simulation == nil || m.Simulation.Mode != ModeFake || len(m.Ranks) != 0 {
		t.Errorf("manifest simulated %v mode %q simulation %+v ranks %d", m.Simulated, m.Mode, m.Simulation, len(m.Ranks))
	}
}

func TestFakeTorchSimulateAllRanksPassShapesOn(t *testing.T) {
	// --simulate-rank all: the ranks run one after another into one bundle,
	// and what rank r sends with send_object_list (PyTorch 2.11's
	// use_batch/device keywords) is what rank r+1 receives.
	py := needPython(t)
	t.Parallel()
	if torchImportable() {
		t.Skip("real torch importable")
	}
	o := testOptions(t, fakeTorchEnv(t))
	o.Simulate = Simulate{WorldSize: 4, Ranks: []int{0, 1, 2, 3}}
	r := runIt(t, o, py, "testdata/fakedist.py", "pp")
	if r.res.ExitCode != 0 {
		t.Fatalf("exit %d stdout %q stderr %q", r.res.ExitCode, r.stdout, r.stderr)
	}
	for _, want := range []string{
		"rank 0 received [('hidden', 8, 128)]", "rank 1 received [('hidden', 8, 129)]",
		"rank 2 received [('hidden', 8, 131)]", "rank 3 received [('hidden', 8, 134)]",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
	b, err := bundle.ReadBundle(r.res.Dir)
	if err != nil {
		t.Fatal(err)
	}
	m := b.Manifest
	if len(b.Ranks) != 4 || m.WorldSize != 4 || m.Simulation == nil || !reflect.DeepEqual(m.Simulation.Ranks, []int{0, 1, 2, 3}) {
		t.Fatalf("ranks %d world %d simulation %+v", len(b.Ranks), m.WorldSize, m.Simulation)
	}
	for i, rk := range b.Ranks {
		if rk.Rank != i || rk.Info.MaxAllocatedBytes != 16<<20 {
			t.Errorf("rank %d: %+v", i, rk.Info)
		}
	}
	if _, err := os.Stat(filepath.Join(r.res.Dir, ".ptscope", "simulate")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the ranks' mailbox is left in the bundle (%v)", err)
	}
	if got := m.Simulation.Collectives["send_object_list"]; got != 3 {
		t.Errorf("send_object_list called %d times over the ranks, want 3", got)
	}
	if len(m.Warnings) != 0 {
		t.Errorf("warnings %q", m.Warnings)
	}
	if !strings.Contains(r.status, "simulated: ranks 0-3 one after another of 4 on one GPU") ||
		!strings.Contains(r.status, "faked recv_object_list x3: what the sending rank sent") {
		t.Errorf("summary %q", r.status)
	}
}

func TestFakeTorchSimulateOneStageWithoutItsSender(t *testing.T) {
	// One pipeline stage alone cannot know what the stage before it sends:
	// a one-line explanation names the collective, its line and the fix.
	py := needPython(t)
	t.Parallel()
	if torchImportable() {
		t.Skip("real torch importable")
	}
	o := testOptions(t, fakeTorchEnv(t))
	o.Simulate = Simulate{WorldSize: 4, Rank: 2}
	r := runIt(t, o, py, "testdata/fakedist.py", "pp")
	if r.res.ExitCode != 1 {
		t.Fatalf("exit %d, want 1 (stderr %q)", r.res.ExitCode, r.stderr)
	}
	for _, want := range []string{
		"rank 2 receives with torch.distributed.recv_object_list what rank 1 sends",
		"--simulate-rank all (or 0-2)",
		"the last collective called was torch.distributed.recv_object_list at ",
		"fakedist.py:",
	} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
}

func TestFakeTorchSimulateAllStopsAtAFailingRank(t *testing.T) {
	py := needPython(t)
	t.Parallel()
	if torchImportable() {
		t.Skip("real torch importable")
	}
	o := testOptions(t, fakeTorchEnv(t))
	o.Simulate = Simulate{WorldSize: 4, Ranks: []int{1, 2, 3}}
	r := runIt(t, o, py, "testdata/fakedist.py", "pp")
	if r.res.ExitCode != 1 {
		t.Fatalf("exit %d, want 1", r.res.ExitCode)
	}
	found := false
	for _, w := range r.res.Manifest.Warnings {
		found = found || strings.Contains(w, "rank 1 ended with exit status 1; ranks 2-3 were not simulated")
	}
	if !found {
		t.Errorf("warnings %q", r.res.Manifest.Warnings)
	}
}

func TestParseSimulateRanks(t *testing.T) {
	for _, tt := range []struct {
		in    string
		world int
		want  []int
		err   string
	}{
		{"all", 4, []int{0, 1, 2, 3}, ""},
		{"3", 8, []int{3}, ""},
		{"0,2-3", 8, []int{0, 2, 3}, ""},
		{"all", 0, nil, "needs --simulate-world-size"},
		{"x", 4, nil, "not a rank number"},
		{"", 4, nil, "want a rank"},
	} {
		got, err := ParseSimulateRanks(tt.in, tt.world)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%q: err %v, want %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%q: %v %v, want %v", tt.in, got, err, tt.want)
		}
	}
	if err := (Simulate{WorldSize: 4, Ranks: []int{0, 4}}).validate(); err == nil || !strings.Contains(err.Error(), "simulate-rank 4 must be in 0..3") {
		t.Errorf("rank out of range: %v", err)
	}
	if err := (Simulate{WorldSize: 4, Imbalance: 0.5}).validate(); err == nil {
		t.Error("imbalance below 1 accepted")
	}
	if err := (Simulate{NoGPU: true, WorldSize: 8, Imbalance: 1.3}).validate(); err != nil {
		t.Errorf("--no-gpu with a world size: %v", err)
	}
	if got := bundle.RankList([]int{0, 1, 2, 3, 5, 7, 8}); got != "0-3,5,7-8" {
		t.Errorf("rankList %q", got)
	}
}

// TestSimulateRules runs the companion's pure rules (no torch) in Python:
// the all_to_all count rule, the imbalance factor, keyword binding against
// PyTorch 2.11's signatures, the mailbox.
func TestSimulateRules(t *testing.T) {
	py := needPython(t)
	t.Parallel()
	out, err := exec.Command(py, "testdata/simulate_rules.py", "companion").CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(string(out), "simulate rules: ok") {
		t.Fatalf("%s", out)
	}
}

// TestFakeRules runs --no-gpu's pure rules (no torch) in Python: the
// tracker's accounting (views once, storages resized in place as FSDP does,
// frees at the current size, sites at the peak), which device arguments
// stand for GPU memory, which tensor subclasses dispatch their own ops.
func TestFakeRules(t *testing.T) {
	py := needPython(t)
	t.Parallel()
	out, err := exec.Command(py, "testdata/fake_rules.py", "companion").CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(string(out), "fake rules: ok") {
		t.Fatalf("%s", out)
	}
}

func TestSimulationSummaryLines(t *testing.T) {
	for _, tt := range []struct {
		s    bundle.Simulation
		want string
	}{
		{bundle.Simulation{Mode: bundle.ModeSimulateWorld, WorldSize: 8, Rank: 5, Backend: "fake"}, "simulated: rank 5 of 8 on one GPU, fake collectives"},
		{bundle.Simulation{Mode: bundle.ModeSimulateWorld, WorldSize: 16, Ranks: []int{0, 4, 8, 12}}, "simulated: ranks 0,4,8,12 one after another of 16 on one GPU"},
		{bundle.Simulation{Mode: bundle.ModeFake, WorldSize: 8, Rank: 0}, "simulated without a GPU: rank 0 of 8 (fake tensors, fake collectives"},
		{bundle.Simulation{Mode: bundle.ModeFake, WorldSize: 1}, "simulated without a GPU (fake tensors;"},
	} {
		m := &bundle.Manifest{Simulated: true, Simulation: &tt.s}
		if got := m.SimulationSummary(); !strings.HasPrefix(got, tt.want) {
			t.Errorf("%+v: %q, want prefix %q", tt.s, got, tt.want)
		}
	}
	m := &bundle.Manifest{Simulated: true, Simulation: &bundle.Simulation{Mode: bundle.ModeSimulateWorld,
		Collectives: map[string]int{"all_to_all_single": 12, "all_reduce": 3, "barrier": 1},
		Faked:       map[string]string{"all_to_all_single": "every source rank sends this rank what this rank sends itself", "all_reduce": "the result is this rank's own value"}}}
	want := []string{"all_reduce x3: the result is this rank's own value", "all_to_all_single x12: every source rank sends this rank what this rank sends itself"}
	if got := m.FakedLines(); !reflect.DeepEqual(got, want) {
		t.Errorf("FakedLines %q", got)
	}
	if nc := (Simulate{NoGPU: true, WorldSize: 8}).NotCounted(); !strings.Contains(nc[len(nc)-1], "NCCL communicator buffers") {
		t.Errorf("--no-gpu with a world leaves out %q", nc)
	}
	if env := (Simulate{NoGPU: true, WorldSize: 8, Rank: 3}).env(); len(env) == 0 || env[0] != "RANK=3" {
		t.Errorf("--no-gpu --simulate-world-size env %q", env)
	}
	o := DefaultOptions()
	o.Simulate = Simulate{WorldSize: 4, Ranks: []int{0, 1, 2, 3}, Imbalance: 1.3}
	var c companionConfig
	if err := json.Unmarshal(o.childConfig(2), &c); err != nil || c.Simulate == nil ||
		!reflect.DeepEqual(*c.Simulate, simulateConfig{Mode: ModeSimulateWorld, WorldSize: 4, Rank: 2, Ranks: []int{0, 1, 2, 3}, Imbalance: 1.3}) {
		t.Errorf("child config %+v %v", c.Simulate, err)
	}
}
