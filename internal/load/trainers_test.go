package load

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/ptscope/ptscope/internal/bundle"
	"github.com/ptscope/ptscope/internal/memory"
	"github.com/ptscope/ptscope/internal/testfixture"
)

// trainer is one real trainer bundle (testdata/bundles/trainers) analysed
// as `ptscope analyze` does, with the facts its process measured.
type trainer struct {
	name  string
	dir   string
	facts testfixture.Facts
	set   *SnapshotSet
}

// trainers caches the analysed bundles: each is extracted and analysed once
// for all the tests (into trainerDir, removed by TestMain).
var (
	trainerMu  sync.Mutex
	trainers   = map[string]*trainerOnce{}
	trainerDir string
)

type trainerOnce struct {
	once sync.Once
	tr   *trainer
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if trainerDir != "" {
		os.RemoveAll(trainerDir)
	}
	os.Exit(code)
}

// analyzeTrainer extracts and analyses one trainer bundle (once).
func analyzeTrainer(t *testing.T, name string) *trainer {
	t.Helper()
	root := testfixture.Root(t)
	trainerMu.Lock()
	if trainerDir == "" {
		d, err := os.MkdirTemp("", "ptscope-trainers-")
		if err != nil {
			trainerMu.Unlock()
			t.Fatal(err)
		}
		trainerDir = d
	}
	o := trainers[name]
	if o == nil {
		o = &trainerOnce{}
		trainers[name] = o
	}
	trainerMu.Unlock()
	o.once.Do(func() {
		dir := filepath.Join(trainerDir, name)
		if o.err = testfixture.ExtractTrainerBundle(root, name, dir); o.err != nil {
			return
		}
		set, err := Snapshots(context.Background(), []string{dir}, SnapshotOptions{})
		if err != nil {
			o.err = err
			return
		}
		o.tr = &trainer{name: name, dir: dir, facts: testfixture.ReadFacts(t, dir), set: set}
	})
	if o.err != nil {
		t.Fatal(o.err)
	}
	return o.tr
}

// result returns the analysis of the named snapshot of rank 0.
func (tr *trainer) result(t *testing.T, snapshot string) *memory.Result {
	t.Helper()
	for _, in := range tr.set.Report.Inputs {
		if filepath.Base(in.Path) == snapshot && len(in.Devices) == 1 {
			return in.Devices[0]
		}
	}
	for _, in := range tr.set.Report.Inputs {
		// a bundle recorded in stack windows: the run read as one
		if in.Bundle != nil && in.Bundle.HistoryMode == "windows" && in.Bundle.Rank == 0 && snapshot == tr.mainSnapshot() && len(in.Devices) == 1 {
			return in.Devices[0]
		}
	}
	t.Fatalf("%s: no analysed %s", tr.name, snapshot)
	return nil
}

// analysis returns the analysis of the named snapshot of rank 0 with its
// bundle rank.
func (tr *trainer) analysis(t *testing.T, snapshot string) (*memory.Analysis, *bundle.Rank) {
	t.Helper()
	for _, in := range tr.set.Inputs {
		if filepath.Base(in.Path) == snapshot && len(in.Devices) == 1 && in.Rank != nil {
			return in.Devices[0], in.Rank
		}
	}
	for _, in := range tr.set.Inputs {
		// a bundle recorded in stack windows: the run read as one
		if in.Rank != nil && in.Rank.Info.Windowed() && in.Rank.Rank == 0 && snapshot == tr.mainSnapshot() && len(in.Devices) == 1 {
			return in.Devices[0], in.Rank
		}
	}
	t.Fatalf("%s: no analysed %s", tr.name, snapshot)
	return nil, nil
}

// mainSnapshot is the snapshot that covers the whole run: the OOM's for
// the trainer that ran out of memory, else the one written at exit.
func (tr *trainer) mainSnapshot() string {
	if tr.name == "oom" {
		return "snapshot_oom.pickle"
	}
	return "snapshot_end.pickle"
}

