package fleetreport

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ptscope/ptscope/internal/fleet"
	"github.com/ptscope/ptscope/internal/fleet/fleetgen"
	"github.com/ptscope/ptscope/internal/input"
	"github.com/ptscope/ptscope/internal/report"
)

var update = flag.Bool("update", false, "rewrite golden files")

func read(t *testing.T, name string) []byte {
	t.Helper()
	r, err := input.NewSource(0, nil, nil).Open(filepath.Join("..", "..", "..", "testdata", "snapshots", name))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fleetReport summarises 12 generated ranks (real snapshots scaled per
// rank, rank 0 at 1.3x; a real OOM run as rank 9 and a leaking one as rank
// 5; synthetic FSDP traces, rank 7 loading data slowly) with paths relative
// to their folder.
func fleetReport(t *testing.T) (*fleet.Report, string) {
	t.Helper()
	dir := t.TempDir()
	o := fleetgen.Options{Ranks: 12, Snapshot: read(t, "validate_gpt2tiny_fp32.pickle.xz"), Sizes: map[int]float64{0: 1.3},
		Special:  map[int][]byte{5: read(t, "leak_gpt2_2l.pickle.xz"), 9: read(t, "oom_capacity.pickle.xz")},
		SlowData: []int{7}, Traces: true, TraceSteps: 3}
	if _, err := fleetgen.Write(dir, o); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "notes.pickle"), []byte{0x80, 0x04, '.'}, 0o644) // not a rank
	in, err := fleet.Find(nil, []string{dir}, input.Snapshot, input.Trace)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := fleet.Summarize(context.Background(), "analyze", in, fleet.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rel := func(p *string) {
		if r, err := filepath.Rel(dir, *p); err == nil {
			*p = filepath.ToSlash(r)
		}
	}
	for i := range rep.Memory.Ranks {
		rel(&rep.Memory.Ranks[i].Path)
	}
	for i := range rep.Time.Ranks {
		rel(&rep.Time.Ranks[i].Path)
	}
	for i := range rep.Skipped {
		rel(&rep.Skipped[i].Path)
	}
	return rep, dir
}

func TestGoldenText(t *testing.T) {
	rep, _ := fleetReport(t)
	doc := New(rep, []string{"job/"})
	var b bytes.Buffer
	if err := doc.WriteText(&b, report.DefaultText()); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	golden := filepath.Join("testdata", "fleet12.golden")
	if *update {
		os.MkdirAll("testdata", 0o755)
		os.WriteFile(golden, b.Bytes(), 0o644)
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if out != string(want) {
		t.Errorf("text differs from %s (go test ./internal/report/fleetreport -update after checking):\n%s", golden, out)
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) >= 60 {
		t.Errorf("%d lines: not one screen", len(lines))
	}
	for _, l := range lines {
		if utf8.RuneCountInString(l) > 100 {
			t.Errorf("over 100 columns: %q", l)
		}
	}
	// narrow terminals: every line fits, and no number of the
	// distributions is cut (the outliers leave the table for lines below)
	for _, w := range []int{60, 72} {
		b.Reset()
		o := report.DefaultText()
		o.Width = w
		doc.WriteText(&b, o)
		for _, l := range strings.Split(b.String(), "\n") {
			if utf8.RuneCountInString(l) > w {
				t.Errorf("over %d columns: %q", w, l)
			}
			if strings.HasPrefix(l, "  peak allocated ") && (strings.Contains(l, "…") || !strings.Contains(l, "GiB")) {
				t.Errorf("at %d, a cut row: %q", w, l)
			}
		}
		if !strings.Contains(b.String(), "  outliers of peak allocated: ") {
			t.Errorf("at %d, the outliers are missing:\n%s", w, b.String())
		}
	}
}

func TestJSONAndRunFiles(t *testing.T) {
	rep, _ := fleetReport(t)
	doc := New(rep, []string{"job/"})
	js, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	var back fleet.Report
	if err := json.Unmarshal(js, &back); err != nil {
		t.Fatal(err)
	}
	again, _ := json.Marshal(&back)
	if !bytes.Equal(js, again) {
		t.Error("the JSON does not round-trip")
	}
	if !strings.HasPrefix(string(js), `{"schema_version":2,"tool":"ptscope","command":"analyze","fleet":true`) {
		t.Errorf("envelope %.80s", js)
	}
	files, err := doc.RunFiles(report.DefaultText())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		names = append(names, f.Name)
		if len(f.Data) == 0 {
			t.Errorf("%s is empty", f.Name)
		}
	}
	if strings.Join(names, " ") != "README.md peak_by_rank.png step_by_rank.png gpu_utilization_by_rank.png" {
		t.Errorf("files %v", names)
	}
	if doc.RunName() != "job_fleet" {
		t.Errorf("run name %q", doc.RunName())
	}
}
