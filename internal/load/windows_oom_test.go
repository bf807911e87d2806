package load

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ptscope/ptscope/internal/bundle"
	"github.com/ptscope/ptscope/internal/finding"
	"github.com/ptscope/ptscope/internal/memory"
	"github.com/ptscope/ptscope/internal/testfixture"
)

func findingOf(r *memory.Result, id string) *finding.Finding {
	for i := range r.Findings {
		if r.Findings[i].ID == id {
			return &r.Findings[i]
		}
	}
	return nil
}

// The real run that died of an OOM outside its windows, when the snapshot
// taken at the error is missing, was never written or cannot be read: the
// view is the window's, and a warning tells of the OOM from the observer's
// record (step 6's forward, 48 MiB asked) and the step to record.
func TestRealWindowedOOMWithoutSnapshot(t *testing.T) {
	for _, tc := range []struct {
		name, err string
		edit      func(t *testing.T, rank string)
	}{
		{"missing", "is missing (snapshot_oom.pickle)", func(t *testing.T, rank string) {
			if err := os.Remove(filepath.Join(rank, "snapshot_oom.pickle")); err != nil {
				t.Fatal(err)
			}
		}},
		{"never written", "could not be written", func(t *testing.T, rank string) {
			if err := os.Remove(filepath.Join(rank, "snapshot_oom.pickle")); err != nil {
				t.Fatal(err)
			}
			testfixture.EditJSON(t, filepath.Join(rank, "process.json"), func(p map[string]any) { p["oom"].(map[string]any)["snapshot"] = nil })
			testfixture.EditJSON(t, filepath.Join(rank, "oom.json"), func(o map[string]any) { o["snapshot"] = nil })
		}},
		{"unreadable", "could not be read: ", func(t *testing.T, rank string) {
			if err := os.WriteFile(filepath.Join(rank, "snapshot_oom.pickle"), []byte("\x80\x04garbage"), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			if err := testfixture.ExtractBundle(testfixture.Testdata(t, "bundles", "windows", "oom.tar.xz"), dir); err != nil {
				t.Fatal(err)
			}
			tc.edit(t, filepath.Join(dir, "rank0"))
			set, err := Snapshots(context.Background(), []string{dir}, SnapshotOptions{})
			if (err != nil) != (tc.name == "unreadable") || set == nil || len(set.Report.Inputs) != 1 {
				t.Fatalf("err %v, set %v", err, set)
			}
			in := set.Report.Inputs[0]
			if len(in.Devices) != 1 || in.Bundle.PeakSnapshot != "snapshot_window0.pickle" {
				t.Fatalf("input %q: %d devices, view %q", in.Error, len(in.Devices), in.Bundle.PeakSnapshot)
			}
			r := in.Devices[0]
			f := findingOf(r, "oom-no-snapshot")
			if len(r.OOMs) != 0 || f == nil {
				t.Fatalf("%d OOMs, findings %v", len(r.OOMs), r.Findings)
			}
			if f.Severity != finding.Warning || !strings.Contains(f.Message, "in the forward of step 6, asking 48.0 MiB under the process's limit of 6.00 GiB") ||
				!strings.Contains(f.Message, "taken at the error "+tc.err) || !strings.Contains(f.Message, "The view is the highest window's, snapshot_window0.pickle.") ||
				!strings.Contains(f.Recommendation, "--record-steps 6 ") || f.At == nil || f.At.Step == nil || r.Steps[*f.At.Step].Name != "step 6" {
				t.Errorf("finding %+v", f)
			}
		})
	}
}

// A program that caught its out-of-memory errors and went on (a phase
// began after the first): the view is the run's peak, in its window, not
// the snapshot taken at the error, which is no input of its own; an info
// finding tells of the errors. One that did not go on is explained from
// the snapshot at the error, as before.
func TestWindowedOOMCaught(t *testing.T) {
	for _, caught := range []bool{true, false} {
		dir := windowedLMSmall(t, func(p map[string]any, phases []map[string]any) {
			at := phases[3]["start_time_us"].(float64) - 1
			if !caught {
				at = p["end_time_us"].(float64)
			}
			p["oom"] = map[string]any{"device": 0, "requested_bytes": 1 << 30, "device_free_bytes": 1 << 29, "time_us": at,
				"step": phases[3]["step"], "phase": "forward", "snapshot": "snapshot_oom.pickle", "count": 3}
			p["snapshots"] = append(p["snapshots"].([]string), "snapshot_oom.pickle")
		})
		testfixture.CopyFile(t, filepath.Join("testdata", "lm_small_bf16_end_state.pickle.xz"), filepath.Join(dir, "rank0", "snapshot_oom.pickle"))
		_, in := oneInput(t, dir)
		r := in.Devices[0]
		f := findingOf(r, "oom-caught")
		if !caught {
			if in.Bundle.PeakSnapshot != "snapshot_oom.pickle" || len(r.OOMs) != 1 || f != nil {
				t.Errorf("died of it: view %q, %d OOMs, finding %v", in.Bundle.PeakSnapshot, len(r.OOMs), f)
			}
			continue
		}
		if in.Bundle.PeakSnapshot != "snapshot_window0.pickle" || len(r.OOMs) != 0 || f == nil {
			t.Fatalf("caught: view %q, %d OOMs, findings %v", in.Bundle.PeakSnapshot, len(r.OOMs), r.Findings)
		}
		if f.Severity != finding.Info || !strings.Contains(f.Message, "ran out of GPU memory 3 times and went on") ||
			!strings.Contains(f.Message, "asking 1.00 GiB with 512 MiB free") || !strings.Contains(f.Message, "snapshot_oom.pickle holds the state at that error") ||
			f.Recommendation != "ptscope analyze "+filepath.Join(dir, "rank0", "snapshot_oom.pickle")+" shows what was alive when it ran out." ||
			f.Numbers["count"] != 3 || r.OOMCount() != 3 || f.At == nil || f.At.Step == nil {
			t.Errorf("finding %+v", f)
		}
		// with nothing else of the run readable, the view falls back to
		// the snapshot at the error, its OOM explained and caught
		for _, n := range []string{"snapshot_window0.pickle", "snapshot_end.pickle"} {
			if err := os.Remove(filepath.Join(dir, "rank0", n)); err != nil {
				t.Fatal(err)
			}
		}
		set, _ := Snapshots(context.Background(), []string{dir}, SnapshotOptions{})
		if in := set.Report.Inputs[0]; len(set.Report.Inputs) != 1 || in.Bundle.PeakSnapshot != "snapshot_oom.pickle" ||
			len(in.Devices) != 1 || len(in.Devices[0].OOMs) != 1 || !in.Devices[0].OOMs[0].Caught {
			t.Errorf("only the OOM snapshot: %d inputs, view %q, %+v", len(set.Report.Inputs), in.Bundle.PeakSnapshot, in.Devices)
		}
	}
}

// The real OOM trainer (history over the run), given one more phase after
// its error as a program that caught it would have: the OOM is explained
// as before, marked caught, and its finding is a warning that says so; the
// end snapshot, with steps after the error, is analysed too.
func TestTrainerOOMCaught(t *testing.T) {
	t.Parallel()
	dir := testfixture.TrainerBundle(t, "oom")
	rank := filepath.Join(dir, "rank0")
	b, err := bundle.ReadBundle(dir)
	if err != nil || b.Ranks[0].OOM == nil || b.Ranks[0].OOM.TimeUs <= 0 {
		t.Fatalf("%v: oom %+v", err, b)
	}
	oomUs := b.Ranks[0].OOM.TimeUs
	f, err := os.OpenFile(filepath.Join(rank, "phases.jsonl"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, `{"phase": "forward", "rank": 0, "step": 7, "start_time_us": %d, "end_time_us": %d}`+"\n", oomUs+1000, oomUs+2000)
	f.Close()

	set, err := Snapshots(context.Background(), []string{dir}, SnapshotOptions{})
	if err != nil || len(set.Report.Inputs) != 2 {
		t.Fatalf("%v: %d inputs, want the OOM and the end snapshots", err, len(set.Report.Inputs))
	}
	var r *memory.Result
	for _, in := range set.Report.Inputs {
		if filepath.Base(in.Path) == "snapshot_oom.pickle" && len(in.Devices) == 1 {
			r = in.Devices[0]
		}
	}
	if r == nil || len(r.OOMs) != 1 || !r.OOMs[0].Caught || r.OOMs[0].Verdict != memory.VerdictCapacity {
		t.Fatalf("OOM snapshot: %+v", r)
	}
	fd := findingOf(r, "oom-capacity")
	if fd == nil || fd.Severity != finding.Warning || !strings.Contains(fd.Message, "The program caught the error and went on") {
		t.Errorf("finding %+v", fd)
	}
	// as recorded, the run died of it: not caught, critical
	tr := analyzeTrainer(t, "oom")
	x := tr.result(t, "snapshot_oom.pickle")
	if x.OOMs[0].Caught || findingOf(x, "oom-capacity").Severity != finding.Critical {
		t.Errorf("died of it: caught %v, %+v", x.OOMs[0].Caught, findingOf(x, "oom-capacity"))
	}
}
