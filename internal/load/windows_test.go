package load

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ptscope/ptscope/internal/memory"
	"github.com/ptscope/ptscope/internal/report"
	"github.com/ptscope/ptscope/internal/report/memreport"
	"github.com/ptscope/ptscope/internal/testfixture"
	"github.com/ptscope/ptscope/internal/units"
)

// windowedLMSmall lays the real lm_small_bf16 bundle out as a run recorded
// in windows: its snapshot, whose history covers the whole run, becomes
// the one window (snapshot_window0.pickle, setup through step 8), and the
// end snapshot is the same file without its trace (the segments at exit,
// testdata/lm_small_bf16_end_state.pickle.xz). edit, when set, may change
// process.json's fields and the phases before they are written.
func windowedLMSmall(t *testing.T, edit func(p map[string]any, phases []map[string]any)) string {
	t.Helper()
	src := testfixture.Testdata(t, "bundles", "lm_small_bf16")
	dir := t.TempDir()
	testfixture.CopyFile(t, filepath.Join(src, "manifest.json"), filepath.Join(dir, "manifest.json"))
	testfixture.CopyFile(t, filepath.Join(src, "rank0", "snapshot_end.pickle"), filepath.Join(dir, "rank0", "snapshot_window0.pickle"))
	testfixture.CopyFile(t, filepath.Join("testdata", "lm_small_bf16_end_state.pickle.xz"), filepath.Join(dir, "rank0", "snapshot_end.pickle"))
	var p map[string]any
	data, err := os.ReadFile(filepath.Join(src, "rank0", "process.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &p); err != nil {
		t.Fatal(err)
	}
	p["traces"] = []string{}
	p["snapshots"] = []string{"snapshot_window0.pickle", "snapshot_end.pickle"}
	p["history"] = map[string]any{"context": "alloc", "record_steps": "auto", "switchable": true, "mode": "windows"}
	p["stack_windows"] = []map[string]any{{"first_step": -1, "last_step": 8, "reason": "setup", "start_time_us": p["start_time_us"],
		"end_time_us": p["end_time_us"], "snapshot": "snapshot_window0.pickle"}}
	data, err = os.ReadFile(filepath.Join(src, "rank0", "phases.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var phases []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var ph map[string]any
		if err := json.Unmarshal([]byte(line), &ph); err != nil {
			t.Fatal(err)
		}
		phases = append(phases, ph)
	}
	if edit != nil {
		edit(p, phases)
	}
	out, _ := json.Marshal(p)
	copyText := func(name string, text []byte) {
		if err := os.WriteFile(filepath.Join(dir, "rank0", name), text, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	copyText("process.json", out)
	var b strings.Builder
	for _, ph := range phases {
		line, _ := json.Marshal(ph)
		b.Write(line)
		b.WriteByte('\n')
	}
	copyText("phases.jsonl", []byte(b.String()))
	return dir
}

// A rank whose history was recorded in windows is one input: the view at
// the peak from the window, the steps from every phase, the end state
// from the end snapshot (65 MiB allocated at exit), the windows listed.
func TestWindowedRankIsOneRun(t *testing.T) {
	t.Parallel()
	dir := windowedLMSmall(t, nil)
	set, err := Snapshots(context.Background(), []string{dir}, SnapshotOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(set.Report.Inputs) != 1 || len(set.Inputs) != 1 {
		t.Fatalf("%d inputs", len(set.Report.Inputs))
	}
	in := set.Report.Inputs[0]
	if in.Path != filepath.Join(dir, "rank0") || in.Error != "" || len(in.Devices) != 1 || in.Bundle == nil ||
		in.Bundle.HistoryMode != "windows" || in.Bundle.PeakSnapshot != "snapshot_window0.pickle" {
		t.Fatalf("input %s %q, %d devices, bundle %+v", in.Path, in.Error, len(in.Devices), in.Bundle)
	}
	r := in.Devices[0]
	// the window's replay peak is the process's own (phases.jsonl)
	const peak = 5673316352
	if r.Peak.AllocatedBytes != peak || r.Peak.ProcessMaxAllocatedBytes != peak {
		t.Errorf("peak %d, process max %d, want %d", r.Peak.AllocatedBytes, r.Peak.ProcessMaxAllocatedBytes, peak)
	}
	if r.End.AllocatedBytes != 68157440 || r.Fragmentation.AllocatedBytes != 68157440 {
		t.Errorf("end %+v, fragmentation allocated %d", r.End, r.Fragmentation.AllocatedBytes)
	}
	if r.StepSource != memory.StepsPtscopeStep || len(r.Steps) != 9 || r.Steps[0].Name != "step 0" || r.Steps[8].Name != "step 8" {
		t.Fatalf("steps from %s: %d", r.StepSource, len(r.Steps))
	}
	for i, st := range r.Steps {
		// every step ended with the same tensors but the first (AdamW's
		// state made in it): the phases' allocated_after_bytes
		want := int64(2489616384)
		if i == 0 {
			want = 2489853440
		}
		if st.Index != i || st.Partial || st.EndAllocatedBytes != want || st.PeakAllocatedBytes <= st.EndAllocatedBytes {
			t.Errorf("step %d: %+v", i, st)
		}
	}
	if r.Pattern != memory.PatternStable || r.Leak != nil {
		t.Errorf("pattern %s", r.Pattern)
	}
	if r.Peak.Step < 0 || r.Steps[r.Peak.Step].Name != "step 1" {
		t.Errorf("peak in step %d", r.Peak.Step)
	}
	for _, f := range r.Findings {
		if f.ID == "peak-outside-windows" || f.ID == "peak-not-in-trace" {
			t.Errorf("finding %s: %s", f.ID, f.Message)
		}
	}
	if len(in.StackWindows) != 1 {
		t.Fatalf("windows %+v", in.StackWindows)
	}
	w := in.StackWindows[0]
	if w.FirstStep != -1 || w.LastStep != 8 || w.Reason != "setup" || w.Snapshot != "snapshot_window0.pickle" || !w.View ||
		w.Entries != r.Entries || w.PeakAllocatedBytes != peak || w.StartNS != 1795277965439850000 {
		t.Errorf("window %+v", w)
	}
	if len(in.Phases) != 27 {
		t.Errorf("%d phase rows", len(in.Phases))
	}
	m := set.Inputs[0]
	if m.Snapshot == nil || len(m.Devices) != 1 || m.Devices[0].Result != r || m.Rank == nil {
		t.Error("the model is not the analysis behind the result")
	}
}

// When the run's peak is above every window's (torch's counters rose in a
// step no window recorded), a warning says so with both numbers and the
// step, and recommends recording that step.
func TestWindowedPeakOutsideWindows(t *testing.T) {
	t.Parallel()
	const higher = 6 << 30
	dir := windowedLMSmall(t, func(p map[string]any, phases []map[string]any) {
		for _, ph := range phases {
			if ph["step"].(float64) == 5 && ph["phase"] == "backward" {
				ph["max_allocated_after_bytes"] = higher
			} else if ph["step"].(float64) > 5 || ph["step"].(float64) == 5 && ph["phase"] == "optimizer" {
				ph["max_allocated_before_bytes"], ph["max_allocated_after_bytes"] = higher, higher
			}
		}
	})
	set, err := Snapshots(context.Background(), []string{dir}, SnapshotOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r := set.Report.Inputs[0].Devices[0]
	if r.Peak.ProcessMaxAllocatedBytes != higher || r.Steps[5].PeakAllocatedBytes != higher || r.Steps[5].PeakLowerBound {
		t.Errorf("process max %d, step 5 %+v", r.Peak.ProcessMaxAllocatedBytes, r.Steps[5])
	}
	var got string
	for _, f := range r.Findings {
		if f.ID == "peak-outside-windows" {
			got = f.Message + " " + f.Recommendation
			if f.Numbers["step"] != 5 || f.Numbers["process_max_allocated_bytes"] != higher || f.Numbers["allocated_bytes"] != 5673316352 {
				t.Errorf("numbers %v", f.Numbers)
			}
		}
	}
	for _, want := range []string{"6.00 GiB in step 5", "snapshot_window0.pickle", "5.28 GiB", "--record-steps 5"} {
		if !strings.Contains(got, want) {
			t.Errorf("finding %q lacks %q", got, want)
		}
	}
}

// oneInput reads path, which must hold one input.
func oneInput(t *testing.T, path string) (*SnapshotSet, *memory.Input) {
	t.Helper()
	set, err := Snapshots(context.Background(), []string{path}, SnapshotOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(set.Report.Inputs) != 1 {
		t.Fatalf("%s: %d inputs", path, len(set.Report.Inputs))
	}
	return set, set.Report.Inputs[0]
}

// realWindowed extracts testdata/bundles/windows/name.tar.xz and reads it.
func realWindowed(t *testing.T, name string) (*memory.Input, *memory.Result, testfixture.Facts, string) {
	t.Helper()
	dir := t.TempDir()
	if err := testfixture.ExtractBundle(testfixture.Testdata(t, "bundles", "windows", name+".tar.xz"), dir); err != nil {
		t.Fatal(err)
	}
	set, in := oneInput(t, dir)
	if in.Error != "" || len(in.Devices) != 1 || in.Bundle == nil || in.Bundle.HistoryMode != "windows" || in.Bundle.Unfinished || in.Path != filepath.Join(dir, "rank0") {
		t.Fatalf("input %s %q, %d devices, bundle %+v", in.Path, in.Error, len(in.Devices), in.Bundle)
	}
	if m := set.Inputs[0]; m.Snapshot == nil || len(m.Devices) != 1 || m.Devices[0].Result != in.Devices[0] {
		t.Error("the model is not the analysis behind the result")
	}
	return in, in.Devices[0], testfixture.ReadFacts(t, dir), dir
}

func hasFinding(r *memory.Result, id string) bool { return findingOf(r, id) != nil }

// Real runs recorded in windows, read as one run and checked against what
// their processes measured: every optimizer step a full step from the
// phases, the run's peak torch's own, the windows as process.json lists
// them, and the peak view from the window (or OOM snapshot) that holds the
// highest peak.
func TestRealWindowedRuns(t *testing.T) {
	type win struct {
		first, last  int
		reason, snap string
	}
	w0 := "snapshot_window0.pickle"
	warm := []win{{-1, -1, "setup", w0}, {0, 2, "warmup", w0}}
	for _, tc := range []struct {
		name    string
		windows []win
		view    string
		outside bool // the run peaked outside every window
	}{
		{"lightning_roots", warm, w0, false},
		{"leak", append(append([]win{}, warm...), win{3, 4, "peak", w0}, win{6, 6, "peak", "snapshot_window1.pickle"},
			win{10, 10, "peak", "snapshot_window2.pickle"}, win{18, 18, "peak", "snapshot_window3.pickle"}), "snapshot_window3.pickle", true},
		{"oom", warm, "snapshot_oom.pickle", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			in, r, facts, _ := realWindowed(t, tc.name)
			full := 0
			for _, st := range r.Steps {
				if !st.Partial {
					full++
				}
			}
			if full != facts.OptimizerSteps || r.StepSource != memory.StepsPtscopeStep {
				t.Errorf("%d full steps from %s, the process made %d optimizer steps", full, r.StepSource, facts.OptimizerSteps)
			}
			if r.Peak.ProcessMaxAllocatedBytes != facts.MaxMemoryAllocated {
				t.Errorf("run peak %d, max_memory_allocated %d", r.Peak.ProcessMaxAllocatedBytes, facts.MaxMemoryAllocated)
			}
			// the most reserved is the run's too (the leak's windows saw
			// 1.28 GiB of its 1.40 GiB), never below the end's
			if r.Peak.ReservedBytes != facts.MaxMemoryReserved || r.End.ReservedBytes > r.Peak.ReservedBytes {
				t.Errorf("most reserved %d (end %d), max_memory_reserved %d", r.Peak.ReservedBytes, r.End.ReservedBytes, facts.MaxMemoryReserved)
			}
			near := float64(r.Peak.AllocatedBytes) >= 0.999*float64(facts.MaxMemoryAllocated) && r.Peak.AllocatedBytes <= facts.MaxMemoryAllocated
			if near == tc.outside || hasFinding(r, "peak-outside-windows") != tc.outside {
				t.Errorf("peak view %d, run %d, peak-outside-windows %v", r.Peak.AllocatedBytes, facts.MaxMemoryAllocated, hasFinding(r, "peak-outside-windows"))
			}
			if in.Bundle.PeakSnapshot != tc.view {
				t.Errorf("peak view from %s, want %s", in.Bundle.PeakSnapshot, tc.view)
			}
			var got []win
			for _, w := range in.StackWindows {
				got = append(got, win{w.FirstStep, w.LastStep, w.Reason, w.Snapshot})
				if w.View != (w.Snapshot == tc.view) || w.Entries <= 0 || w.PeakAllocatedBytes <= 0 || w.PeakAllocatedBytes > facts.MaxMemoryAllocated {
					t.Errorf("window %+v", w)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.windows) {
				t.Errorf("windows %v\nwant %v", got, tc.windows)
			}
			if facts.LeakedBytesPerStep == 0 && r.Pattern == memory.PatternLeak {
				t.Errorf("pattern leak: %+v", r.Leak)
			}
			if hasFinding(r, "peak-not-in-trace") {
				t.Error("peak-not-in-trace on a run read from its windows")
			}
		})
	}
}

// The leak trainer keeps its logits, 32,768,000 bytes a step: the counters
// of every step measure it within 1%, and the windows name its stack (with
// the user's frame): the logits that windows 6 and 10 left behind and the
// next window still held. Its run peaks at the last step, after the last
// window (18): the warning names the step and how to record it.
func TestRealWindowedLeak(t *testing.T) {
	t.Parallel()
	_, r, facts, _ := realWindowed(t, "leak")
	if r.Pattern != memory.PatternLeak || r.Leak == nil {
		t.Fatalf("pattern %s", r.Pattern)
	}
	per := facts.LeakedBytesPerStep
	if e := float64(r.Leak.PerStepBytes)/float64(per) - 1; e > 0.01 || e < -0.01 || r.Leak.Steps != facts.OptimizerSteps {
		t.Errorf("%d bytes per step over %d steps, the process kept %d a step (%+.2f%%)", r.Leak.PerStepBytes, r.Leak.Steps, per, 100*e)
	}
	if len(r.Leak.Stacks) == 0 {
		t.Fatal("no leak stack")
	}
	top := r.Leak.Stacks[0]
	if top.UserFrame < 0 || len(top.Frames) == 0 || top.Bytes != 2*per || top.Count != 2 || top.Category == memory.CatOptimizerState {
		t.Errorf("first leak stack: %d bytes in %d allocations, %s, user frame %d (%s)", top.Bytes, top.Count, top.Category, top.UserFrame, top.Source)
	}
	for _, f := range r.Findings {
		if f.ID == "peak-outside-windows" {
			if f.Numbers["step"] != 23 || !strings.Contains(f.Recommendation, "--record-steps 23") {
				t.Errorf("%s %v: %s", f.Message, f.Numbers, f.Recommendation)
			}
		}
	}
	// the steps the counters saw set a new high every step: exact peaks
	for _, st := range r.Steps {
		if st.PeakLowerBound {
			t.Errorf("%s: peak only a lower bound", st.Name)
		}
	}
	if k := r.Peak.ProcessMaxStep; k == nil || r.Steps[*k].Name != "step 23" {
		t.Errorf("the run's peak in step %v", k)
	}
	if last := r.Steps[len(r.Steps)-1]; last.PeakAllocatedBytes != facts.MaxMemoryAllocated {
		t.Errorf("last step peaks at %d, the run at %d", last.PeakAllocatedBytes, facts.MaxMemoryAllocated)
	}
}

// The OOM trainer ran out of memory at step 6 outside every window, under
// a 6 GiB per-process limit: its OOM snapshot holds no trace, so the OOM
// is explained from the observer's record and the state at the error,
// capacity under the process's limit, as when the trace holds the error.
func TestRealWindowedOOM(t *testing.T) {
	t.Parallel()
	_, r, facts, dir := realWindowed(t, "oom")
	if len(r.OOMs) != 1 {
		t.Fatalf("%d OOMs", len(r.OOMs))
	}
	x := r.OOMs[0]
	if x.Verdict != memory.VerdictCapacity || !x.Limited || x.AllowedBytes != facts.MemoryCapBytes || x.RequestedBytes != 48<<20 ||
		x.AllocatedBytes != facts.MaxMemoryAllocated || x.Step < 0 || r.Steps[x.Step].Name != "step 6" || x.Phase != memory.PhaseForward {
		t.Errorf("oom %+v", x)
	}
	if !hasFinding(r, "oom-capacity") || !hasFinding(r, "no-history") {
		t.Errorf("findings %v", r.Findings)
	}
	checkOOMPhaseStart(t, x, filepath.Join(dir, "rank0"), facts.OOMStep)
	for _, f := range r.Findings {
		if f.ID == "no-history" && !strings.Contains(f.Recommendation, "--record-steps 6") {
			t.Errorf("no-history: %s", f.Recommendation)
		}
	}
	// the inventory taken at the error names the parameters' modules in
	// the state without a trace (not the one taken later, at exit)
	var wte bool
	for _, ta := range r.TopAllocations {
		wte = wte || ta.Module == "wte" && ta.Category == memory.CatParameter && ta.Bytes == 25165824
	}
	if !wte {
		t.Error("the embedding's 25,165,824 B parameter is not labelled wte")
	}
}

// A process.json or phases.jsonl that contradicts the files (windows that
// name missing or foreign files, steps out of order or negative, a window
// with no snapshot, none listed) still reads as one run, without a panic;
// a window snapshot no window names is an input of its own.
func TestWindowedOddRecords(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(p map[string]any, phases []map[string]any)
	}{
		{"missing and foreign snapshots", func(p map[string]any, _ []map[string]any) {
			p["stack_windows"] = []map[string]any{{"first_step": 5, "last_step": 2, "reason": "peak", "snapshot": "../manifest.json"},
				{"first_step": -7, "last_step": -7, "reason": "setup", "snapshot": "snapshot_window9.pickle"},
				{"first_step": 1, "last_step": 1, "reason": "periodic"}}
		}},
		{"no windows", func(p map[string]any, _ []map[string]any) { p["stack_windows"] = nil }},
		{"odd steps", func(_ map[string]any, phases []map[string]any) {
			for i, ph := range phases {
				ph["step"] = []int{-3, 1 << 40, 2, 2, -1}[i%5]
				ph["end_time_us"] = 0
			}
		}},
		{"an OOM record without its snapshot", func(p map[string]any, _ []map[string]any) {
			p["oom"] = map[string]any{"requested_bytes": 1 << 30, "step": 99, "phase": "nonsense", "snapshot": "snapshot_oom.pickle"}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := windowedLMSmall(t, tc.edit)
			set, _ := Snapshots(context.Background(), []string{dir}, SnapshotOptions{})
			if set == nil || len(set.Report.Inputs) == 0 {
				t.Fatal("no input")
			}
			in := set.Report.Inputs[0]
			if in.Bundle == nil || in.Bundle.HistoryMode != "windows" {
				t.Fatalf("input %+v", in)
			}
			var b strings.Builder
			err := memreport.WriteText(&b, set.Report, report.TextOptions{Width: 100})
			if err != nil || strings.Contains(b.String(), "stack windows: ") != (len(in.StackWindows) > 0) {
				t.Errorf("text: %v\n%s", err, b.String())
			}
		})
	}
}

// A windowed rank's folder named on its own is read as its bundle reads
// it: one run, from its windows, with the same result.
func TestWindowedRankFolder(t *testing.T) {
	t.Parallel()
	_, whole, _, dir := realWindowed(t, "leak")
	_, in := oneInput(t, filepath.Join(dir, "rank0"))
	if len(in.Devices) != 1 || len(in.StackWindows) == 0 {
		t.Fatalf("input %+v", in)
	}
	r := in.Devices[0]
	a, b := r.Peak, whole.Peak
	if a.ProcessMaxStep == nil || b.ProcessMaxStep == nil || *a.ProcessMaxStep != *b.ProcessMaxStep {
		t.Errorf("the run's peak in step %v, the bundle's in %v", a.ProcessMaxStep, b.ProcessMaxStep)
	}
	a.ProcessMaxStep, b.ProcessMaxStep = nil, nil
	if a != b || len(r.Steps) != len(whole.Steps) || r.Pattern != whole.Pattern {
		t.Errorf("rank folder: peak %+v, %d steps, %s; bundle: peak %+v, %d steps, %s",
			r.Peak, len(r.Steps), r.Pattern, whole.Peak, len(whole.Steps), whole.Pattern)
	}
}

// A windowed rank whose process was killed after its last window: no end
// snapshot, and process.json as the companion writes it when it saves a
// window (no end_time_us). It is still one run from its windows and
// phases, and says it had not finished.
func TestWindowedKilledRank(t *testing.T) {
	t.Parallel()
	_, whole, _, dir := realWindowed(t, "leak")
	rank := filepath.Join(dir, "rank0")
	if err := os.Remove(filepath.Join(rank, "snapshot_end.pickle")); err != nil {
		t.Fatal(err)
	}
	var listed []any
	testfixture.EditJSON(t, filepath.Join(rank, "process.json"), func(proc map[string]any) {
		proc["updated_time_us"] = proc["end_time_us"]
		delete(proc, "end_time_us")
		var snaps []any
		for _, s := range proc["snapshots"].([]any) {
			if s != "snapshot_end.pickle" {
				snaps = append(snaps, s)
			}
		}
		proc["snapshots"] = snaps
		listed = proc["stack_windows"].([]any)
	})
	_, in := oneInput(t, dir)
	if in.Bundle == nil || !in.Bundle.Unfinished || in.Bundle.HistoryMode != "windows" || len(in.StackWindows) != 6 || len(in.Devices) != 1 {
		t.Fatalf("input %s: bundle %+v, %d windows", in.Path, in.Bundle, len(in.StackWindows))
	}
	r := in.Devices[0]
	if r.Pattern != memory.PatternLeak || len(r.Steps) != len(whole.Steps) || r.Peak.AllocatedBytes != whole.Peak.AllocatedBytes {
		t.Errorf("pattern %s, %d steps, peak %d; finished: %s, %d steps, peak %d",
			r.Pattern, len(r.Steps), r.Peak.AllocatedBytes, whole.Pattern, len(whole.Steps), whole.Peak.AllocatedBytes)
	}

	// Killed after the last window's snapshot, before process.json listed
	// it: that window is still the run's (step 18, from its trace), not an
	// input of its own, and the run reads as before.
	last := in.StackWindows[len(in.StackWindows)-1]
	testfixture.EditJSON(t, filepath.Join(rank, "process.json"), func(proc map[string]any) {
		var kept []any
		for _, w := range listed {
			if w.(map[string]any)["snapshot"] != last.Snapshot {
				kept = append(kept, w)
			}
		}
		proc["stack_windows"] = kept
	})
	_, in2 := oneInput(t, dir)
	if len(in2.StackWindows) != len(in.StackWindows) || len(in2.Devices) != 1 {
		t.Fatalf("unlisted: %d windows, %d devices", len(in2.StackWindows), len(in2.Devices))
	}
	w := in2.StackWindows[len(in2.StackWindows)-1]
	if w.Reason != "unlisted" || w.Snapshot != last.Snapshot || w.FirstStep != last.FirstStep || w.LastStep != last.LastStep ||
		w.PeakAllocatedBytes != last.PeakAllocatedBytes || w.StartNS <= 0 || w.EndNS < w.StartNS {
		t.Errorf("unlisted window %+v, listed %+v", w, last)
	}
	r2 := in2.Devices[0]
	if r2.Pattern != memory.PatternLeak || r2.Peak.AllocatedBytes != r.Peak.AllocatedBytes || len(r2.Leak.Stacks) != len(r.Leak.Stacks) {
		t.Errorf("unlisted: pattern %s, peak %d, %d leak stacks; listed: %d, %d", r2.Pattern, r2.Peak.AllocatedBytes, len(r2.Leak.Stacks),
			r.Peak.AllocatedBytes, len(r.Leak.Stacks))
	}
}

// checkOOMPhaseStart: the OOM reports what its phase began with, as the
// process recorded it (the aborted forward of the step in phases.jsonl),
// and its finding says what that forward allocated.
func checkOOMPhaseStart(t *testing.T, x memory.OOM, rank string, step int) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(rank, "phases.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var want int64 = -1
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var ph struct {
			Phase  string `json:"phase"`
			Step   int    `json:"step"`
			Before int64  `json:"allocated_before_bytes"`
		}
		if err := json.Unmarshal([]byte(line), &ph); err != nil {
			t.Fatal(err)
		}
		if ph.Phase == "forward" && ph.Step == step {
			want = ph.Before
		}
	}
	if want <= 0 || x.PhaseStartAllocatedBytes != want {
		t.Errorf("the OOM's phase began with %d allocated; the forward of step %d began with %d", x.PhaseStartAllocatedBytes, step, want)
	}
	if got := memory.OOMPhaseGrowth(&x, []memory.StepRow{}); !strings.HasPrefix(got, "The forward allocated "+units.Bytes(x.AllocatedBytes-want)+" of the ") {
		t.Errorf("growth %q", got)
	}
}
