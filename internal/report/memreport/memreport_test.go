package memreport

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ptscope/ptscope/internal/memory"
	"github.com/ptscope/ptscope/internal/report"
	"github.com/ptscope/ptscope/internal/snapshot"
	"github.com/ptscope/ptscope/internal/testfixture"
)

// analyzed reads committed snapshots and builds their analyze report.
func analyzed(t *testing.T, names ...string) *memory.Report {
	t.Helper()
	rep := memory.NewReport()
	for _, name := range names {
		s, err := snapshot.ReadFile(testfixture.Testdata(t, "snapshots", name))
		if err != nil {
			t.Fatal(err)
		}
		in := &memory.Input{Path: name, Format: s.Format, Bytes: s.InputBytes}
		for _, d := range s.Devices() {
			in.Devices = append(in.Devices, memory.Analyze(s, d, memory.Options{}).Result)
		}
		rep.Inputs = append(rep.Inputs, in)
	}
	rep.Compare()
	return rep
}

func TestCompareAndMarkdown(t *testing.T) {
	rep := analyzed(t, "leak_gpt2_2l.pickle.xz", "oom_fragmentation.pickle.xz")
	rows := rep.Comparison
	if len(rows) != 2 {
		t.Fatalf("%d rows", len(rows))
	}
	if rows[0].Pattern != memory.PatternLeak || rows[1].OOMs != 2 || rows[0].PeakAllocatedBytes != rep.Inputs[0].Devices[0].Peak.AllocatedBytes {
		t.Errorf("rows = %+v", rows)
	}
	md := Markdown(rep, report.DefaultText())
	for _, want := range []string{"## leak\\_gpt2\\_2l.pickle.xz", "`leak`", "`oom-fragmentation`", "**critical**", "![memory timeline](memory_timeline_0.svg)"} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown lacks %q", want)
		}
	}
	var b bytes.Buffer
	if err := WriteText(&b, rep, report.DefaultText()); err != nil || !strings.Contains(b.String(), "Comparison of 2 inputs") {
		t.Errorf("comparison: %v\n%s", err, b.String())
	}
}

func TestWriteTextSections(t *testing.T) {
	rep := analyzed(t, "oom_capacity.pickle.xz")
	for _, width := range []int{80, 100} {
		o := report.DefaultText()
		o.Width, o.Top = width, 5
		var b bytes.Buffer
		if err := WriteText(&b, rep, o); err != nil {
			t.Fatal(err)
		}
		out := b.String()
		for _, want := range []string{"Peak", "Alive at the peak, by category", "Out-of-memory events", "verdict: CAPACITY", "largest segments", "[critical] oom-capacity"} {
			if !strings.Contains(out, want) {
				t.Errorf("report lacks %q", want)
			}
		}
		for i, l := range strings.Split(out, "\n") {
			if n := utf8.RuneCountInString(l); n > width {
				t.Errorf("width %d: line %d has %d columns: %q", width, i+1, n, l)
			}
		}
	}
}

// The comparison names inputs without the folder they share, keeping at
// least each base name (the review found every row cut to the same
// "main/te…ckle.xz").
func TestInputNames(t *testing.T) {
	for _, c := range []struct {
		in    []string
		dir   string
		names []string
	}{
		{[]string{"a.pickle", "b.pickle"}, "", []string{"a.pickle", "b.pickle"}},
		{[]string{"testdata/snapshots/a.pickle.xz", "testdata/snapshots/b.pickle.xz"}, "testdata/snapshots/", []string{"a.pickle.xz", "b.pickle.xz"}},
		{[]string{"run/rank0/snapshot_end.pickle", "run/rank1/snapshot_end.pickle"}, "run/", []string{"rank0/snapshot_end.pickle", "rank1/snapshot_end.pickle"}},
		{[]string{"/d/x/a.pickle", "/d/y/a.pickle", "/d/x/b.pickle"}, "/d/", []string{"x/a.pickle", "y/a.pickle", "x/b.pickle"}},
		{[]string{"x/a.pickle", "y/a.pickle"}, "", []string{"x/a.pickle", "y/a.pickle"}},
		{[]string{"x/a.pickle", "x/a.pickle"}, "x/", []string{"a.pickle", "a.pickle"}}, // two devices of one input
		{[]string{"x/y/a.pickle", "x/b.pickle"}, "x/", []string{"y/a.pickle", "b.pickle"}},
	} {
		rows := make([]memory.CompareRow, len(c.in))
		for i, p := range c.in {
			rows[i].Input = p
		}
		dir, names := inputNames(rows)
		if dir != c.dir || strings.Join(names, " ") != strings.Join(c.names, " ") {
			t.Errorf("%v: %q %q, want %q %q", c.in, dir, names, c.dir, c.names)
		}
	}
}

// A comparison that fits keeps the names in the table; one that does not
// numbers its rows and lists the names above, whole. From 100 columns no
// cell is cut; at 80 with a device column the top category is.
func TestComparisonLayout(t *testing.T) {
	rows := []memory.CompareRow{
		{Input: "runs/a/snapshot_end.pickle", PeakAllocatedBytes: 1 << 30, TopCategory: memory.CatBeforeRecording},
		{Input: "runs/b/snapshot_end.pickle", Device: 1, PeakAllocatedBytes: 2 << 30, TopCategory: memory.CatActivation},
	}
	for _, c := range []struct {
		width   int
		numbers bool
	}{{140, false}, {100, true}, {80, true}} {
		var b strings.Builder
		writeComparison(&printer{w: &b, o: normalize(report.TextOptions{Width: c.width})}, rows)
		out := b.String()
		if strings.Contains(out, "…") && c.width >= 100 {
			t.Errorf("%d columns: a cell was cut:\n%s", c.width, out)
		}
		checkWidth(t, "comparison", out, c.width)
		if got := strings.Contains(out, "\n  1  a/snapshot_end.pickle\n"); got != c.numbers {
			t.Errorf("%d columns: numbered %v, want %v:\n%s", c.width, got, c.numbers, out)
		}
		if !strings.Contains(out, " dev ") || !strings.HasPrefix(out, "Comparison of 2 inputs in runs/\n") {
			t.Errorf("%d columns:\n%s", c.width, out)
		}
	}
}
