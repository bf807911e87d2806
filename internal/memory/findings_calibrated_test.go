package memory_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/ptscope/ptscope/internal/finding"
	"github.com/ptscope/ptscope/internal/load"
	"github.com/ptscope/ptscope/internal/testfixture"
)

// TestFindingsCalibrated reads every committed trainer bundle, window
// bundle, bundle and snapshot as `ptscope analyze` does: a healthy run gets
// no finding above info, and a run with a problem (a leak, an OOM, fp32
// compute) gets that problem as its first finding. A finding that fires on
// healthy runs teaches users to ignore findings.
func TestFindingsCalibrated(t *testing.T) {
	t.Parallel()
	// the problem runs and the finding that must come first
	problem := map[string]string{
		"trainers/leak": "leak", "trainers/oom": "oom-capacity",
		"windows/leak": "leak", "windows/oom": "oom-capacity",
		"snapshots/leak_gpt2_2l": "leak", "snapshots/oom_capacity": "oom-capacity",
		"snapshots/oom_fragmentation": "oom-fragmentation", "snapshots/oom_lm_xl_forward": "oom-capacity",
		"lm_small_fp32": "fp32-compute",
	}
	inputs := map[string]string{}
	for _, name := range testfixture.TrainerBundles {
		inputs["trainers/"+name] = testfixture.TrainerBundle(t, name)
	}
	windows, _ := filepath.Glob(testfixture.Testdata(t, "bundles", "windows", "*.tar.xz"))
	for _, archive := range windows {
		dir := t.TempDir()
		if err := testfixture.ExtractBundle(archive, dir); err != nil {
			t.Fatal(err)
		}
		inputs["windows/"+strings.TrimSuffix(filepath.Base(archive), ".tar.xz")] = dir
	}
	snaps, _ := filepath.Glob(testfixture.Testdata(t, "snapshots", "*.pickle.xz"))
	for _, p := range snaps {
		inputs["snapshots/"+strings.TrimSuffix(filepath.Base(p), ".pickle.xz")] = p
	}
	lm := testfixture.Testdata(t, "bundles", "lm_small_bf16")
	inputs["lm_small_bf16"] = lm
	inputs["lm_small_fp32"] = fp32Bundle(t, lm)
	if len(inputs) < 20 {
		t.Fatalf("%d inputs: the committed bundles and snapshots were not found", len(inputs))
	}
	names := make([]string, 0, len(inputs))
	for n := range inputs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			set, err := load.Snapshots(context.Background(), []string{inputs[name]}, load.SnapshotOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer set.Close()
			var first *finding.Finding
			var above []string
			for _, in := range set.Report.Inputs {
				for _, d := range in.Devices {
					if first == nil && len(d.Findings) > 0 {
						first = &d.Findings[0]
					}
					for _, f := range d.Findings {
						if f.Severity > finding.Info {
							above = append(above, f.Severity.String()+" "+f.ID+": "+f.Message)
						}
					}
				}
			}
			want, bad := problem[name]
			switch {
			case !bad && len(above) > 0:
				t.Errorf("a healthy run has findings above info:\n%s", strings.Join(above, "\n"))
			case bad && (first == nil || first.ID != want):
				t.Errorf("first finding %+v, want %s", first, want)
			}
		})
	}
}

// fp32Bundle copies the lm_small_bf16 bundle with its precision record
// rewritten to fp32 parameters without autocast (as the fp32 run of
// cli.TestAnalyzeBundlePrecision).
func fp32Bundle(t *testing.T, src string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	testfixture.EditJSON(t, filepath.Join(dir, "rank0", "process.json"), func(m map[string]any) {
		var rec map[string]any
		json.Unmarshal([]byte(`{"parameter_bytes_by_dtype": {"float32": 497759232}, "autocast_cuda": false, "fsdp": false}`), &rec)
		m["precision"] = rec
	})
	return dir
}

// The thresholds hold on the real fixture: 94.9% efficiency at the peak
// with 286 MiB cached (a caching allocator's usual cost) is no finding;
// the fragmentation OOM's 59% with 32 GiB cached is a warning beside its
// OOM.
func TestLowEfficiencyThreshold(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		file string
		sev  string // "": no finding
	}{
		{"gpt2s_train_fp32_b4_ctx512", ""},
		{"oom_fragmentation", "warning"},
	} {
		set, err := load.Snapshots(context.Background(), []string{testfixture.Testdata(t, "snapshots", c.file+".pickle.xz")}, load.SnapshotOptions{})
		if err != nil {
			t.Fatal(err)
		}
		r := set.Report.Inputs[0].Devices[0]
		got := ""
		for _, f := range r.Findings {
			if f.ID == "low-efficiency" {
				got = f.Severity.String()
			}
		}
		if got != c.sev {
			t.Errorf("%s (efficiency %.3f, %d B cached at the peak): low-efficiency %q, want %q", c.file,
				r.Fragmentation.EfficiencyAtPeak, r.Fragmentation.CachedFreeAtPeakBytes, got, c.sev)
		}
		set.Close()
	}
}
