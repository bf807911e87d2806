package web

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ptscope/ptscope/internal/testfixture"
)

// A bundle rank recorded in stack windows is served as one input, the run
// read as one (its folder), not one input per window snapshot: its summary
// has every step of the run and the phase rows of every window.
func TestServeWindowedRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := testfixture.ExtractBundle(filepath.Join(testfixture.Root(t), "testdata", "bundles", "windows", "leak.tar.xz"), dir); err != nil {
		t.Fatal(err)
	}
	s, ts := serveDir(t, dir)
	list := s.set.List()
	if len(list) != 1 || list[0].Path != filepath.Join(dir, "rank0") || list[0].Status != statusReady || len(list[0].Devices) != 1 {
		t.Fatalf("inputs %+v", list)
	}
	code, body := get(t, ts, "/api/v1/mem/summary?input=0&device=0")
	if code != 200 {
		t.Fatalf("summary: %d %s", code, body)
	}
	var sum struct {
		Result struct {
			Pattern string `json:"pattern"`
			Steps   []struct {
				Name       string `json:"name"`
				StartIndex int    `json:"start_index"`
			} `json:"steps"`
			Peak struct {
				ProcessMax int64 `json:"process_max_allocated_bytes"`
			} `json:"peak"`
		} `json:"result"`
		PhaseRows []struct {
			Step      int   `json:"step"`
			PeakBytes int64 `json:"peak_bytes"`
		} `json:"phase_rows"`
	}
	if err := json.Unmarshal(body, &sum); err != nil {
		t.Fatal(err)
	}
	r := sum.Result
	// 24 optimizer steps, 1,450,765,312 B at most (facts.json)
	if r.Pattern != "leak" || len(r.Steps) != 24 || r.Peak.ProcessMax != 1450765312 || len(sum.PhaseRows) != 72 {
		t.Errorf("pattern %s, %d steps, run peak %d, %d phase rows", r.Pattern, len(r.Steps), r.Peak.ProcessMax, len(sum.PhaseRows))
	}
	// the peak view's own steps (window 3: step 18) link into its timeline
	linked := []string{}
	for _, st := range r.Steps {
		if st.StartIndex >= 0 {
			linked = append(linked, st.Name)
		}
	}
	if strings.Join(linked, ",") != "step 18" {
		t.Errorf("steps in the view's trace: %v", linked)
	}
}

// While the run records (manifest status "running", the rank's process.json
// without an end), each saved window is an input of its own, as it appears;
// once the run has ended, the rank is served as one run. A rank whose
// process was killed in a run that ended is one run too.
func TestServeLiveWindowedRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := testfixture.ExtractBundle(filepath.Join(testfixture.Root(t), "testdata", "bundles", "windows", "leak.tar.xz"), dir); err != nil {
		t.Fatal(err)
	}
	// as the companion writes it when it saves a window
	testfixture.EditJSON(t, filepath.Join(dir, "rank0", "process.json"), func(m map[string]any) { m["updated_time_us"] = m["end_time_us"]; delete(m, "end_time_us") })
	for _, tc := range []struct {
		status string
		want   []string
	}{
		{"running", []string{"rank0/snapshot_end.pickle", "rank0/snapshot_window0.pickle", "rank0/snapshot_window1.pickle",
			"rank0/snapshot_window2.pickle", "rank0/snapshot_window3.pickle"}},
		{"finished", []string{"rank0"}},
	} {
		testfixture.EditJSON(t, filepath.Join(dir, "manifest.json"), func(m map[string]any) { m["status"] = tc.status })
		s, _ := serveDir(t, dir)
		var got []string
		for _, in := range s.set.List() {
			rel, _ := filepath.Rel(dir, in.Path)
			got = append(got, filepath.ToSlash(rel))
		}
		if strings.Join(got, " ") != strings.Join(tc.want, " ") {
			t.Errorf("status %s: inputs %v, want %v", tc.status, got, tc.want)
		}
	}
}
