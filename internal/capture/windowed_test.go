//go:build !windows

package capture

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"github.com/ptscope/ptscope/internal/bundle"
)

// TestFakeTorchHistoryWindows covers the default history mode, "windows":
// the allocator history is enabled only inside stack windows, each window
// is saved as a snapshot of its own before the history is disabled (which
// empties PyTorch's ring), and a snapshot taken between windows holds no
// trace.
func TestFakeTorchHistoryWindows(t *testing.T) {
	py := needPython(t)
	t.Parallel()
	type win struct {
		Reason      string
		First, Last int
		Snapshot    string
	}
	const w0, w1, w2, w3, w4, end = "snapshot_window0.pickle", "snapshot_window1.pickle", "snapshot_window2.pickle",
		"snapshot_window3.pickle", "snapshot_window4.pickle", "snapshot_end.pickle"
	tests := []struct {
		name    string
		mode    string
		steps   int
		record  RecordSteps
		stacks  string
		budget  float64
		want    []win
		endHist bool // the end snapshot holds a trace (a window was open)
	}{
		{"auto", "train", 6, DefaultRecordSteps(), "python", 0,
			[]win{{"setup", -1, -1, w0}, {"warmup", 0, 2, w0}}, false},
		// steady-state steps at doubling gaps, here with a budget that
		// always allows them (the default's 1% depends on timing)
		{"periodic", "train", 50, DefaultRecordSteps(), "python", 1000,
			[]win{{"setup", -1, -1, w0}, {"warmup", 0, 2, w0}, {"periodic", 16, 16, w1}, {"periodic", 32, 32, w2}}, false},
		// the same run with a budget no window fits in: the periodic
		// windows are skipped (the default's 1% of a short run's time
		// does the same; windows cost a step and a snapshot's save)
		{"over budget", "train", 50, DefaultRecordSteps(), "python", 1e-9,
			[]win{{"setup", -1, -1, w0}, {"warmup", 0, 2, w0}}, false},
		// a leak raises the peak from step 6 on: windows after it with a
		// doubling gap, each saved on its own
		{"peak", "leak", 24, DefaultRecordSteps(), "python", 0,
			[]win{{"setup", -1, -1, w0}, {"warmup", 0, 2, w0}, {"peak", 7, 8, w1}, {"peak", 10, 10, w2},
				{"peak", 14, 14, w3}, {"peak", 22, 22, w4}}, false},
		// over 90% of a 41 MiB process limit: steps 3-4 go on from the
		// warm-up in one history (one snapshot), then the window decided
		// for step 6 (which never runs) is saved with the end
		{"capacity", "limit", 6, DefaultRecordSteps(), "python", 0,
			[]win{{"setup", -1, -1, w0}, {"warmup", 0, 2, w0}, {"capacity", 3, 4, w0}}, true},
		{"requested", "train", 10, RecordSteps{Mode: "steps", Ranges: [][2]int{{5, 5}, {7, 8}}}, "python", 0,
			[]win{{"setup", -1, -1, w0}, {"requested", 5, 5, w1}, {"requested", 7, 8, w2}}, false},
		// every step: one window, saved by the end snapshot
		{"all", "train", 5, RecordSteps{Mode: "all"}, "python", 0,
			[]win{{"setup", -1, -1, end}, {"all", 0, 4, end}}, true},
		// no stacks: the same windows, without stacks
		{"no stacks", "train", 5, DefaultRecordSteps(), "none", 0,
			[]win{{"setup", -1, -1, w0}, {"warmup", 0, 2, w0}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o := testOptions(t, fakeTorchEnv(t))
			o.RecordSteps, o.Stacks, o.WindowBudget = tt.record, tt.stacks, tt.budget
			rk := trainRank(t, o, py, tt.steps, tt.mode)
			// the fields of process.json this mode adds
			var proc struct {
				History struct {
					Mode string `json:"mode"`
				} `json:"history"`
				StackWindows []struct {
					Reason    string `json:"reason"`
					FirstStep int    `json:"first_step"`
					LastStep  int    `json:"last_step"`
					Snapshot  string `json:"snapshot"`
				} `json:"stack_windows"`
				Snapshots []string `json:"snapshots"`
			}
			raw, err := os.ReadFile(filepath.Join(rk.Dir, "process.json"))
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(raw, &proc); err != nil {
				t.Fatal(err)
			}
			if proc.History.Mode != "windows" {
				t.Errorf("history mode %q", proc.History.Mode)
			}
			var got []win
			for _, w := range proc.StackWindows {
				got = append(got, win{w.Reason, w.FirstStep, w.LastStep, w.Snapshot})
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("windows\n got %v\nwant %v", got, tt.want)
			}
			// every window's snapshot was written, and holds exactly the
			// steps of its windows (by their ptscope:step#N ranges), with
			// a stack on every allocation when stacks are on
			steps := map[string][]int{}
			for _, w := range tt.want {
				for s := max(w.First, 0); s <= w.Last; s++ {
					steps[w.Snapshot] = append(steps[w.Snapshot], s)
				}
			}
			listed := map[string]bool{}
			for _, s := range proc.Snapshots {
				listed[s] = true
			}
			for name, want := range steps {
				if !listed[name] {
					t.Errorf("%s not in process.json's snapshots %v", name, proc.Snapshots)
					continue
				}
				var facts struct {
					Steps    []int `json:"steps"`
					Allocs   int   `json:"allocs"`
					Unframed int   `json:"unframed"`
				}
				snapshotFacts(t, py, filepath.Join(rk.Dir, name), `
steps = [int(a["name"][len("ptscope:step#"):]) for a in s["external_annotations"] if a["name"].startswith("ptscope:step#") and a["stage"] == "START"]
allocs = [e for e in s["device_traces"][0] if e["action"] == "alloc"]
print(json.dumps({"steps": steps, "allocs": len(allocs), "unframed": sum(1 for e in allocs if not e.get("frames"))}))
`, &facts)
				if !reflect.DeepEqual(facts.Steps, want) || facts.Allocs == 0 {
					t.Errorf("%s: steps %v (want %v), %d allocations", name, facts.Steps, want, facts.Allocs)
				}
				if stacked := tt.stacks != "none"; stacked != (facts.Unframed == 0) {
					t.Errorf("%s: %d of %d allocations without a stack (stacks %s)", name, facts.Unframed, facts.Allocs, tt.stacks)
				}
			}
			// the end snapshot: a trace only when a window was open, and
			// the history was disabled after each saved window
			var endFacts struct {
				Entries int   `json:"entries"`
				Calls   []any `json:"calls"`
			}
			snapshotFacts(t, py, filepath.Join(rk.Dir, end), `
print(json.dumps({"entries": len(s["device_traces"][0]), "calls": [c["enabled"] for c in s["fake_history_calls"]]}))
`, &endFacts)
			if (endFacts.Entries > 0) != tt.endHist {
				t.Errorf("end snapshot: %d trace entries", endFacts.Entries)
			}
			saved := map[string]bool{}
			for _, w := range tt.want {
				if w.Snapshot != end {
					saved[w.Snapshot] = true
				}
			}
			var calls []any
			for range saved {
				calls = append(calls, "all", nil)
			}
			if tt.endHist {
				calls = append(calls, "all")
			}
			if !reflect.DeepEqual(endFacts.Calls, calls) {
				t.Errorf("history calls (enabled) %v, want %v", endFacts.Calls, calls)
			}
			// ptscope:* ranges only where they reach a trace: inside the
			// windows (no profiler runs here), 4 per step (the step and its
			// forward, backward and optimizer phases)
			var asked struct {
				Calls map[string]int `json:"companion_calls"`
			}
			if err := json.Unmarshal(raw, &asked); err != nil {
				t.Fatal(err)
			}
			ran := 0
			for _, w := range tt.want {
				for s := max(w.First, 0); s <= w.Last && s < tt.steps; s++ {
					ran++
				}
			}
			if got := asked.Calls["record_function"]; got != 4*ran {
				t.Errorf("%d record_function ranges, want %d (4 in each of %d stacked steps)", got, 4*ran, ran)
			}
			// every phase of a window's step says it recorded stacks
			stacked := map[int]bool{}
			for _, w := range tt.want {
				for s := w.First; s <= w.Last; s++ {
					stacked[s] = tt.stacks != "none"
				}
			}
			for _, p := range rk.Phases {
				if p.Stacks != stacked[p.Step] {
					t.Errorf("step %d %s: stacks %v", p.Step, p.Name, p.Stacks)
				}
			}
		})
	}
}

