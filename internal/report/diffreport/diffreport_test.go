package diffreport

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ptscope/ptscope/internal/diff"
	"github.com/ptscope/ptscope/internal/load"
	"github.com/ptscope/ptscope/internal/report"
)

var update = flag.Bool("update", false, "rewrite golden files")

// reports are two real comparisons: a stable GPT-2 tiny training run
// against one that leaks (snapshots), and a DataLoader-bound trace against
// rank 0 of an FSDP run (traces).
func reports(t *testing.T) map[string]*diff.Report {
	t.Helper()
	ctx := context.Background()
	mem := func(p string) diff.Input {
		set, err := load.Snapshots(ctx, []string{p}, load.SnapshotOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return diff.Input{Path: p, Memory: set.Report}
	}
	tr := func(p string) diff.Input {
		set, err := load.Traces(ctx, []string{p}, load.TraceOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return diff.Input{Path: p, Trace: set.Report}
	}
	// relative paths: the goldens hold no machine's folders
	td := func(p ...string) string {
		return filepath.Join(append([]string{"..", "..", "..", "testdata"}, p...)...)
	}
	return map[string]*diff.Report{
		"memory": diff.Compare(mem(td("snapshots", "validate_gpt2tiny_fp32.pickle.xz")), mem(td("snapshots", "leak_gpt2_2l.pickle.xz"))),
		"trace":  diff.Compare(tr(td("traces", "dataloader.pt.trace.json.gz")), tr(td("traces", "fsdp", "rank0.pt.trace.json.gz"))),
	}
}

// TestWidth: every line of both comparisons fits the width, from 50
// columns up, and every table keeps its numbers whole down to 60.
func TestWidth(t *testing.T) {
	t.Parallel()
	for name, rep := range reports(t) {
		for _, w := range []int{50, 60, 80, 100, 140} {
			var b bytes.Buffer
			if err := New(rep).WriteText(&b, report.TextOptions{Width: w, Top: 10}); err != nil {
				t.Fatal(err)
			}
			for _, l := range strings.Split(b.String(), "\n") {
				if n := len([]rune(l)); n > w {
					t.Errorf("%s at %d: line of %d columns: %q", name, w, n, l)
				}
				// a cut number would end a table line in "…" after a digit
				if w >= 60 && strings.HasSuffix(l, "…") && !strings.HasPrefix(l, "      ") {
					t.Errorf("%s at %d: line cut: %q", name, w, l)
				}
			}
		}
	}
}

// TestGolden: the text at 60 columns.
func TestGolden(t *testing.T) {
	t.Parallel()
	for name, rep := range reports(t) {
		var b bytes.Buffer
		if err := New(rep).WriteText(&b, report.TextOptions{Width: 60, Top: 5}); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join("testdata", name+"_60.golden")
		if *update {
			os.WriteFile(path, b.Bytes(), 0o644)
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if b.String() != string(want) {
			t.Errorf("%s differs from %s (go test ./internal/report/diffreport -update after checking):\n%s", name, path, b.String())
		}
	}
}

func TestCells(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	for _, c := range []struct{ got, want string }{
		{changeCell(f(-0.859), 5.16, 0.75), "-85.9%"},
		{changeCell(f(12), 1, 13), "+13x"},
		{changeCell(nil, 0, 5), "new"},
		{changeCell(nil, 5, 0), "gone"},
		{changeCell(nil, 0, 0), "-"},
		{countRow("n", diff.Count{A: 1234, B: 0, Delta: -1234})[3], "-1,234"},
		{countRow("n", diff.Count{A: 0, B: 1234.5, Delta: 1234.5})[3], "+1234.5"},
		{callsCell(diff.Count{A: 153, B: 160, Delta: 7}), "153→160"},
		{signedBytes(0), "0 B"},
		{signedDuration(-1500), "-1.50 us"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

// TestHTML: the HTML page holds the text's sections, findings and table
// rows, in tables, escaped, and names are not cut.
func TestHTML(t *testing.T) {
	t.Parallel()
	for name, rep := range reports(t) {
		var page, text bytes.Buffer
		if err := New(rep).WriteHTML(&page, 5); err != nil {
			t.Fatal(err)
		}
		if err := New(rep).WriteText(&text, report.TextOptions{Width: 1000, Top: 5}); err != nil {
			t.Fatal(err)
		}
		h := page.String()
		if !strings.HasPrefix(h, "<!doctype html>") || !strings.HasSuffix(h, "</body></html>\n") || strings.Contains(h, "<script") {
			t.Errorf("%s: not a static page: %.80q ... %q", name, h, h[max(len(h)-40, 0):])
		}
		// every table of the text (a rule line of dashes) is a table here
		rules := 0
		for _, l := range strings.Split(text.String(), "\n") {
			if f := strings.Fields(l); len(f) > 0 && strings.Trim(f[0], "-") == "" {
				rules++
			}
		}
		// (the stacks' table is one here; in the text too)
		if n := strings.Count(h, "<table>"); n != rules || n != strings.Count(h, "</table>") || n == 0 {
			t.Errorf("%s: %d tables, the text has %d", name, n, rules)
		}
		for _, want := range []string{"<h2>What changed</h2>", "<h1>ptscope diff</h1>"} {
			if !strings.Contains(h, want) {
				t.Errorf("%s: lacks %q", name, want)
			}
		}
		for _, f := range rep.Findings {
			if !strings.Contains(h, "["+f.Severity.String()+"] "+f.ID+":") {
				t.Errorf("%s: finding %s missing", name, f.ID)
			}
		}
	}
	rep := reports(t)["memory"]
	var page bytes.Buffer
	New(rep).WriteHTML(&page, 5)
	// the real peaks (torch's max_memory_allocated), a stack label escaped
	for _, want := range []string{"<td>peak allocated</td><td class=\"n\">1.32 GiB</td><td class=\"n\">746 MiB</td>", "&lt;no stack recorded&gt;"} {
		if !strings.Contains(page.String(), want) {
			t.Errorf("memory page lacks %q", want)
		}
	}
}
