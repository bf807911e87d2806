package chart

import (
	"bytes"
	"flag"
	"fmt"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var (
	update = flag.Bool("update", false, "rewrite golden files in testdata/")
	pngDir = flag.String("pngdir", "", "also write every sample chart as PNG into this folder (to look at them)")
)

const (
	gib = float64(1 << 30)
	mib = float64(1 << 20)
	ms  = 1e6
)

// samples are the charts ptscope draws, with deterministic synthetic data.
func samples() map[string]Chart {
	// A training memory timeline: weights, then per step a ramp of
	// activations freed in the backward pass; 5 steps over 2.5 s.
	n := 5000
	t := make([]float64, n)
	alloc := make([]float64, n)
	reserved := make([]float64, n)
	for i := range t {
		t[i] = float64(i) * 0.5 * ms
		phase := float64(i%1000) / 1000
		act := 3.2 * gib * math.Sin(math.Pi*phase)
		alloc[i] = 1.1*gib + act + float64(i/1000)*48*mib
		reserved[i] = 1.5*gib + 3.4*gib + float64(i/1000)*64*mib
	}
	var markers []Marker
	for s := 1; s < 5; s++ {
		markers = append(markers, Marker{X: float64(s*1000) * 0.5 * ms, Label: fmt.Sprintf("step %d", s+1)})
	}
	peak := 4500
	markers = append(markers, Marker{X: t[peak], Label: "peak 4.55 GiB"})

	// Memory by category, stacked.
	m := 240
	x := make([]float64, m)
	cats := []string{"parameters", "optimizer state", "gradients", "activations", "autograd temporaries", "unknown"}
	layers := make([]Series, len(cats))
	for l := range layers {
		layers[l] = Series{Name: cats[l], Y: make([]float64, m)}
	}
	for i := range x {
		x[i] = float64(i) * 10 * ms
		ph := float64(i%60) / 60
		layers[0].Y[i] = 474 * mib
		layers[1].Y[i] = 0
		if i >= 40 {
			layers[1].Y[i] = 948 * mib
		}
		layers[2].Y[i] = 474 * mib * math.Min(1, 2*math.Max(0, ph-0.5))
		layers[3].Y[i] = 2.6 * gib * math.Max(0, math.Sin(math.Pi*ph*1.6))
		layers[4].Y[i] = 120 * mib * (1 + math.Sin(float64(i)))
		layers[5].Y[i] = 20 * mib
	}

	ops := []string{
		"aten::mm", "aten::_scaled_dot_product_efficient_attention_backward",
		"aten::addmm", "aten::native_layer_norm_backward", "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
		"aten::gelu_backward", "aten::copy_", "Optimizer.step#AdamW.step", "aten::_foreach_addcmul_", "aten::embedding_dense_backward",
	}
	opTime := []float64{412.5 * ms, 233.1 * ms, 151 * ms, 88.7 * ms, 61.2 * ms, 40.3 * ms, 22 * ms, 9.87 * ms, 1.25 * ms, 0.334 * ms}

	steps := []string{"1", "2", "3", "4", "5", "6", "7", "8"}
	stepStacks := []Series{
		{Name: "compute", Y: []float64{410 * ms, 402 * ms, 398 * ms, 405 * ms, 401 * ms, 399 * ms, 400 * ms, 403 * ms}},
		{Name: "communication (not overlapped)", Y: []float64{60 * ms, 48 * ms, 51 * ms, 47 * ms, 49 * ms, 52 * ms, 50 * ms, 48 * ms}},
		{Name: "idle", Y: []float64{420 * ms, 35 * ms, 32 * ms, 180 * ms, 30 * ms, 33 * ms, 31 * ms, 29 * ms}},
	}

	var many []string
	var manyY []float64
	for i := 0; i < 24; i++ {
		many = append(many, fmt.Sprintf("model.layers.%d.self_attn.q_proj.weight", i))
		manyY = append(manyY, float64(24-i)*37*mib)
	}

	util := make([]float64, 400)
	ut := make([]float64, 400)
	for i := range util {
		ut[i] = float64(i) * 25 * ms
		util[i] = 0.82 + 0.15*math.Sin(float64(i)/9)
		if i%50 > 44 {
			util[i] = 0.05
		}
	}

	return map[string]Chart{
		"line_memory_timeline": Line{
			Title: "GPU memory over time (rank 0)", XLabel: "time", YLabel: "memory",
			YUnit: UnitBytes, XUnit: UnitDuration,
			Series:  []Series{{Name: "allocated", X: t, Y: alloc}, {Name: "reserved", X: t, Y: reserved}},
			Markers: markers,
		},
		"area_categories": &StackedArea{
			Title: "Memory by category", XLabel: "time", YLabel: "allocated",
			YUnit: UnitBytes, XUnit: UnitDuration, X: x, Layers: layers,
		},
		"bars_top_ops": Bars{
			Title: "Top operators by self CUDA time", XLabel: "self CUDA time",
			Unit: UnitDuration, Labels: ops, Stacks: []Series{{Name: "self", Y: opTime}}, Horizontal: true,
		},
		"bars_steps_stacked": Bars{
			Title: "Step time breakdown", XLabel: "step", Unit: UnitDuration,
			Labels: steps, Stacks: stepStacks,
		},
		"bars_rotated_labels": Bars{
			Title: "Largest tensors", Unit: UnitBytes, Labels: many,
			Stacks: []Series{{Y: manyY}},
		},
		"line_percent": Line{
			Title: "GPU utilisation", XLabel: "time", YUnit: UnitPercent, XUnit: UnitDuration,
			Series: []Series{{Name: "SM busy", X: ut, Y: util}},
		},
		"line_empty": Line{Title: "Nothing recorded", YUnit: UnitBytes},
	}
}

func TestGoldenSVG(t *testing.T) {
	for name, c := range samples() {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := WriteSVG(&buf, c); err != nil {
				t.Fatal(err)
			}
			got := buf.Bytes()
			path := filepath.Join("testdata", name+".svg")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s differs from golden file (run go test -update after checking the change)", path)
			}
			if *pngDir != "" {
				var pb bytes.Buffer
				if err := WritePNG(&pb, c); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(*pngDir, name+".png"), pb.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// TestSVGDeterministic draws every sample twice and compares the bytes.
func TestSVGDeterministic(t *testing.T) {
	for name, c := range samples() {
		var a, b bytes.Buffer
		if err := WriteSVG(&a, c); err != nil {
			t.Fatal(err)
		}
		if err := WriteSVG(&b, c); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a.Bytes(), b.Bytes()) {
			t.Errorf("%s: two renderings differ", name)
		}
	}
}

func TestPNG(t *testing.T) {
	for name, c := range samples() {
		var buf bytes.Buffer
		if err := WritePNG(&buf, c); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		img, err := png.Decode(&buf)
		if err != nil {
			t.Fatalf("%s: not a PNG: %v", name, err)
		}
		b := img.Bounds()
		if b.Dx() != canvasW*pngScale {
			t.Errorf("%s: width %d, want %d", name, b.Dx(), int(canvasW*pngScale))
		}
		// Something other than the white background was painted.
		colours := map[[3]uint32]bool{}
		for y := b.Min.Y; y < b.Max.Y; y += 7 {
			for x := b.Min.X; x < b.Max.X; x += 7 {
				r, g, bl, _ := img.At(x, y).RGBA()
				colours[[3]uint32{r >> 8, g >> 8, bl >> 8}] = true
			}
		}
		if len(colours) < 3 {
			t.Errorf("%s: only %d distinct colours in the image", name, len(colours))
		}
	}
}

func TestErrors(t *testing.T) {
	cases := map[string]Chart{
		"nil":             nil,
		"nil line":        (*Line)(nil),
		"nil area":        (*StackedArea)(nil),
		"nil bars":        (*Bars)(nil),
		"line mismatch":   Line{Series: []Series{{Name: "a", X: []float64{1, 2}, Y: []float64{1}}}},
		"area mismatch":   StackedArea{X: []float64{1, 2}, Layers: []Series{{Name: "a", Y: []float64{1}}}},
		"bars mismatch":   Bars{Labels: []string{"a", "b"}, Stacks: []Series{{Y: []float64{1}}}},
		"bars mismatch 2": &Bars{Labels: []string{"a"}, Stacks: []Series{{Y: []float64{1}}, {Y: []float64{1, 2}}}},
	}
	for name, c := range cases {
		if err := WriteSVG(&bytes.Buffer{}, c); err == nil {
			t.Errorf("%s: WriteSVG gave no error", name)
		}
		if err := WritePNG(&bytes.Buffer{}, c); err == nil {
			t.Errorf("%s: WritePNG gave no error", name)
		}
	}
}

// TestDegenerate draws inputs that tend to break layouts: single points,
// constant values, NaN and infinities, negatives, empty bars, odd text.
func TestDegenerate(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	cases := map[string]Chart{
		"one point":    Line{Series: []Series{{X: []float64{5}, Y: []float64{7}}}},
		"constant":     Line{YUnit: UnitBytes, Series: []Series{{X: []float64{0, 1, 2}, Y: []float64{0, 0, 0}}}},
		"nan inf":      Line{Series: []Series{{X: []float64{0, 1, nan, 3, 4}, Y: []float64{1, inf, 2, nan, 3}}}},
		"negative":     Line{YUnit: UnitDuration, Series: []Series{{X: []float64{0, 1, 2}, Y: []float64{-5e6, 2e6, -1e3}}}},
		"empty bars":   Bars{Title: "none"},
		"bars no data": Bars{Labels: []string{"a", "b"}},
		"neg bars":     Bars{Horizontal: true, Labels: []string{"a", "b"}, Stacks: []Series{{Y: []float64{-3, 5}}, {Y: []float64{2, -1}}}},
		"area empty":   StackedArea{X: []float64{1, 2}},
		"odd text":     Line{Title: "a <b> & \"c\"\x00\xff", Series: []Series{{Name: "</text>", X: []float64{0, 1}, Y: []float64{1, 2}}}},
		"many series":  manySeries(40),
	}
	for name, c := range cases {
		var buf bytes.Buffer
		if err := WriteSVG(&buf, c); err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		s := buf.String()
		if strings.Contains(s, "NaN") || strings.Contains(s, "Inf") {
			t.Errorf("%s: SVG contains NaN or Inf", name)
		}
		if strings.Contains(s, "<b>") || strings.Contains(s, "\x00") || strings.Count(s, "<text") != strings.Count(s, "</text>") {
			t.Errorf("%s: text not escaped", name)
		}
		if err := WritePNG(&bytes.Buffer{}, c); err != nil {
			t.Errorf("%s: png: %v", name, err)
		}
	}
}

func manySeries(n int) Line {
	var l Line
	for i := 0; i < n; i++ {
		l.Series = append(l.Series, Series{Name: fmt.Sprintf("rank %d", i), X: []float64{0, 1}, Y: []float64{float64(i), float64(i + 1)}})
	}
	return l
}
