//go:build !windows

package capture

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/ptscope/ptscope/internal/bundle"
)

// The companion's stack windows, tensor inventories and module attribution,
// exercised against testdata/faketorch (python3 without torch is what CI has).

// snapshotFacts runs a python check over a snapshot and decodes its JSON output.
func snapshotFacts(t *testing.T, py, snapshot, code string, v any) {
	t.Helper()
	out, err := exec.Command(py, "-c", "import json, pickle, sys, collections\ns = pickle.load(open(sys.argv[1], 'rb'))\n"+code, snapshot).CombinedOutput()
	if err != nil {
		t.Fatalf("check failed: %v\n%s", err, out)
	}
	if err := json.Unmarshal(out, v); err != nil {
		t.Fatalf("check output %q: %v", out, err)
	}
}

// trainRank runs testdata/faketrain.py for steps steps in mode under o and
// returns the first rank of its bundle; a failed run or bundle ends the test.
func trainRank(t *testing.T, o Options, py string, steps int, mode string) *bundle.Rank {
	t.Helper()
	r := runIt(t, o, py, "testdata/faketrain.py", strconv.Itoa(steps), mode)
	if r.res.ExitCode != 0 {
		t.Fatalf("%s: exit %d: %s", mode, r.res.ExitCode, r.stderr)
	}
	b, err := bundle.ReadBundle(r.res.Dir)
	if err != nil {
		t.Fatal(err)
	}
	return &b.Ranks[0]
}