// A process killed after its windows (SIGKILL: no atexit, so no finish and
// no end snapshot) leaves a process.json written as its last window was
// saved: the history mode and the windows saved so far, each naming its
// snapshot, and no end_time_us (the manifest says it did not finish).
func TestFakeTorchKilledKeepsWindows(t *testing.T) {
	py := needPython(t)
	t.Parallel()
	o := testOptions(t, fakeTorchEnv(t))
	r := runIt(t, o, py, "testdata/faketrain.py", "24", "killed")
	if r.res.Signal != syscall.SIGKILL {
		t.Fatalf("exit %d, signal %v: %s", r.res.ExitCode, r.res.Signal, r.stderr)
	}
	b, err := bundle.ReadBundle(r.res.Dir)
	if err != nil {
		t.Fatal(err)
	}
	rk := b.Ranks[0]
	if !rk.Info.Windowed() || rk.Info.EndTimeUs != 0 {
		t.Fatalf("history %+v, end time %d", rk.Info.History, rk.Info.EndTimeUs)
	}
	// the leak run's windows (TestFakeTorchHistoryWindows "peak"), all saved
	want := []string{"setup -1..-1 snapshot_window0.pickle", "warmup 0..2 snapshot_window0.pickle",
		"peak 7..8 snapshot_window1.pickle", "peak 10..10 snapshot_window2.pickle",
		"peak 14..14 snapshot_window3.pickle", "peak 22..22 snapshot_window4.pickle"}
	var got []string
	for _, w := range rk.Info.StackWindows {
		got = append(got, fmt.Sprintf("%s %d..%d %s", w.Reason, w.FirstStep, w.LastStep, w.Snapshot))
		if _, err := os.Stat(filepath.Join(rk.Dir, w.Snapshot)); err != nil {
			t.Error(err)
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("windows\n got %v\nwant %v", got, want)
	}
	for _, s := range rk.Snapshots {
		if filepath.Base(s) == "snapshot_end.pickle" {
			t.Error("an end snapshot from a killed process")
		}
	}
	// the counters as of the last window, and the phases of every step to
	// it (flushed with process.json; the monitor flushes later ones)
	last := -1
	if len(rk.Phases) > 0 {
		last = rk.Phases[len(rk.Phases)-1].Step
	}
	if rk.Info.MaxAllocatedBytes <= 0 || rk.Info.Steps != 23 || last < 22 {
		t.Errorf("max allocated %d, %d steps, phases to step %d", rk.Info.MaxAllocatedBytes, rk.Info.Steps, last)
	}
	warned := false
	for _, w := range b.Manifest.Warnings {
		warned = warned || strings.Contains(w, "did not finish normally")
	}
	if !warned {
		t.Errorf("manifest warnings %q", b.Manifest.Warnings)
	}
}
