package memreport

import (
	"bytes"
	"strings"
	"testing"

	"github.com/ptscope/ptscope/internal/memory"
	"github.com/ptscope/ptscope/internal/snapshot"
	"github.com/ptscope/ptscope/internal/testfixture"
)

func input(t *testing.T, name string) *Input {
	t.Helper()
	p := testfixture.Testdata(t, "snapshots", name)
	s, err := snapshot.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return &Input{Path: name, Format: s.Format, Bytes: s.InputBytes, Devices: []*memory.Device{memory.Analyze(s, 0, memory.Options{})}}
}

func TestCompareAndMarkdown(t *testing.T) {
	leak, frag := input(t, "leak_gpt2_2l.pickle.xz"), input(t, "oom_fragmentation.pickle.xz")
	doc := &Document{SchemaVersion: 1, Inputs: []*Input{leak, frag}}
	rows := Compare(doc.Inputs)
	if len(rows) != 2 {
		t.Fatalf("%d rows", len(rows))
	}
	if rows[0].Pattern != "leak" || rows[1].OOMs != 2 || rows[0].PeakAllocatedBytes != leak.Devices[0].Peak.AllocatedBytes {
		t.Errorf("rows = %+v", rows)
	}
	md := Markdown(doc)
	for _, want := range []string{"## leak_gpt2_2l.pickle.xz", "`leak`", "`oom-fragmentation`", "**critical**"} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown lacks %q", want)
		}
	}
	var b bytes.Buffer
	if err := WriteComparison(&b, rows); err != nil || !strings.Contains(b.String(), "Comparison of 2 inputs") {
		t.Errorf("comparison: %v\n%s", err, b.String())
	}
}

func TestWriteTextSections(t *testing.T) {
	in := input(t, "oom_capacity.pickle.xz")
	var b bytes.Buffer
	if err := WriteText(&b, in, TextOptions{TopN: 5}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"Peak", "Alive at the peak, by category", "Out-of-memory events", "verdict: CAPACITY", "largest segments", "[critical] oom-capacity"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q", want)
		}
	}
}
