package web

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/ptscope/ptscope/internal/load"
	"github.com/ptscope/ptscope/internal/testfixture"
)

// A bundle's snapshot is served as analyze reads it, with what its rank
// recorded: the real OOM trainer (history over the run) ran out under its
// own 6 GiB limit (set_per_process_memory_fraction, facts.json), which
// only the bundle's OOM record says, and its forward's start only its
// phases; the snapshot read bare would judge against the 80 GiB device.
func TestServeBundleSnapshot(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := testfixture.ExtractTrainerBundle(testfixture.Root(t), "oom", dir); err != nil {
		t.Fatal(err)
	}
	facts := testfixture.ReadFacts(t, dir)
	set, err := load.Snapshots(context.Background(), []string{dir}, load.SnapshotOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{} // path -> what analyze says of its OOMs and categories
	for _, in := range set.Report.Inputs {
		for _, d := range in.Devices {
			b, _ := json.Marshal(struct {
				O, C any
				P    int
			}{d.OOMs, d.Categories, len(in.Phases)})
			want[in.Path] = string(b)
		}
	}
	s, ts := serveDir(t, dir)
	oom := filepath.Join(dir, "rank0", "snapshot_oom.pickle")
	checked := false
	for _, in := range s.inputs.snapshot() {
		if in.Path != oom {
			continue
		}
		code, body := get(t, ts, fmt.Sprintf("/api/v1/mem/summary?input=%d&device=0", in.ID))
		if code != 200 {
			t.Fatalf("summary: %d %s", code, body)
		}
		var sum struct {
			Result struct {
				OOMs       any `json:"ooms"`
				Categories any `json:"categories_at_peak"`
			} `json:"result"`
			PhaseRows []any `json:"phase_rows"`
		}
		if err := json.Unmarshal(body, &sum); err != nil {
			t.Fatal(err)
		}
		var x struct {
			Result struct {
				OOMs []struct {
					Allowed    int64 `json:"allowed_bytes"`
					Limited    bool  `json:"limited"`
					PhaseStart int64 `json:"phase_start_allocated_bytes"`
				} `json:"ooms"`
			} `json:"result"`
		}
		if err := json.Unmarshal(body, &x); err != nil {
			t.Fatal(err)
		}
		if len(x.Result.OOMs) != 1 || !x.Result.OOMs[0].Limited || x.Result.OOMs[0].Allowed != facts.MemoryCapBytes || x.Result.OOMs[0].PhaseStart <= 0 {
			t.Errorf("served OOMs %+v; the process's limit was %d", x.Result.OOMs, facts.MemoryCapBytes)
		}
		b, _ := json.Marshal(struct {
			O, C any
			P    int
		}{sum.Result.OOMs, sum.Result.Categories, len(sum.PhaseRows)})
		var got, exp any
		json.Unmarshal(b, &got)
		json.Unmarshal([]byte(want[oom]), &exp)
		if fmt.Sprint(got) != fmt.Sprint(exp) {
			t.Errorf("served\n%v\nanalyze\n%v", got, exp)
		}
		checked = true
	}
	if !checked {
		t.Fatalf("%s not served", oom)
	}
}