// TestFakeTorchStackWindows covers history mode "run": the history records
// the whole run and only the stacks are switched.
func TestFakeTorchStackWindows(t *testing.T) {
	py := needPython(t)
	t.Parallel()
	type win struct {
		Reason      string
		First, Last int
	}
	tests := []struct {
		name        string
		mode        string
		steps       int
		record      RecordSteps
		stacks      string
		maxEntries  int
		wantWindows []win
		wantCalls   []any // the history's context at each _record_memory_history call
	}{
		// warm-up only: stacks off from step 3 on
		{"auto", "train", 6, DefaultRecordSteps(), "python", 100000,
			[]win{{"setup", -1, -1}, {"warmup", 0, 2}}, []any{"alloc", nil}},
		// a small ring: about 21 entries a step, 9 steps in the last 200
		// entries; a stacked step as the last one is about to leave the
		// ring, but at most every 32nd step (a stacked step costs the most)
		{"periodic", "train", 50, DefaultRecordSteps(), "python", 200,
			[]win{{"setup", -1, -1}, {"warmup", 0, 2}, {"periodic", 10, 10}, {"periodic", 42, 42}},
			[]any{"alloc", nil, "alloc", nil, "alloc", nil}},
		// a leak raises the peak from step 6 on: the next step is stacked,
		// with a gap that doubles (1, 2, 4, 8 steps)
		{"peak", "leak", 24, DefaultRecordSteps(), "python", 100000,
			[]win{{"setup", -1, -1}, {"warmup", 0, 2}, {"peak", 7, 8}, {"peak", 10, 10}, {"peak", 14, 14}, {"peak", 22, 22}},
			[]any{"alloc", nil, "alloc", nil, "alloc", nil, "alloc", nil, "alloc", nil}},
		// a process limit (set_per_process_memory_fraction) of 41 MiB on a
		// 1 GiB device: the steps reserve 38 MiB, over 90% of the limit
		// (not of the device, as "auto" shows): the steps after the warm-up
		// are stacked, with the doubling gap (3 and 4; 5 waits for 6, whose
		// decision switches stacks on although it never runs)
		{"capacity", "limit", 6, DefaultRecordSteps(), "python", 100000,
			[]win{{"setup", -1, -1}, {"warmup", 0, 2}, {"capacity", 3, 4}}, []any{"alloc", nil, "alloc"}},
		{"requested", "train", 10, RecordSteps{Mode: "steps", Ranges: [][2]int{{5, 5}, {7, 8}}}, "python", 100000,
			[]win{{"setup", -1, -1}, {"requested", 5, 5}, {"requested", 7, 8}},
			[]any{"alloc", nil, "alloc", nil, "alloc", nil}},
		// every step; a window never runs past the last step
		{"all", "train", 5, RecordSteps{Mode: "all"}, "python", 100000,
			[]win{{"setup", -1, -1}, {"all", 0, 4}}, []any{"alloc"}},
		{"no stacks", "train", 5, DefaultRecordSteps(), "none", 100000, nil, []any{nil}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o := testOptions(t, fakeTorchEnv(t))
			o.History = "run" // stacks switched, history for the whole run
			o.RecordSteps, o.Stacks, o.MaxEntries = tt.record, tt.stacks, tt.maxEntries
			rk := trainRank(t, o, py, tt.steps, tt.mode)
			var got []win
			for _, w := range rk.Info.StackWindows {
				got = append(got, win{w.Reason, w.FirstStep, w.LastStep})
				if w.EndTimeUs < w.StartTimeUs || w.StartTimeUs == 0 {
					t.Errorf("window %+v: bad times", w)
				}
			}
			if !reflect.DeepEqual(got, tt.wantWindows) {
				t.Errorf("windows\n got %v\nwant %v", got, tt.wantWindows)
			}
			wantCtx := "alloc"
			if tt.stacks == "none" {
				wantCtx = ""
			}
			if h := rk.Info.History; h == nil || h.Context != wantCtx || h.RecordSteps != tt.record.Mode || h.Switchable != (tt.stacks != "none") {
				t.Errorf("history %+v", h)
			}
			// StacksAt agrees with the windows
			for _, w := range rk.Info.StackWindows {
				if !rk.Info.StacksAt(w.StartTimeUs) || rk.Info.StacksAt(w.StartTimeUs-1) && w.FirstStep == -1 {
					t.Errorf("StacksAt around %+v", w)
				}
			}
			if len(rk.Info.StackWindows) > 0 && rk.Info.StacksAt(rk.Info.StackWindows[len(rk.Info.StackWindows)-1].EndTimeUs) {
				t.Error("StacksAt after the last window")
			}
			// every phase of a stacked step says so, no other does
			stacked := map[int]bool{}
			for _, w := range tt.wantWindows {
				for s := w.First; s <= w.Last; s++ {
					stacked[s] = true
				}
			}
			for _, p := range rk.Phases {
				if p.Stacks != stacked[p.Step] {
					t.Errorf("step %d %s: stacks %v", p.Step, p.Name, p.Stacks)
				}
			}
			// The snapshot's history: the contexts set, and stacks on exactly
			// the allocations of stacked steps (by the step of the
			// ptscope:optimizer annotation that ends each one).
			var facts struct {
				Calls   []any          `json:"calls"`
				Entries int            `json:"entries"`
				ByStep  map[string]int `json:"by_step"`
				Bad     int            `json:"bad"`
			}
			snapshotFacts(t, py, rk.Snapshots[len(rk.Snapshots)-1], `
ends = [a["time_us"] for a in s["external_annotations"] if a["name"] == "ptscope:optimizer" and a["stage"] == "END"]
by = collections.Counter()
for e in s["device_traces"][0]:
    if e["action"] == "alloc" and e.get("frames"):
        by[str(sum(1 for t in ends if t < e["time_us"]))] += 1
print(json.dumps({"calls": [c["context"] for c in s["fake_history_calls"]], "entries": len(s["device_traces"][0]), "by_step": by}))
`, &facts)
			if !reflect.DeepEqual(facts.Calls, tt.wantCalls) {
				t.Errorf("history contexts %v, want %v", facts.Calls, tt.wantCalls)
			}
			if tt.name == "periodic" {
				// the ring holds the last 200 entries, among them all of
				// step 42's: 7 stacked allocations
				if facts.Entries != 200 || facts.ByStep["42"] != 7 {
					t.Errorf("ring: %d entries, stacked allocations by step %v", facts.Entries, facts.ByStep)
				}
			}
		})
	}
}

