package report

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

func TestTableGolden(t *testing.T) {
	tables := map[string]*Table{
		"categories": {
			Header: []string{"category", "size", "bytes", "share"},
			Rows: [][]string{
				{"parameters", "474 MiB", "497,025,024", "21.4%"},
				{"optimizer state", "948 MiB", "994,050,048", "42.8%"},
				{"activations", "3.12 GiB", "3,349,987,328", "n/a"},
				{"unknown", "512 B", "512", "-"},
			},
		},
		"ops_forced_align": {
			Header: []string{"#", "operator", "calls", "self time (share)"},
			Align:  []Align{Left, Auto, Auto, Right},
			Rows: [][]string{
				{"1", "aten::mm", "1,200", "412 ms (45.1%)"},
				{"2", "aten::_scaled_dot_product_efficient_attention_backward", "48", "233 ms (25.5%)"},
				{"3", "Optimizer.step#AdamW.step", "4", "9.87 ms (1.1%)"},
			},
		},
		"ragged_no_header": {
			Rows: [][]string{
				{"peak", "5.16 GiB"},
				{"at", "step 3", "extra"},
				{"multi\nline", ""},
			},
		},
	}
	for name, tb := range tables {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := tb.Write(&buf); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", "table_"+name+".txt")
			if *update {
				os.WriteFile(path, buf.Bytes(), 0o644)
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -update)", err)
			}
			if buf.String() != string(want) {
				t.Errorf("got\n%s\nwant\n%s", buf.String(), want)
			}
			for _, l := range strings.Split(buf.String(), "\n") {
				if strings.HasSuffix(l, " ") {
					t.Errorf("trailing space in %q", l)
				}
			}
		})
	}
}

// TestTableAlignment asserts the alignment rules directly, independent of
// the golden files.
func TestTableAlignment(t *testing.T) {
	tb := &Table{
		Header: []string{"name", "size"},
		Rows:   [][]string{{"a", "5.16 GiB"}, {"bbbbbbbbbb", "512 B"}},
	}
	var buf bytes.Buffer
	tb.Write(&buf)
	want := "name            size\n" +
		"----------  --------\n" +
		"a           5.16 GiB\n" +
		"bbbbbbbbbb     512 B\n"
	if buf.String() != want {
		t.Errorf("got\n%q\nwant\n%q", buf.String(), want)
	}
	if err := (&Table{}).Write(&buf); err != nil {
		t.Error(err)
	}
}

func TestIsNumeric(t *testing.T) {
	yes := []string{"0", "-3", "+2.5", "1,024", "5.16 GiB", "35.2 us", "93.4%", "1.5x", "12 GB/s",
		"3.1 GiB (42.0%)", "1e-3", "2.5E+09 B", " 7 ", "812 ns", "1_000"}
	no := []string{"", "-", "n/a", "aten::mm", "step 3", "x1", "5 GiB of 8", "(12%)", "1.0 GiB (peak)",
		"3 extraordinarily", ".", ",5"}
	for _, s := range yes {
		if !IsNumeric(s) {
			t.Errorf("IsNumeric(%q) = false", s)
		}
	}
	for _, s := range no {
		if IsNumeric(s) {
			t.Errorf("IsNumeric(%q) = true", s)
		}
	}
}

func TestTableMaxWidth(t *testing.T) {
	tb := &Table{Header: []string{"source", "module", "bytes"}, MaxWidth: 50, Rows: [][]string{
		{"transformers/models/gpt2/modeling_gpt2.py:1062 forward", "transformer.h.11.mlp.c_fc", "1.50 GiB"},
		{"train.py:42 step", "lm_head", "786 MiB"},
	}}
	var b strings.Builder
	if err := tb.Write(&b); err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(strings.TrimRight(b.String(), "\n"), "\n") {
		if n := len([]rune(l)); n > 50 {
			t.Errorf("line of %d columns: %q", n, l)
		}
	}
	if !strings.Contains(b.String(), "1.50 GiB") || !strings.Contains(b.String(), "forward") || !strings.Contains(b.String(), "train.py:42 step") {
		t.Errorf("numbers or ends lost:\n%s", b.String())
	}
}

func TestWrapAndCut(t *testing.T) {
	if got := CutMiddle("transformer.h.11.mlp.c_fc", 12); got != "trans…p.c_fc" || len([]rune(got)) != 12 {
		t.Errorf("CutMiddle: %q", got)
	}
	if got := CutMiddle("short", 12); got != "short" {
		t.Errorf("CutMiddle short: %q", got)
	}
	lines := Wrap("Activations are 56.8% of the peak (2.93 GiB): checkpoint them", 30, "  [info] ", "      ")
	for _, l := range lines {
		if len([]rune(l)) > 30 {
			t.Errorf("wrapped line too long: %q", l)
		}
	}
	if len(lines) < 3 || !strings.HasPrefix(lines[0], "  [info] Activations") || !strings.HasPrefix(lines[1], "      ") {
		t.Errorf("Wrap: %q", lines)
	}
	long := Wrap(strings.Repeat("x", 80), 40, "", "  ")
	if len(long) != 1 || len([]rune(long[0])) > 40 {
		t.Errorf("long word: %q", long)
	}
}

// TestCutColumnDistinct: names that a middle cut makes identical (cuBLAS
// kernels differing only in their tile) are cut where they differ and stay
// distinct, within the width; a name that does not collide keeps the
// middle cut.
func TestCutColumnDistinct(t *testing.T) {
	cells := []string{
		"sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas",
		"sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas",
		"sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize64x64x8_stage3_warpsize1x4x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas",
		"fmha_cutlassB_f32_aligned_64x64_k64_dropout_sm80_with_a_long_name",
		"short",
	}
	for _, n := range []int{24, 36, 50} {
		got := cutColumn(cells, n)
		seen := map[string]bool{}
		for i, c := range got {
			if w := utf8.RuneCountInString(c); w > n {
				t.Errorf("width %d: %q is %d wide", n, c, w)
			}
			if seen[c] {
				t.Errorf("width %d: %q twice: %q", n, c, got)
			}
			seen[c] = true
			if i >= 3 && c != CutMiddle(cells[i], n) {
				t.Errorf("width %d: %q, want the middle cut %q", n, c, CutMiddle(cells[i], n))
			}
		}
	}
}