// The peak of every real trainer's snapshot is the process's own
// torch.cuda.max_memory_allocated to the byte: large blocks are counted as
// the allocator handed them out (unsplit remainders included), not as the
// rounded requests the trace records.
func TestTrainerPeaks(t *testing.T) {
	for _, name := range testfixture.TrainerBundles {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tr := analyzeTrainer(t, name)
			r := tr.result(t, tr.mainSnapshot())
			if r.Truncated {
				t.Fatalf("trace truncated: %s", r.TruncationEvidence)
			}
			if got, want := r.Peak.AllocatedBytes, tr.facts.MaxMemoryAllocated; got != want {
				t.Errorf("peak %d, the process's max_memory_allocated %d (%+.3f%%)", got, want, 100*(float64(got)/float64(want)-1))
			}
			// the bundle's own reading of it at the last phase boundary
			// before the snapshot's end (the OOM's came in a forward
			// after the last one)
			got, want := r.Peak.ProcessMaxAllocatedBytes, tr.facts.MaxMemoryAllocated
			if name == "oom" && (got <= 0 || got > want) || name != "oom" && got != want {
				t.Errorf("process_max_allocated_bytes %d, the process's %d", got, want)
			}
			for _, f := range r.Findings {
				if f.ID == "peak-not-in-trace" {
					t.Errorf("finding %+v", f)
				}
			}
		})
	}
}

// Steps are optimizer steps on every trainer: gradient accumulation
// (accelerate, HF Trainer, plain_accum_ckpt: two forwards a step), closures
// and three root modules a step (Lightning), DDP, FSDP2, torch.compile. The
// OOM's step (cut short) and the pieces before the first and after the last
// step are partial.
func TestTrainerSteps(t *testing.T) {
	for _, name := range testfixture.TrainerBundles {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tr := analyzeTrainer(t, name)
			r := tr.result(t, tr.mainSnapshot())
			if r.StepSource != memory.StepsPtscopeStep {
				t.Errorf("steps from %s", r.StepSource)
			}
			var full []string
			for _, s := range r.Steps {
				if !s.Partial {
					full = append(full, s.Name)
				}
			}
			if len(full) != tr.facts.OptimizerSteps {
				t.Errorf("%d complete steps %v, the process made %d optimizer steps", len(full), full, tr.facts.OptimizerSteps)
			}
			for i, n := range full {
				if want := "step " + strconv.Itoa(i); n != want {
					t.Errorf("complete step %d is %q, want %q", i, n, want)
				}
			}
		})
	}
}

// What a forward phase allocated and a backward phase of the same step
// freed is an activation (unless an inventory says it is a parameter): phases as the companion wrote them in
// phases.jsonl (not the snapshot's annotations the analysis reads), and the
// closure's forward under optimizer.step(closure) too (Lightning).
func TestTrainerActivations(t *testing.T) {
	for _, name := range testfixture.TrainerBundles {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tr := analyzeTrainer(t, name)
			an, rk := tr.analysis(t, tr.mainSnapshot())
			type span struct {
				step   int
				t0, t1 int64
			}
			var fwd, bwd []span
			for _, p := range rk.Phases {
				sp := span{p.Step, p.StartTimeUs, p.EndTimeUs}
				switch p.Name {
				case "forward":
					fwd = append(fwd, sp)
				case "backward":
					bwd = append(bwd, sp)
				}
			}
			in := func(ss []span, us int64) int {
				for _, s := range ss {
					if s.t0 <= us && us <= s.t1 {
						return s.step
					}
				}
				return -1
			}
			// Storages the inventories name keep their role (FSDP2's root
			// parameters are all-gathered in forward and freed in backward).
			known := map[uint64]bool{}
			for _, inv := range rk.Inventories {
				for _, x := range inv.Tensors {
					known[uint64(x.Ptr)] = true
				}
			}
			times := an.Replay.Timeline.TimeUS
			by := map[memory.Category]int64{}
			var total int64
			for k := range an.Replay.Allocs {
				a := &an.Replay.Allocs[k]
				if a.AllocIdx < 0 || a.FreeReqIdx < 0 {
					continue
				}
				s := in(fwd, times[a.AllocIdx])
				if s < 0 || in(bwd, times[a.FreeReqIdx]) != s || known[a.Addr] && a.Category == memory.CatParameter {
					continue
				}
				by[a.Category] += a.Size
				total += a.Size
			}
			if total == 0 {
				t.Fatal("no allocation made in a forward and freed in its backward")
			}
			if share := float64(by[memory.CatActivation]) / float64(total); share < 0.99 {
				t.Errorf("%.1f%% of %d bytes made in a forward and freed in its backward are activations: %v", 100*share, total, by)
			}
		})
	}
}

