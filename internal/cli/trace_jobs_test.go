package cli

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// TestTraceSeparateRuns: two rank-0 traces of different runs (4-rank DDP
// and FSDP2 jobs recorded on 4 H100s) given to one `trace` command are two
// jobs with a warning, in the text and in --json, and never compared as
// ranks of one job (no cross-rank table, no straggler).
func TestTraceSeparateRuns(t *testing.T) {
	t.Parallel()
	real := filepath.Join("..", "..", "testdata", "peers", "real")
	ddp := filepath.Join(real, "ddp", "rank0.1795802743110009081.pt.trace.json.gz")
	fsdp := filepath.Join(real, "fsdp2_slow0", "rank0.1795802810039621532.pt.trace.json.gz")
	const warn = "the 2 traces are 2 separate runs, not ranks of one job (rank 0 twice)"

	code, out, errs := run(t, "trace", ddp, fsdp)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(errs, warn) {
		t.Errorf("stderr lacks the warning: %q", errs)
	}
	if strings.Contains(out, "straggler") || strings.Contains(out, "Across ranks") {
		t.Errorf("the two runs were compared as ranks:\n%s", out)
	}

	code, out, errs = run(t, "trace", "--json", ddp, fsdp)
	if code != 0 {
		t.Fatalf("--json: exit %d: %s", code, errs)
	}
	var rep struct {
		Ranks []struct {
			Path      string `json:"path"`
			Rank      int    `json:"rank"`
			WorldSize int    `json:"world_size"`
		} `json:"ranks"`
		Jobs []struct {
			Traces    []int           `json:"traces"`
			CrossRank json.RawMessage `json:"cross_rank"`
		} `json:"jobs"`
		CrossRank json.RawMessage `json:"cross_rank"`
		Warnings  []string        `json:"warnings"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Ranks) != 2 || len(rep.Jobs) != 2 || rep.CrossRank != nil || len(rep.Warnings) != 1 || !strings.Contains(rep.Warnings[0], warn) {
		t.Fatalf("ranks %+v, jobs %+v, cross_rank %s, warnings %q", rep.Ranks, rep.Jobs, rep.CrossRank, rep.Warnings)
	}
	for k, j := range rep.Jobs {
		if len(j.Traces) != 1 || j.CrossRank != nil {
			t.Errorf("job %d: traces %v, cross_rank %s", k, j.Traces, j.CrossRank)
		}
	}
	for _, r := range rep.Ranks {
		if r.Rank != 0 || r.WorldSize != 4 {
			t.Errorf("%s: rank %d of %d", r.Path, r.Rank, r.WorldSize)
		}
	}
}
