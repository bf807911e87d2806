package tracereport

import (
	"bytes"
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ptscope/ptscope/internal/load"
	"github.com/ptscope/ptscope/internal/perf"
	"github.com/ptscope/ptscope/internal/report"
)

func TestWriteTable(t *testing.T) {
	cols := []column{
		{head: "name", cells: []string{"a_rather_long_operator_name_that_needs_room", "b"}},
		{head: "calls", cells: []string{"12", "3"}},
		{head: "zero", cells: []string{"0 ns", "0 ns"}, drop: 9},
		{head: "total", cells: []string{"41.1 ms", "2.00 us"}, drop: 1},
		{head: "mean", cells: []string{"3.42 ms", "667 ns"}, drop: 2},
	}
	for _, c := range []struct {
		width int
		heads []string
	}{
		{200, []string{"name", "calls", "total", "mean"}}, // the all-zero column goes
		{40, []string{"name", "calls", "total", "mean"}},  // the name is cut to fit
		{30, []string{"name", "calls", "total"}},          // mean gives way first
		{20, []string{"name", "calls"}},
		{10, []string{"name", "calls"}}, // never below the columns that cannot go
	} {
		var b bytes.Buffer
		if err := writeTable(&b, c.width, cols); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
		if got := strings.Fields(lines[0]); strings.Join(got, " ") != strings.Join(c.heads, " ") {
			t.Errorf("width %d: columns %v, want %v", c.width, got, c.heads)
		}
		for _, l := range lines {
			if n := utf8.RuneCountInString(l); n > c.width && c.width >= 30 {
				t.Errorf("width %d: %d columns: %q", c.width, n, l)
			}
		}
		if c.width == 40 && !strings.Contains(b.String(), "a_rathe…ds_room") {
			t.Errorf("the name is not cut in the middle:\n%s", b.String())
		}
		// numbers are never cut
		if !strings.Contains(b.String(), "12") || (len(c.heads) > 2 && !strings.Contains(b.String(), "41.1 ms")) {
			t.Errorf("width %d: a number was cut:\n%s", c.width, b.String())
		}
	}
}

func TestKernelName(t *testing.T) {
	for in, want := range map[string]string{
		"void cutlass::Kernel2<cutlass_80_simt_sgemm_128x256_8x4_nt_align1>(cutlass_80_simt_sgemm_128x256_8x4_nt_align1::Params)": "cutlass::Kernel2<cutlass_80_simt_sgemm_128x256_8x4_nt_align1>",
		"void at::native::f<(anonymous namespace)::g>(int, float (*)(float))":                                                     "at::native::f<(anonymous namespace)::g>",
		"nvjet_sm90_tst_192x128_64x5_1x2_h_bz_coopB_NNT":                                                                          "nvjet_sm90_tst_192x128_64x5_1x2_h_bz_coopB_NNT",
		"ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)":                                               "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
		"(weird)": "(weird)",
	} {
		if got := KernelName(in); got != want {
			t.Errorf("KernelName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseViewAndNames(t *testing.T) {
	for _, v := range Views {
		if got, err := ParseView(string(v)); err != nil || got != v {
			t.Errorf("%s: %v %v", v, got, err)
		}
	}
	if _, err := ParseView("flame"); err == nil || !strings.Contains(err.Error(), "overview") {
		t.Errorf("bad view: %v", err)
	}
	for in, want := range map[string]string{"a/rank0.1700000000.pt.trace.json.gz": "rank0.1700000000", "trace.json": "trace", "x/.json": "trace"} {
		if got := BaseName(in); got != want {
			t.Errorf("BaseName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestPickSteps(t *testing.T) {
	r := &perf.Rank{Steps: make([]perf.Step, 60), SlowestStep: 31, OutlierSteps: []int{3, 31, 40, 41, 42, 43, 44, 45, 46, 47}}
	for i := range r.Steps {
		r.Steps[i].DurationNS = int64(100 + i)
	}
	o := report.DefaultText()
	got := pickSteps(r, o)
	// the first, the last, the slowest and the six slowest outliers
	want := []int{0, 31, 42, 43, 44, 45, 46, 47, 59}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
	o.Steps = report.StepsAll
	if len(pickSteps(r, o)) != 60 {
		t.Error("--steps all")
	}
}

var ansi = regexp.MustCompile("\x1b\\[[0-9;]*m")

// TestEveryViewFits renders every view of the committed traces at widths
// from 60 to 160 columns, with and without colour: every visible line fits.
func TestEveryViewFits(t *testing.T) {
	var reps []*perf.Report
	for _, in := range [][]string{
		{filepath.Join("..", "..", "..", "testdata", "traces", "fsdp")},
		{filepath.Join("..", "..", "..", "testdata", "traces", "dataloader.pt.trace.json.gz")},
		{filepath.Join("..", "..", "..", "testdata", "bundles", "lm_small_bf16")},
	} {
		set, err := load.Traces(context.Background(), in, load.TraceOptions{Analysis: perf.Options{GroupByShape: true}})
		if err != nil {
			t.Fatal(err)
		}
		reps = append(reps, set.Report)
	}
	for _, rep := range reps {
		for _, v := range Views {
			for _, w := range []int{60, 80, 100, 123, 160} {
				for _, color := range []bool{false, true} {
					o := report.DefaultText()
					o.Width, o.Color = w, color
					var b bytes.Buffer
					if err := New(rep, v).WriteText(&b, o); err != nil {
						t.Fatal(err)
					}
					if !color && strings.Contains(b.String(), "\x1b[") {
						t.Errorf("%s at %d: colour %v", v, w, color)
					}
					for _, l := range strings.Split(ansi.ReplaceAllString(b.String(), ""), "\n") {
						if n := utf8.RuneCountInString(l); n > w {
							t.Errorf("%s at %d columns: %d: %q", v, w, n, l)
						}
					}
				}
			}
		}
	}
}
