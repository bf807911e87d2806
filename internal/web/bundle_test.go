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
	want := map[string]string{} // path -> what analyze says of its OOMs, categories and phases
	for _, in := range set.Report.Inputs {
		for _, d := range in.Devices {
			o, _ := json.Marshal(d.OOMs)
			c, _ := json.Marshal(d.Categories)
			want[in.Path] = analysed(o, c, len(in.Phases))
		}
	}
	s, ts := serveDir(t, dir)
	oom := filepath.Join(dir, "rank0", "snapshot_oom.pickle")
	checked := false
	for _, in := range s.set.List() {
		if in.Path != oom {
			continue
		}
		code, body := get(t, ts, fmt.Sprintf("/api/v1/mem/summary?input=%d&device=0", in.ID))
		if code != 200 {
			t.Fatalf("summary: %d %s", code, body)
		}
		var sum struct {
			Result struct {
				OOMs       json.RawMessage `json:"ooms"`
				Categories json.RawMessage `json:"categories_at_peak"`
			} `json:"result"`
			PhaseRows []json.RawMessage `json:"phase_rows"`
		}
		var ooms []struct {
			Allowed    int64 `json:"allowed_bytes"`
			Limited    bool  `json:"limited"`
			PhaseStart int64 `json:"phase_start_allocated_bytes"`
		}
		if err := json.Unmarshal(body, &sum); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(sum.Result.OOMs, &ooms); err != nil {
			t.Fatal(err)
		}
		if len(ooms) != 1 || !ooms[0].Limited || ooms[0].Allowed != facts.MemoryCapBytes || ooms[0].PhaseStart <= 0 {
			t.Errorf("served OOMs %+v; the process's limit was %d", ooms, facts.MemoryCapBytes)
		}
		if got := analysed(sum.Result.OOMs, sum.Result.Categories, len(sum.PhaseRows)); got != want[oom] {
			t.Errorf("served\n%s\nanalyze\n%s", got, want[oom])
		}
		checked = true
	}
	if !checked {
		t.Fatalf("%s not served", oom)
	}
}

// analysed is a comparable form of a result's OOMs and categories (JSON)
// and its number of phase rows.
func analysed(ooms, categories []byte, phases int) string {
	var o, c any
	json.Unmarshal(ooms, &o)
	json.Unmarshal(categories, &c)
	return fmt.Sprint(o, c, phases)
}
