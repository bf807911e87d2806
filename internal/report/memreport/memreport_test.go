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