func TestFakeTorchTensorRoles(t *testing.T) {
	py := needPython(t)
	t.Parallel()
	for _, mode := range []string{"lightning", "ddp"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			o := testOptions(t, fakeTorchEnv(t))
			o.History = "run" // every step's allocations in the end snapshot
			rk := trainRank(t, o, py, 4, mode)
			// parameter names as the model's named_parameters gives them:
			// the LightningModule found from training_step's self, DDP's module.
			prefix, names := "", []string{"emb.attn.w", "enc.attn.w", "head.attn.w"}
			if mode == "ddp" {
				prefix, names = "module.", []string{"h0.attn.w", "h1.attn.w"}
			}
			var ats []string
			for _, inv := range rk.Inventories {
				ats = append(ats, fmt.Sprintf("%d:%s", inv.Step, inv.At))
			}
			// taken at the first forward, after the backward and at the end of
			// stacked steps, at exit; written only when something changed
			if got := strings.Join(ats, " "); got != "0:first_forward 0:backward_end 0:step_end 1:backward_end 2:backward_end 4:end" {
				t.Errorf("inventories %s", got)
			}
			first, step0 := &rk.Inventories[0], &rk.Inventories[2]
			n := int64(len(names))
			if first.Bytes(bundle.KindParameter) != n*4<<20 || first.Bytes(bundle.KindGradient) != 0 || first.Bytes(bundle.KindOptimizerState) != 0 {
				t.Errorf("first forward: %+v", first.Tensors)
			}
			if step0.Bytes(bundle.KindParameter) != n*4<<20 || step0.Bytes(bundle.KindGradient) != n*4<<20 || step0.Bytes(bundle.KindOptimizerState) != 2*n*4<<20 {
				t.Errorf("end of step 0: %+v", step0.Tensors)
			}
			for _, name := range names {
				full := prefix + name
				var got []string
				for _, x := range step0.Tensors {
					if strings.HasPrefix(x.Name, full) {
						got = append(got, x.Kind+":"+x.Name+":"+x.Module+":"+x.Dtype)
						if x.Bytes != 4<<20 || x.Ptr == 0 {
							t.Errorf("%+v", x)
						}
					}
				}
				mod := strings.TrimSuffix(full, ".w")
				want := []string{"parameter:" + full + ":" + mod + ":float32", "gradient:" + full + ":" + mod + ":float32",
					"optimizer_state:" + full + ".exp_avg:" + mod + ":float32", "optimizer_state:" + full + ".exp_avg_sq:" + mod + ":float32"}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("%s:\n got %q\nwant %q", full, got, want)
				}
			}
			// Every recorded storage is an allocation of the snapshot's trace,
			// of the same size, alive at the inventory's time.
			var allocs [][3]int64 // addr, size, time
			snapshotFacts(t, py, rk.Snapshots[len(rk.Snapshots)-1],
				`print(json.dumps([[e["addr"], e["size"], e["time_us"]] for e in s["device_traces"][0] if e["action"] == "alloc"]))`, &allocs)
			for _, x := range step0.Tensors {
				found := false
				for _, a := range allocs {
					found = found || (a[0] == x.Ptr && a[1] == x.Bytes && a[2] <= step0.TimeUs)
				}
				if !found {
					t.Errorf("%s %s at %#x: no allocation of %d bytes in the trace", x.Kind, x.Name, x.Ptr, x.Bytes)
				}
				if got := step0.Lookup(x.Ptr + x.Bytes/2); len(got) != 1 || !reflect.DeepEqual(got[0], x) {
					t.Errorf("Lookup(%#x) = %+v, want %s", x.Ptr+x.Bytes/2, got, x.Name)
				}
			}
			// Backward allocations carry the path of the module whose forward
			// made the node, in stacked steps (0-2); step 3 records none.
			var meta map[string]int
			snapshotFacts(t, py, rk.Snapshots[len(rk.Snapshots)-1], `
bw = [(a["time_us"], b["time_us"]) for a, b in zip(
    [a for a in s["external_annotations"] if a["name"] == "ptscope:backward" and a["stage"] == "START"],
    [a for a in s["external_annotations"] if a["name"] == "ptscope:backward" and a["stage"] == "END"])]
c = collections.Counter()
for e in s["device_traces"][0]:
    for i, (lo, hi) in enumerate(bw):
        if e["action"] == "alloc" and lo <= e["time_us"] <= hi:
            c["%d:%s" % (i, e.get("user_metadata", ""))] += 1
print(json.dumps(c))
`, &meta)
			want := map[string]int{}
			for step := range 4 {
				for _, name := range names {
					mod := prefix + strings.TrimSuffix(name, ".w")
					if step < 3 {
						want[fmt.Sprintf("%d:%s", step, mod)] = 2 // the node's temporary and the weight's gradient
					} else {
						want[fmt.Sprintf("%d:", step)] += 2
					}
				}
			}
			if !reflect.DeepEqual(meta, want) {
				t.Errorf("backward allocations by module\n got %v\nwant %v", meta, want)
			}
			if mode == "ddp" {
				// the gradient buckets (here: one of the parameters' size) are
				// a region and carry "ptscope:ddp"
				if len(rk.Regions) != 1 || rk.Regions[0].Kind != "ddp_buckets" || rk.Regions[0].AllocatedAfterBytes-rk.Regions[0].AllocatedBeforeBytes != 8<<20 {
					t.Errorf("regions %+v", rk.Regions)
				}
				var ddp []int64
				snapshotFacts(t, py, rk.Snapshots[len(rk.Snapshots)-1],
					`print(json.dumps([e["size"] for e in s["device_traces"][0] if e.get("user_metadata") == "ptscope:ddp" and e["action"] == "alloc"]))`, &ddp)
				if !reflect.DeepEqual(ddp, []int64{8 << 20}) {
					t.Errorf("ptscope:ddp allocations %v", ddp)
				}
			}
		})
	}
}

