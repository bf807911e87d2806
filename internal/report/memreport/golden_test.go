package memreport

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ptscope/ptscope/internal/memory"
	"github.com/ptscope/ptscope/internal/report"
	"github.com/ptscope/ptscope/internal/report/chart"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// golden compares got with testdata/name, rewriting it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./internal/report/memreport -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (check, then go test ./internal/report/memreport -update):\n%s", path, firstDiff(got, want))
	}
}

// firstDiff shows the first differing line.
func firstDiff(got, want []byte) string {
	g, w := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := 0; i < len(g) || i < len(w); i++ {
		var a, b string
		if i < len(g) {
			a = g[i]
		}
		if i < len(w) {
			b = w[i]
		}
		if a != b {
			return "line " + strconvI(i+1) + ":\n  got:  " + a + "\n  want: " + b
		}
	}
	return ""
}

// goldenInputs are committed real snapshots covering the report's
// sections: an OOM dump, a leak over 8 steps, a snapshot without history,
// and C++ stacks.
var goldenInputs = []string{"oom_capacity", "leak_gpt2_2l", "legacy_list_history", "gpt2tiny_train_bf16_cppstacks"}

func TestGoldenText(t *testing.T) {
	t.Parallel()
	for _, name := range goldenInputs {
		rep := analyzed(t, name+".pickle.xz")
		for _, width := range []int{80, 100} {
			o := report.DefaultText()
			o.Width = width
			var b bytes.Buffer
			if err := WriteText(&b, rep, o); err != nil {
				t.Fatal(err)
			}
			checkWidth(t, name, b.String(), width)
			golden(t, name+"_"+strconvI(width)+".txt", b.Bytes())
		}
	}
	// Every frame, and every step.
	rep := analyzed(t, "gpt2tiny_train_bf16_cppstacks.pickle.xz")
	o := report.DefaultText()
	o.Stacks, o.Steps, o.Top = report.StacksFull, report.StepsAll, 3
	var b bytes.Buffer
	if err := WriteText(&b, rep, o); err != nil {
		t.Fatal(err)
	}
	checkWidth(t, "full", b.String(), o.Width)
	golden(t, "gpt2tiny_train_bf16_cppstacks_full.txt", b.Bytes())
}

func strconvI(n int) string { return strconv.Itoa(n) }

func checkWidth(t *testing.T, name, out string, width int) {
	t.Helper()
	for i, l := range strings.Split(out, "\n") {
		if n := utf8.RuneCountInString(l); n > width {
			t.Errorf("%s at %d columns: line %d has %d: %q", name, width, i+1, n, l)
		}
	}
}

func TestGoldenComparisonAndMarkdown(t *testing.T) {
	t.Parallel()
	rep := analyzed(t, "leak_gpt2_2l.pickle.xz", "oom_fragmentation.pickle.xz")
	golden(t, "leak_and_oom_fragmentation.md", []byte(Markdown(rep, report.DefaultText())))
	for _, width := range []int{80, 100} {
		o := report.DefaultText()
		o.Width = width
		var b bytes.Buffer
		writeComparison(&printer{w: &b, o: normalize(o)}, rep.Comparison)
		checkWidth(t, "comparison", b.String(), width)
		golden(t, "comparison_"+strconvI(width)+".txt", b.Bytes())
	}
}

// The JSON of the document is the result: golden on small inputs.
func TestGoldenJSON(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"oom_capacity", "legacy_list_history"} {
		rep := analyzed(t, name+".pickle.xz")
		js, err := json.MarshalIndent(New(rep), "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		golden(t, name+".json", append(js, '\n'))
		var back memory.Report
		if err := json.Unmarshal(js, &back); err != nil {
			t.Fatalf("the document does not read back: %v", err)
		}
		again, _ := json.MarshalIndent(&back, "", "  ")
		if !bytes.Equal(again, js) {
			t.Errorf("%s: the document changes through a JSON round trip", name)
		}
	}
}

func TestGoldenSVG(t *testing.T) {
	t.Parallel()
	rep := analyzed(t, "oom_capacity.pickle.xz")
	files, err := Charts(rep)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		names = append(names, f.Name)
		golden(t, "oom_capacity_"+f.Name, f.Data)
	}
	if strings.Join(names, " ") != "memory_timeline.svg overview.svg efficiency.svg top_consumers.svg categories.svg block_sizes.svg" {
		t.Errorf("charts %v", names)
	}
}

// The charts agree with the text: the allocated band reaches the peak the
// text reports, the peak marker sits on that bucket, the efficiency line
// there is the efficiency at the peak, and step markers stay few.
func TestChartsAgreeWithText(t *testing.T) {
	t.Parallel()
	rep := analyzed(t, "gpt2s_train_fp32_b4_ctx512.pickle.xz")
	in, d := rep.Inputs[0], rep.Inputs[0].Devices[0]
	byName := map[string]chart.Chart{}
	for _, c := range DeviceCharts(in, d) {
		byName[c.Name] = c.Chart
	}
	line := byName["memory_timeline"].(chart.Line)
	var peakX float64
	for _, m := range line.Markers {
		if strings.HasPrefix(m.Label, "peak ") {
			peakX = m.X
		}
	}
	var top, atMarker float64
	for _, s := range line.Series {
		if s.Name != "allocated" {
			continue
		}
		for i, y := range s.Y {
			top = max(top, y)
			if s.X[i] == peakX {
				atMarker = max(atMarker, y)
			}
		}
	}
	if top != float64(d.Peak.AllocatedBytes) || atMarker != top {
		t.Errorf("allocated line tops at %v (%v at the peak marker), the peak is %d", top, atMarker, d.Peak.AllocatedBytes)
	}
	eff := byName["efficiency"].(chart.Line).Series[0]
	found := false
	for i, x := range eff.X {
		if x == peakX {
			found = true
			if eff.Y[i] != d.Fragmentation.EfficiencyAtPeak {
				t.Errorf("efficiency chart at the peak %v, text %v", eff.Y[i], d.Fragmentation.EfficiencyAtPeak)
			}
		}
	}
	if !found {
		t.Error("no efficiency point at the peak")
	}
	if n := len(line.Markers); n > maxStepMarkers+1 {
		t.Errorf("%d markers", n)
	}
}
