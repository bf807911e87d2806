package cli

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// TestCheckTraceThresholds: check --max-dataloader uses the DataLoader share
// that trace reports (breakdown = phases), on committed traces.
func TestCheckTraceThresholds(t *testing.T) {
	dl := synthTrace("dataloader.pt.trace.json.gz")
	_, js, _ := traceRun(t, "--json", dl)
	var doc struct {
		Ranks []struct {
			DataLoaderRatio     float64 `json:"dataloader_ratio"`
			GPUUtilizationRatio float64 `json:"gpu_utilization_ratio"`
			AverageBreakdown    struct {
				DataLoaderNS int64 `json:"dataloader_ns"`
			} `json:"average_breakdown"`
			AveragePhases struct {
				DataLoadingNS int64 `json:"data_loading_ns"`
			} `json:"average_phases"`
		} `json:"ranks"`
	}
	if err := json.Unmarshal([]byte(js), &doc); err != nil || len(doc.Ranks) != 1 {
		t.Fatalf("%v %s", err, js)
	}
	r := doc.Ranks[0]
	if r.AverageBreakdown.DataLoaderNS != r.AveragePhases.DataLoadingNS || r.DataLoaderRatio < 0.2 {
		t.Fatalf("DataLoader %d in the breakdown, %d in the phases, share %.3f", r.AverageBreakdown.DataLoaderNS, r.AveragePhases.DataLoadingNS, r.DataLoaderRatio)
	}
	share := fmt.Sprintf("DataLoader %.1f%% of the step", 100*r.DataLoaderRatio)
	for _, c := range []struct {
		args []string
		code int
	}{
		{[]string{"--max-dataloader", fmt.Sprintf("%.4f", r.DataLoaderRatio-0.001)}, 1},
		{[]string{"--max-dataloader", fmt.Sprintf("%.4f", r.DataLoaderRatio+0.001)}, 0},
		{[]string{"--min-gpu-util", fmt.Sprintf("%.4f", r.GPUUtilizationRatio+0.001)}, 1},
		{[]string{"--min-gpu-util", fmt.Sprintf("%.4f", r.GPUUtilizationRatio-0.001)}, 0},
		{[]string{"--max-dataloader", "bogus"}, 2},
	} {
		code, out, errs := run(t, append(append([]string{"check"}, c.args...), dl)...)
		if code != c.code {
			t.Errorf("%v: exit %d, want %d: %s%s", c.args, code, c.code, out, errs)
		}
		if c.code != 2 && !strings.Contains(out, share) {
			t.Errorf("%v: the share trace reports (%s) is not what check says:\n%s", c.args, share, out)
		}
	}
	// a folder of two ranks: one line per rank
	code, out, _ := run(t, "check", "--min-gpu-util", "10%", synthTrace("fsdp"))
	if code != 0 || strings.Count(out, "GPU utilization") != 2 {
		t.Errorf("fsdp ranks: exit %d\n%s", code, out)
	}
}
