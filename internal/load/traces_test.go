package load

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ptscope/ptscope/internal/finding"
)

func repo(parts ...string) string {
	return filepath.Join(append([]string{"..", ".."}, parts...)...)
}

// TestTracesBundle: the committed bundle's trace gets the rank's phases:
// the profiled steps are compared with the run's unprofiled ones.
func TestTracesBundle(t *testing.T) {
	for _, in := range []string{repo("testdata", "bundles", "lm_small_bf16"), repo("testdata", "bundles", "lm_small_bf16", "rank0", "trace_step4.pt.trace.json.gz")} {
		set, err := Traces(context.Background(), []string{in}, TraceOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(set.Report.Ranks) != 1 || len(set.Models) != 1 || set.Models[0] != nil {
			t.Fatalf("%s: %d ranks, models %v", in, len(set.Report.Ranks), set.Models)
		}
		r := set.Report.Ranks[0]
		o := r.Overhead
		// phases.jsonl: steps 4..7 run after the trace was exported, each
		// from its forward's start to the next one's: 39.306, 41.557, 38.844
		// and 40.353 ms
		if o == nil || fmt.Sprint(o.UnprofiledSteps) != "[4 5 6 7]" {
			t.Fatalf("%s: overhead %+v", in, o)
		}
		if o.UnprofiledStepNS != (39_306_000+40_353_000)/2 || o.ProfiledStepNS != r.AverageStepNS {
			t.Errorf("unprofiled median %d, profiled %d (average %d)", o.UnprofiledStepNS, o.ProfiledStepNS, r.AverageStepNS)
		}
		if want := float64(r.AverageStepNS)/float64(o.UnprofiledStepNS) - 1; math.Abs(o.SlowdownRatio-want) > 1e-12 || o.SlowdownRatio < 0.5 {
			t.Errorf("slowdown %.3f", o.SlowdownRatio)
		}
		var f *finding.Finding
		for i := range r.Findings {
			if r.Findings[i].ID == "profiling-overhead" {
				f = &r.Findings[i]
			}
		}
		if f == nil || f.Severity != finding.Warning || f.Numbers["slowdown_ratio"] != o.SlowdownRatio {
			t.Errorf("finding %+v", f)
		}
	}
}

// TestTracesModels: with KeepModels the models come back in the report's
// rank order.
func TestTracesModels(t *testing.T) {
	set, err := Traces(context.Background(), []string{repo("testdata", "traces", "fsdp")}, TraceOptions{KeepModels: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(set.Report.Ranks) != 2 || len(set.Models) != 2 {
		t.Fatalf("%d ranks, %d models", len(set.Report.Ranks), len(set.Models))
	}
	for i, r := range set.Report.Ranks {
		m := set.Models[i]
		if m == nil || m.Path != r.Path || m.Rank() != r.Rank {
			t.Errorf("rank %d (%s): model %v", r.Rank, r.Path, m)
		}
	}
	if set.Report.CrossRank == nil || set.Report.Command != "trace" || set.Report.SchemaVersion != 2 {
		t.Errorf("report %+v", set.Report.Header)
	}
}

func TestTracesErrors(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "e.pt.trace.json")
	os.WriteFile(empty, nil, 0o644)
	snap := repo("testdata", "snapshots", "oom_capacity.pickle.xz")
	for _, c := range []struct {
		paths []string
		want  string
	}{
		{[]string{empty}, "e.pt.trace.json: offset 0: empty file"},
		{[]string{filepath.Join(dir, "none")}, "none"},
		{[]string{dir}, "no Kineto trace found"},
		{[]string{snap}, "not a Kineto trace"},
	} {
		if c.paths[0] == dir {
			os.Remove(empty)
		}
		_, err := Traces(context.Background(), c.paths, TraceOptions{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.paths, err, c.want)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Traces(ctx, []string{repo("testdata", "traces", "fsdp")}, TraceOptions{}); err == nil {
		t.Error("cancelled context: no error")
	}
}