// Parameters and optimizer state at the peak, labelled from the bundle's
// tensor inventories, hold what the process counted (storage bytes, each
// storage once) within 1%; every tensor of the inventory in force at the
// peak labels the allocation holding it. FSDP2's unsharded parameters (the
// root's, kept from forward to backward) are parameters too, but the
// process counted its local shards: parameter blocks freed in the step
// that made them (a model's own parameters live on) are left out of the
// sum.
func TestTrainerRoles(t *testing.T) {
	cat := map[string]memory.Category{bundle.KindParameter: memory.CatParameter, bundle.KindBuffer: memory.CatParameter,
		bundle.KindGradient: memory.CatGradient, bundle.KindOptimizerState: memory.CatOptimizerState}
	for _, name := range testfixture.TrainerBundles {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tr := analyzeTrainer(t, name)
			an, rk := tr.analysis(t, tr.mainSnapshot())
			r := an.Result
			inv := rk.InventoryAt(r.Peak.TimeNS / 1000)
			if inv == nil {
				t.Fatal("no inventory")
			}
			live := an.Replay.LiveAt(r.Peak.EventIndex)
			times := an.Replay.Timeline.TimeUS
			at := sort.Search(len(times), func(i int) bool { return times[i] > inv.TimeUs }) - 1
			// the allocation alive at the peak that held the tensor when the
			// inventory was taken
			holding := func(ptr int64) *memory.Alloc {
				for _, a := range live {
					if uint64(ptr) >= a.Addr && uint64(ptr) < a.Addr+uint64(a.Size) && a.Alive(at) {
						return a
					}
				}
				return nil
			}
			unsharded := map[*memory.Alloc]bool{}
			checked := 0
			module := map[uint64]string{} // of the allocations the inventory names
			for _, x := range inv.Tensors {
				a := holding(x.Ptr)
				if a == nil {
					continue // freed between the inventory and the peak
				}
				checked++
				if x.FSDP == "unsharded" {
					unsharded[a] = true
				}
				if _, ok := module[a.Addr]; !ok && x.Module != "" && a.Addr == uint64(x.Ptr) {
					module[a.Addr] = x.Module
				}
				if a.Category != cat[x.Kind] && !(x.Kind == bundle.KindGradient && a.Category == memory.CatParameter) {
					t.Errorf("%s %s at %#x: allocation labelled %s", x.Kind, x.Name, x.Ptr, a.Category)
				}
			}
			if checked == 0 {
				t.Errorf("no tensor of the inventory (%s, step %d) is alive at the peak", inv.At, inv.Step)
			}
			// parameters, gradients and optimizer state are attributed to
			// their parameter's module
			named := 0
			for _, ta := range r.TopAllocations {
				if m, ok := module[ta.Address]; ok {
					named++
					if ta.Module != m {
						t.Errorf("%s of %d bytes at %#x: module %q, the inventory says %q", ta.Category, ta.Bytes, ta.Address, ta.Module, m)
					}
				}
			}
			if named == 0 {
				t.Error("no top allocation is a tensor of the inventory")
			}
			transient := func(a *memory.Alloc) bool {
				return a.AllocIdx >= 0 && a.FreeReqIdx >= 0 && an.Phases.StepOf[a.AllocIdx] == an.Phases.StepOf[a.FreeReqIdx]
			}
			var params, states int64
			for _, a := range live {
				switch {
				case a.Category == memory.CatParameter && !unsharded[a] && !transient(a):
					params += a.Requested
				case a.Category == memory.CatOptimizerState:
					states += a.Requested
				}
			}
			for _, c := range []struct {
				what      string
				got, want int64
			}{{"parameter", params, tr.facts.ParameterBytes}, {"optimizer state", states, tr.facts.OptimizerStateBytes}} {
				if c.want == 0 {
					t.Logf("%s: %d bytes at the peak; the process measured none", c.what, c.got)
					continue
				}
				if e := float64(c.got)/float64(c.want) - 1; e > 0.01 || e < -0.01 {
					t.Errorf("%s: %d bytes at the peak, the process counted %d (%+.2f%%)", c.what, c.got, c.want, 100*e)
				}
			}
		})
	}
}

