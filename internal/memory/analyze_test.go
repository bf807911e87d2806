package memory

import (
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ptscope/ptscope/internal/finding"
	"github.com/ptscope/ptscope/internal/snapshot"
	"github.com/ptscope/ptscope/internal/units"
)

// fixture reads one of the real fixtures of ../shared/fixtures, committed
// xz-compressed in testdata/snapshots (their ground truth is in
// ../shared/fixtures/README.md and testdata/snapshots/facts.jsonl).
func fixture(t testing.TB, name string) *snapshot.Snapshot {
	t.Helper()
	return testdataSnapshot(t, name+".xz")
}

// Ground truth from the fixtures README: torch.cuda.max_memory_allocated and
// memory_allocated read in the process that wrote the snapshot.
func TestPeakMatchesTorch(t *testing.T) {
	cases := []struct {
		file         string
		maxAllocated int64
		endAllocated int64 // 0: not measured
	}{
		{"gpt2s_train_fp32_b4_ctx512.pickle", 5538270208, 1564872704},
		{"gpt2s_fwd_bf16_b4_ctx512.pickle", 1111965696, 0},
	}
	for _, c := range cases {
		s := fixture(t, c.file)
		an := Analyze(s, 0, Options{})
		a := an.Result
		got := a.Peak.AllocatedBytes
		rel := math.Abs(float64(got-c.maxAllocated)) / float64(c.maxAllocated)
		t.Logf("%s: peak %d vs torch %d (%.3f%%), end %d", c.file, got, c.maxAllocated, 100*rel, a.End.AllocatedBytes)
		if rel > 0.01 {
			t.Errorf("%s: peak allocated %d is %.2f%% from torch's %d", c.file, got, 100*rel, c.maxAllocated)
		}
		// The end of the replay equals the final segments' active blocks exactly.
		var active int64
		for _, g := range s.DeviceSegments(0) {
			for _, b := range g.Blocks {
				if b.State == snapshot.BlockActiveAllocated {
					active += b.Size
				}
			}
		}
		last := an.Replay.Timeline.Allocated[len(an.Replay.Timeline.Allocated)-1]
		if last != active || a.End.AllocatedBytes != active {
			t.Errorf("%s: replay ends at %d, final blocks hold %d", c.file, last, active)
		}
		if c.endAllocated != 0 && active != c.endAllocated {
			t.Errorf("%s: final active blocks %d, torch memory_allocated %d", c.file, active, c.endAllocated)
		}
	}
}

// The per-category series must add up to the allocated timeline exactly at
// every sampled entry.
func TestCategoryTimelineSumsToAllocated(t *testing.T) {
	s := fixture(t, "gpt2s_train_fp32_b4_ctx512.pickle")
	a := Analyze(s, 0, Options{})
	xs, layers := a.Replay.CategoryTimeline(500)
	for i, x := range xs {
		var sum int64
		for c := range layers {
			sum += layers[c][i]
		}
		if sum != a.Replay.Timeline.Allocated[x] {
			t.Fatalf("entry %d: categories sum to %d, allocated %d", x, sum, a.Replay.Timeline.Allocated[x])
		}
	}
}

