//go:build !windows

package capture

import (
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
	if c := s.config(); *c != (simulateConfig{Mode: ModeSimulateWorld, WorldSize: 16, Rank: 3}) {
		t.Errorf("config %+v", *c)
	}
	if c := (Simulate{NoGPU: true}).config(); *c != (simulateConfig{Mode: ModeFake, WorldSize: 1}) {
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