// An optimizer freed before exit (made and used inside a function, held in
// a reference cycle as a Trainer holds it, collected by the cyclic GC) gets
// an inventory as it is finalized: the last one that knows its state.
func TestFakeTorchOptimizerFreed(t *testing.T) {
	py := needPython(t)
	t.Parallel()
	o := testOptions(t, fakeTorchEnv(t))
	rk := trainRank(t, o, py, 4, "scoped")
	var ats []string
	for _, inv := range rk.Inventories {
		ats = append(ats, fmt.Sprintf("%d:%s", inv.Step, inv.At))
	}
	if got := strings.Join(ats, " "); got != "0:first_forward 0:backward_end 0:step_end 1:backward_end 2:backward_end 4:optimizer_freed 4:end" {
		t.Fatalf("inventories %s", got)
	}
	freed, end := &rk.Inventories[5], &rk.Inventories[6]
	// two 4 MiB parameters, AdamW-like state of two tensors each
	if freed.Bytes(bundle.KindOptimizerState) != 16<<20 || freed.Bytes(bundle.KindParameter) != 8<<20 {
		t.Errorf("optimizer_freed: %+v", freed.Tensors)
	}
	if end.Bytes(bundle.KindOptimizerState) != 0 || end.Bytes(bundle.KindParameter) != 8<<20 {
		t.Errorf("end: %+v", end.Tensors)
	}
	if !rk.Info.Features["optimizer_finalizer"] {
		t.Errorf("features %v", rk.Info.Features)
	}
}

// FSDP2: between its all-gather and its reshard a module's parameters are
// the unsharded copies. The inventory names the shards from their FSDPParam
// (and the optimizer state keyed by them), flags the unsharded copies, and
// counts each once.
func TestFakeTorchFSDPInventory(t *testing.T) {
	py := needPython(t)
	t.Parallel()
	o := testOptions(t, fakeTorchEnv(t))
	rk := trainRank(t, o, py, 4, "fsdp")
	var fwd, step *bundle.Inventory
	for i := range rk.Inventories {
		inv := &rk.Inventories[i]
		switch {
		case inv.At == "forward_end" && inv.Step == 1:
			fwd = inv
		case inv.At == "step_end" && inv.Step == 0:
			step = inv
		}
	}
	if fwd == nil || step == nil {
		t.Fatalf("inventories %v", rk.Inventories)
	}
	got := map[string]bool{}
	for _, x := range fwd.Tensors {
		got[fmt.Sprintf("%s:%s:%s:%s", x.Kind, x.Name, x.Module, x.FSDP)] = true
	}
	for _, mod := range []string{"h0.attn", "h1.attn"} {
		for _, want := range []string{"parameter:" + mod + ".w:" + mod + ":sharded", "parameter:" + mod + ".w:" + mod + ":unsharded",
			"optimizer_state:" + mod + ".w.exp_avg:" + mod + ":", "optimizer_state:" + mod + ".w.exp_avg_sq:" + mod + ":"} {
			if !got[want] {
				t.Errorf("forward_end of step 1 lacks %s: %v", want, got)
			}
		}
	}
	if n := len(fwd.Tensors); n != 8 {
		t.Errorf("forward_end: %d tensors, want 8 (2 shards, 2 unsharded, 4 states)", n)
	}
	if step.Bytes(bundle.KindParameter) != 8<<20 || step.Bytes(bundle.KindGradient) != 8<<20 || step.Bytes(bundle.KindOptimizerState) != 16<<20 {
		t.Errorf("end of step 0: %+v", step.Tensors)
	}
}