// testdataSnapshot reads a real snapshot committed in the repository's
// testdata/snapshots (made by scripts/gpu/snapshot_scenarios.py; the facts
// measured in the process are in facts.jsonl there).
func testdataSnapshot(t testing.TB, name string) *snapshot.Snapshot {
	t.Helper()
	s, err := snapshot.ReadFile(filepath.Join("..", "..", "testdata", "snapshots", name))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestRealScenarios(t *testing.T) {
	cases := []struct {
		file         string
		maxAllocated int64 // torch.cuda.max_memory_allocated, 0 if not measured
		endAllocated int64 // torch.cuda.memory_allocated at dump
		pattern      Pattern
		oomVerdicts  []Verdict
		tol          float64
	}{
		{"validate_gpt2tiny_fp32.pickle.xz", 1414996992, 536659968, PatternStable, nil, 0.001},
		{"expandable_gpt2_2l.pickle.xz", 415645696, 244655616, 0, nil, 0.001},
		{"leak_gpt2_2l.pickle.xz", 782174720, 678285312, PatternLeak, nil, 0.01},
		{"oom_capacity.pickle.xz", 0, 83820019712, 0, []Verdict{VerdictCapacity}, 0},
		{"oom_fragmentation.pickle.xz", 0, 49141514240, 0, []Verdict{VerdictFragmentation, VerdictFragmentation}, 0},
	}
	for _, c := range cases {
		s := testdataSnapshot(t, c.file)
		a := Analyze(s, 0, Options{}).Result
		if c.maxAllocated > 0 {
			rel := math.Abs(float64(a.Peak.AllocatedBytes-c.maxAllocated)) / float64(c.maxAllocated)
			if rel > c.tol {
				t.Errorf("%s: peak %d vs torch %d (%.3f%%)", c.file, a.Peak.AllocatedBytes, c.maxAllocated, 100*rel)
			}
		}
		if a.End.AllocatedBytes != c.endAllocated {
			t.Errorf("%s: end allocated %d, torch memory_allocated %d", c.file, a.End.AllocatedBytes, c.endAllocated)
		}
		if c.pattern != 0 && a.Pattern != c.pattern {
			t.Errorf("%s: pattern %q, want %q", c.file, a.Pattern, c.pattern)
		}
		if len(a.OOMs) != len(c.oomVerdicts) {
			t.Errorf("%s: %d OOMs, want %d", c.file, len(a.OOMs), len(c.oomVerdicts))
			continue
		}
		for i, v := range c.oomVerdicts {
			if a.OOMs[i].Verdict != v {
				t.Errorf("%s: OOM %d verdict %q, want %q", c.file, i, a.OOMs[i].Verdict, v)
			}
		}
	}
}

// The leak keeps one forward graph per step: the accumulating stacks must be
// forward allocations of the model, and the growth per step positive.
func TestLeakStacks(t *testing.T) {
	a := Analyze(testdataSnapshot(t, "leak_gpt2_2l.pickle.xz"), 0, Options{}).Result
	if a.Leak == nil || a.Leak.PerStepBytes <= 1<<20 || len(a.Leak.Stacks) == 0 {
		t.Fatalf("leak = %+v", a.Leak)
	}
	var ids []string
	for _, f := range a.Findings {
		ids = append(ids, f.ID)
	}
	if !contains(ids, "leak") {
		t.Errorf("findings %v lack leak", ids)
	}
	if a.Leak.Stacks[0].Category != CatActivation {
		t.Errorf("top leaking stack category %q", a.Leak.Stacks[0].Category)
	}
}

// With recording from before the model is built, parameters and optimizer
// state are recognised from their stacks: 4-layer GPT-2 (hidden 512) has
// 38.6M parameters, 154 MB in fp32, and AdamW keeps two fp32 moments.
func TestParamsAndOptimizerState(t *testing.T) {
	a := Analyze(testdataSnapshot(t, "validate_gpt2tiny_fp32.pickle.xz"), 0, Options{}).Result
	got := map[string]int64{}
	for _, c := range a.Categories {
		got[c.Category.String()] = c.Bytes
	}
	const params = 4*(12*512*512+13*512) + 50257*512 + 1024*512 + 2*512 // GPT-2 parameter count
	if p := got["parameter"]; math.Abs(float64(p)-4*params)/(4*params) > 0.01 {
		t.Errorf("parameter bytes %d, want about %d", p, 4*params)
	}
	if o := got["optimizer_state"]; math.Abs(float64(o)-8*params)/(8*params) > 0.01 {
		t.Errorf("optimizer_state bytes %d, want about %d", o, 8*params)
	}
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

func TestPhaseAnnotationNames(t *testing.T) {
	cases := map[string]Phase{"ptscope:forward": PhaseForward, "ptscope:backward": PhaseBackward, "ptscope:optimizer": PhaseOptimizer,
		"ptscope::forward#3": PhaseForward, "forward": PhaseForward, "ProfilerStep#2": PhaseUnknown, "Optimizer.step#AdamW.step": PhaseUnknown}
	for in, want := range cases {
		if got := phaseAnnotation(in); got != want {
			t.Errorf("phaseAnnotation(%q) = %v, want %v", in, got, want)
		}
	}
	if !isOptimizerStep("ptscope:optimizer") || !isOptimizerStep("Optimizer.step#SGD.step") || isOptimizerStep("ptscope:forward") {
		t.Error("isOptimizerStep")
	}
}

// An OOM in the first forward of a 48-layer model (ptscope run, H200): the
// layers repeat but are not iterations, so no steps and no leak; the verdict
// is capacity (1.17 GiB requested, 981 MiB free, 24.8 MiB cached).
func TestOOMInFirstForward(t *testing.T) {
	a := Analyze(testdataSnapshot(t, "oom_lm_xl_forward.pickle.xz"), 0, Options{}).Result
	if a.Pattern == PatternLeak || a.Pattern == PatternSpike {
		t.Errorf("pattern %q from layer repetition", a.Pattern)
	}
	if len(a.OOMs) != 1 || a.OOMs[0].Verdict != VerdictCapacity || a.OOMs[0].RequestedBytes != 1258291200 {
		t.Fatalf("ooms = %+v", a.OOMs)
	}
	for _, f := range a.Findings {
		if f.ID == "leak" {
			t.Error("leak finding")
		}
	}
	if a.OOMs[0].LargestFreeBytes < 0 {
		t.Error("largest free block unknown for an OOM dump")
	}
}

// TestFP32ComputeFinding: the fixture is GPT-2 small trained in fp32 without
// autocast (124,439,808 parameters, 4 bytes each). With the precision a
// ptscope run bundle records for such a run the finding names the activation
// bytes at the peak; with autocast on, under FSDP, with bf16 parameters or
// for a bare snapshot it is absent.
func TestFP32ComputeFinding(t *testing.T) {
	s := fixture(t, "gpt2s_train_fp32_b4_ctx512.pickle")
	const params = 124_439_808 * 4
	find := func(p *Precision) *finding.Finding {
		a := Analyze(s, 0, Options{Precision: p}).Result
		for i := range a.Findings {
			if a.Findings[i].ID == "fp32-compute" {
				return &a.Findings[i]
			}
		}
		return nil
	}
	fp32 := &Precision{ParameterBytesByDtype: map[string]int64{"float32": params}}
	f := find(fp32)
	if f == nil {
		t.Fatal("no fp32-compute finding for an fp32 run without autocast")
	}
	act := Analyze(s, 0, Options{}).Result.bytesAt(CatActivation)
	if act < 1<<30 || !strings.Contains(f.Message, units.Bytes(act)) || !strings.Contains(f.Message, units.Bytes(params)) {
		t.Errorf("message %q should name the %s of fp32 parameters and the %s of activations", f.Message, units.Bytes(params), units.Bytes(act))
	}
	for name, p := range map[string]*Precision{
		"autocast":    {ParameterBytesByDtype: map[string]int64{"float32": params}, Autocast: true, AutocastDtype: "bfloat16"},
		"fsdp":        {ParameterBytesByDtype: map[string]int64{"float32": params}, FSDP: true},
		"bf16 params": {ParameterBytesByDtype: map[string]int64{"bfloat16": params / 2, "float32": 1 << 20}},
		"no bundle":   nil,
	} {
		if f := find(p); f != nil {
			t.Errorf("%s: unexpected finding %q", name, f.Message)
		}
	}
}
