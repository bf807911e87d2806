package web

import (
	"bufio"
	"bytes"
	"encoding/json"
	"math"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ptscope/ptscope/internal/diff"
	"github.com/ptscope/ptscope/internal/load"
	"github.com/ptscope/ptscope/internal/report/diffreport"
	"github.com/ptscope/ptscope/internal/testfixture"
	"github.com/ptscope/ptscope/internal/units"
	"github.com/ptscope/ptscope/internal/web/view"
)

// diffServer serves two committed real snapshots (inputs 0 and 1) and a
// small trace (input 2).
func diffServer(t *testing.T) (*httptest.Server, string, func(string) (int, []byte)) {
	t.Helper()
	dir := t.TempDir()
	snaps := filepath.Join(testfixture.Root(t), "testdata", "snapshots")
	link(t, filepath.Join(snaps, "validate_gpt2tiny_fp32.pickle.xz"), filepath.Join(dir, "a_base.pickle.xz"))
	link(t, filepath.Join(snaps, "leak_gpt2_2l.pickle.xz"), filepath.Join(dir, "b_leak.pickle.xz"))
	if err := os.WriteFile(filepath.Join(dir, "c_trace.json"), []byte(smallTrace), 0o644); err != nil {
		t.Fatal(err)
	}
	_, ts := serveDir(t, dir)
	return ts, dir, func(path string) (int, []byte) { return get(t, ts, path) }
}

// fact is one line of testdata/snapshots/facts.jsonl: what torch measured.
type fact struct {
	File         string `json:"file"`
	MaxAllocated int64  `json:"max_memory_allocated"`
}

func facts(t *testing.T) map[string]fact {
	t.Helper()
	f, err := os.Open(filepath.Join(testfixture.Root(t), "testdata", "snapshots", "facts.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]fact{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var x fact
		if err := json.Unmarshal(sc.Bytes(), &x); err != nil {
			t.Fatal(err)
		}
		out[x.File] = x
	}
	return out
}

// TestDiffRoute: /api/v1/diff on two real snapshots reports each side's
// peak within 1% of what torch measured and the delta between them, and
// its HTML is the section code of `ptscope diff --html` on the same files.
func TestDiffRoute(t *testing.T) {
	t.Parallel()
	_, dir, get := diffServer(t)
	code, body := get("/api/v1/diff?a=0&b=1")
	if code != 200 {
		t.Fatalf("diff: %d %s", code, body)
	}
	var d view.DiffOut
	if err := json.Unmarshal(body, &d); err != nil {
		t.Fatal(err)
	}
	if d.A != 0 || d.B != 1 || d.Report == nil || len(d.Report.Memory) != 1 || len(d.Report.Trace) != 0 {
		t.Fatalf("diff of two snapshots: %.400s", body)
	}
	fs := facts(t)
	m := d.Report.Memory[0]
	for _, c := range []struct {
		side string
		got  int64
		file string
	}{{"A", m.PeakAllocated.A, "validate_gpt2tiny_fp32.pickle.xz"}, {"B", m.PeakAllocated.B, "leak_gpt2_2l.pickle.xz"}} {
		want := fs[c.file].MaxAllocated
		if want == 0 || math.Abs(float64(c.got-want)) > 0.01*float64(want) {
			t.Errorf("peak %s = %d, torch measured %d", c.side, c.got, want)
		}
	}
	if m.PeakAllocated.Delta != m.PeakAllocated.B-m.PeakAllocated.A || m.PeakAllocated.Delta >= 0 {
		t.Errorf("peak delta %d (A %d, B %d): the leak run's peak is the lower", m.PeakAllocated.Delta, m.PeakAllocated.A, m.PeakAllocated.B)
	}
	// the page shows both peaks and the change in the peak row
	row := ""
	for _, r := range strings.Split(d.HTML, "<tr>") {
		if strings.HasPrefix(r, "<td>peak allocated</td>") {
			row = r
		}
	}
	for _, v := range []string{units.Bytes(m.PeakAllocated.A), units.Bytes(m.PeakAllocated.B), strings.TrimPrefix(units.Bytes(m.PeakAllocated.Delta), "-")} {
		if !strings.Contains(row, v) {
			t.Errorf("peak allocated row %q lacks %q", row, v)
		}
	}
	if strings.Contains(d.HTML, "<script") || strings.Contains(d.HTML, "<html") {
		t.Errorf("the fragment is a page or holds a script: %.200s", d.HTML)
	}

	// the same comparison as the CLI's: load both files afresh, compare,
	// and the served sections are the --html page's
	side := func(name string) diff.Input {
		p := filepath.Join(dir, name)
		set, err := load.Snapshots(t.Context(), []string{p}, load.SnapshotOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return diff.Input{Path: p, Memory: set.Report}
	}
	var page bytes.Buffer
	if err := diffreport.New(diff.Compare(side("a_base.pickle.xz"), side("b_leak.pickle.xz"))).WriteHTML(&page, 10); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(page.String(), d.HTML) || len(d.HTML) < 1000 {
		t.Errorf("served sections (%d bytes) are not those of diff --html (%d bytes)", len(d.HTML), page.Len())
	}

	// cached: the second answer is the same
	code, again := get("/api/v1/diff?a=0&b=1")
	if code != 200 || !bytes.Equal(again, body) {
		t.Errorf("second answer differs: %d", code)
	}
	// a trace against itself: a trace diff with no change
	code, body = get("/api/v1/diff?a=2&b=2")
	if code != 200 || json.Unmarshal(body, &d) != nil || len(d.Report.Trace) != 1 || len(d.Report.Memory) != 0 {
		t.Errorf("trace diff: %d %.300s", code, body)
	}
}

func TestDiffRouteBadRequests(t *testing.T) {
	t.Parallel()
	_, dir, get := diffServer(t)
	mismatch := diff.KindMismatch(filepath.Join(dir, "a_base.pickle.xz"), "allocator snapshots", filepath.Join(dir, "c_trace.json"), "profiler traces").Error()
	for _, c := range []struct {
		path string
		code int
		msg  string
	}{
		{"/api/v1/diff?a=0&b=2", 400, mismatch},
		{"/api/v1/diff?a=0&b=9", 404, "no input 9"},
		{"/api/v1/diff?a=-1&b=0", 404, "no input -1"},
		{"/api/v1/diff?a=0", 400, "missing parameter b"},
		{"/api/v1/diff?a=x&b=1", 400, "not an integer"},
		{"/api/v1/diff?a=0&b=1&top=0", 400, "top=0"},
		{"/api/v1/diff?a=99999999999999999999&b=1", 400, "not an integer"},
	} {
		code, body := get(c.path)
		var e struct{ Error string }
		if code != c.code || json.Unmarshal(body, &e) != nil || !strings.Contains(e.Error, c.msg) || strings.Contains(e.Error, "\n") {
			t.Errorf("%s: %d %s, want %d with %q", c.path, code, body, c.code, c.msg)
		}
	}
}