// Keyword groups come from the allocating frames: on FSDP2 only what FSDP's
// own code allocated (shards, all-gather and reduce-scatter buffers) is in
// the fsdp group, not the loss computed in a script named fsdp2.py, nor the
// root module FSDP2 renamed FSDPTransformerLM.
func TestTrainerGroups(t *testing.T) {
	for _, name := range []string{"fsdp2", "fsdp2_sim2"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tr := analyzeTrainer(t, name)
			r := tr.result(t, tr.mainSnapshot())
			n := 0
			for _, a := range r.TopAllocations {
				if a.Group != "fsdp" {
					continue
				}
				n++
				fsdp := false
				for _, f := range r.Stacks[a.Stack].Frames {
					fsdp = fsdp || strings.Contains(f.Filename, "torch/distributed/fsdp/")
				}
				if !fsdp {
					t.Errorf("%d bytes (%s, module %q) in group fsdp without an FSDP frame: %v", a.Bytes, a.Category, a.Module, r.Stacks[a.Stack].Frames)
				}
			}
			if n == 0 {
				t.Error("no allocation in group fsdp")
			}
		})
	}
}

// The leak trainer keeps 32,768,000 bytes of logits every step: a leak of
// that size per step, whose first accumulating stack is the logits' own
// (with frames, although most of those steps recorded none), and no
// one-time allocation (AdamW's state) among the accumulating stacks. The
// other trainers do not leak.
func TestTrainerLeak(t *testing.T) {
	for _, name := range testfixture.TrainerBundles {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tr := analyzeTrainer(t, name)
			r := tr.result(t, tr.mainSnapshot())
			if tr.facts.LeakedBytesPerStep == 0 {
				if r.Pattern == memory.PatternLeak {
					t.Errorf("pattern leak (%+v)", r.Leak)
				}
				return
			}
			if r.Pattern != memory.PatternLeak || r.Leak == nil || len(r.Leak.Stacks) == 0 {
				t.Fatalf("pattern %s, leak %+v", r.Pattern, r.Leak)
			}
			per := tr.facts.LeakedBytesPerStep
			if e := float64(r.Leak.PerStepBytes)/float64(per) - 1; e > 0.01 || e < -0.01 {
				t.Errorf("%d bytes per step, the process kept %d (%+.2f%%)", r.Leak.PerStepBytes, per, 100*e)
			}
			top := r.Leak.Stacks[0]
			if top.UserFrame < 0 || top.Count != tr.facts.OptimizerSteps || top.Bytes < int64(tr.facts.OptimizerSteps)*per {
				t.Errorf("first leaking stack: %d bytes in %d allocations, user frame %d (%s)", top.Bytes, top.Count, top.UserFrame, top.Source)
			}
			for _, s := range r.Leak.Stacks {
				if s.Category == memory.CatOptimizerState || s.Category == memory.CatParameter {
					t.Errorf("a %s stack accumulates: %d bytes from %s", s.Category, s.Bytes, s.Source)
				}
			}
		})
	}
}

// The OOM trainer ran under torch.cuda.set_per_process_memory_fraction
// (6 GiB of an 80 GiB H100) and failed with 5.81 GiB allocated and 159 MiB
// cached, 72 GiB free on the device: capacity under the process's limit,
// not fragmentation.
func TestTrainerOOM(t *testing.T) {
	t.Parallel()
	tr := analyzeTrainer(t, "oom")
	r := tr.result(t, "snapshot_oom.pickle")
	if len(r.OOMs) != 1 {
		t.Fatalf("%d OOMs", len(r.OOMs))
	}
	x := r.OOMs[0]
	if x.Verdict != memory.VerdictCapacity || !x.Limited || x.AllowedBytes != tr.facts.MemoryCapBytes {
		t.Errorf("verdict %s, limited %v, allowed %d (the process's cap %d)", x.Verdict, x.Limited, x.AllowedBytes, tr.facts.MemoryCapBytes)
	}
	if x.Phase != memory.PhaseForward || r.Steps[x.Step].Name != "step "+strconv.Itoa(tr.facts.OOMStep) {
		t.Errorf("OOM in %s of %s, the process ran out in the forward of step %d", x.Phase, r.Steps[x.Step].Name, tr.facts.OOMStep)
	}
	checkOOMPhaseStart(t, x, filepath.Join(tr.dir, "rank0"), tr.facts.OOMStep)
	var found, stacks bool
	for _, f := range r.Findings {
		found = found || f.ID == "oom-capacity" && strings.Contains(f.Message, "this process may use")
		// the OOM's step was not stacked: say how to record its stacks
		stacks = stacks || f.ID == "no-stacks" && strings.Contains(f.Recommendation, "--record-steps 6")
	}
	if !found || !stacks {
		t.Errorf("findings %+v", r.Findings)
	}
	// One report: the end snapshot, written after the error with no step
	// after it, repeats the OOM's history and is named, not analysed.
	if n := len(tr.set.Report.Inputs); n != 1 {
		t.Fatalf("%d inputs, want the OOM snapshot's only", n)
	}
	if sk := tr.set.Report.Inputs[0].Bundle.SkippedSnapshots; len(sk) != 1 || filepath.Base(sk[0].Path) != "snapshot_end.pickle" {
		t.Errorf("skipped %+v", sk)
	}
}

// A rank keeps every snapshot unless the end one only repeats the OOM's:
// a run that caught the error and went on has steps after it.
func TestRankSnapshots(t *testing.T) {
	oom, end, step := "r/snapshot_oom.pickle", "r/snapshot_end.pickle", "r/snapshot_step3.pickle"
	x := &bundle.OOM{TimeUs: 100, Snapshot: "snapshot_oom.pickle"}
	before := []bundle.Phase{{Name: "forward", StartTimeUs: 90}}
	after := append(before, bundle.Phase{Name: "forward", StartTimeUs: 110})
	for _, c := range []struct {
		name    string
		r       bundle.Rank
		keep    []string
		skipped string
	}{
		{"oom then exit", bundle.Rank{Snapshots: []string{step, oom, end}, OOM: x, Phases: before}, []string{step, oom}, end},
		{"trained on after the oom", bundle.Rank{Snapshots: []string{oom, end}, OOM: x, Phases: after}, []string{oom, end}, ""},
		{"no oom", bundle.Rank{Snapshots: []string{step, end}, Phases: before}, []string{step, end}, ""},
		{"oom without its snapshot", bundle.Rank{Snapshots: []string{end}, OOM: x, Phases: before}, []string{end}, ""},
		{"oom, no end snapshot", bundle.Rank{Snapshots: []string{oom}, OOM: x}, []string{oom}, ""},
	} {
		keep, skipped := rankSnapshots(&c.r)
		var sk string
		if len(skipped) > 0 {
			sk = skipped[0].Path
		}
		if strings.Join(keep, " ") != strings.Join(c.keep, " ") || sk != c.skipped || len(skipped) > 1 {
			t.Errorf("%s: kept %v, skipped %+v", c.name, keep, skipped)
		}
	}
}

// fp32-compute warns of a forward that ran without autocast on fp32
// parameters. Every trainer's configuration (facts.json) computes in bf16:
// autocast (HF Trainer and accelerate enter it inside their wrapped forward,
// Lightning's bf16-mixed, the plain loops) or FSDP2's bf16 parameters, so
// none of them has the finding. The fp32 run's record is checked by
// cli.TestAnalyzeBundlePrecision.
func TestTrainerPrecision(t *testing.T) {
	for _, name := range testfixture.TrainerBundles {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tr := analyzeTrainer(t, name)
			r := tr.result(t, tr.mainSnapshot())
			want := !strings.Contains(tr.facts.Config, "bf16")
			got := false
			for _, f := range r.Findings {
				got = got || f.ID == "fp32-compute"
			}
			if got != want {
				t.Errorf("fp32-compute %v, want %v for %q", got, want, tr.facts.Config)
			}
		})
	}
}
