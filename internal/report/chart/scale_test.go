package chart

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

func TestNewAxis(t *testing.T) {
	cases := []struct {
		lo, hi   float64
		u        Unit
		target   int
		extend   bool
		min, max float64
		labels   string
	}{
		{0, 5.16 * gib, UnitBytes, 6, true, 0, 6 * gib, "0|1 GiB|2 GiB|3 GiB|4 GiB|5 GiB|6 GiB"},
		{0, 1.1 * gib, UnitBytes, 6, true, 0, 1.2 * gib, "0|0.2 GiB|0.4 GiB|0.6 GiB|0.8 GiB|1.0 GiB|1.2 GiB"},
		{0, 700, UnitBytes, 4, true, 0, 800, "0|200 B|400 B|600 B|800 B"},
		{0, 3, UnitBytes, 10, true, 0, 3, "0|1 B|2 B|3 B"}, // no fractional bytes
		{0, 900 * ms, UnitDuration, 5, true, 0, 1000 * ms, "0|200 ms|400 ms|600 ms|800 ms|1000 ms"},
		{0, 2.5e9, UnitDuration, 10, false, 0, 2.5e9, "0|0.25 s|0.50 s|0.75 s|1.00 s|1.25 s|1.50 s|1.75 s|2.00 s|2.25 s|2.50 s"},
		{130, 4200, UnitDuration, 5, false, 130, 4200, "1 us|2 us|3 us|4 us"},
		{0.05, 0.97, UnitPercent, 5, true, 0, 1, "0|20%|40%|60%|80%|100%"},
		{0, 1e6, UnitPlain, 5, false, 0, 1e6, "0|0.2M|0.4M|0.6M|0.8M|1.0M"},
		{-3, 5, UnitPlain, 4, true, -4, 6, "-4|-2|0|2|4|6"},
		{7, 7, UnitPlain, 4, true, 6, 8, "6.0|6.5|7.0|7.5|8.0"},
		{0, 0, UnitBytes, 4, true, 0, 1, "0|1 B"},
		{math.NaN(), 3, UnitPlain, 4, true, 0, 1, "0|0.25|0.50|0.75|1.00"},
	}
	for _, c := range cases {
		a := newAxis(c.lo, c.hi, c.u, c.target, c.extend)
		if a.min != c.min || math.Abs(a.max-c.max) > 1e-6*math.Abs(c.max) {
			t.Errorf("newAxis(%v, %v, %v): range [%v, %v], want [%v, %v]", c.lo, c.hi, c.u, a.min, a.max, c.min, c.max)
		}
		if got := strings.Join(a.labels, "|"); got != c.labels {
			t.Errorf("newAxis(%v, %v, %v): labels %s, want %s", c.lo, c.hi, c.u, got, c.labels)
		}
		if len(a.ticks) != len(a.labels) {
			t.Errorf("%d ticks for %d labels", len(a.ticks), len(a.labels))
		}
	}
}

func TestNiceStep(t *testing.T) {
	cases := []struct {
		span   float64
		target int
		want   float64
	}{
		{10, 5, 2}, {10, 4, 2.5}, {10, 10, 1}, {1, 3, 0.5}, {7, 1, 10}, {0.003, 3, 0.001}, {0, 5, 1}, {-1, 5, 1},
	}
	for _, c := range cases {
		if got := niceStep(c.span, c.target); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("niceStep(%v, %d) = %v, want %v", c.span, c.target, got, c.want)
		}
	}
}

func TestValueLabel(t *testing.T) {
	cases := []struct {
		u    Unit
		v    float64
		want string
	}{
		{UnitBytes, 5538270208, "5.16 GiB"},
		{UnitBytes, 512, "512 B"},
		{UnitDuration, 412.6 * ms, "413 ms"}, // three significant digits
		{UnitDuration, 334e3, "334 us"},
		{UnitPercent, 0.934, "93.4%"},
		{UnitPlain, 42, "42"},
		{UnitPlain, 0.125, "0.125"},
		{UnitPlain, 12345, "12.3k"},
		{UnitPlain, 2.5e9, "2.50G"},
		{UnitPlain, math.NaN(), "n/a"},
	}
	for _, c := range cases {
		if got := valueLabel(c.u, c.v); got != c.want {
			t.Errorf("valueLabel(%v, %v) = %q, want %q", c.u, c.v, got, c.want)
		}
	}
}

func TestTruncate(t *testing.T) {
	f, err := loadFaces()
	if err != nil {
		t.Fatal(err)
	}
	long := "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
	for _, max := range []float64{20, 60, 150, 300} {
		got := f.truncate(long, 11, false, max)
		if w := f.measure(got, 11, false); w > max {
			t.Errorf("truncate to %v: %q is %v wide", max, got, w)
		}
		if !strings.HasSuffix(got, "…") || !strings.HasPrefix(long, strings.TrimSuffix(got, "…")) {
			t.Errorf("truncate to %v: %q is not a prefix plus ellipsis", max, got)
		}
		// One more rune would not have fitted.
		n := len([]rune(got)) - 1
		if longer := string([]rune(long)[:n+1]) + "…"; f.measure(longer, 11, false) <= max {
			t.Errorf("truncate to %v: %q is shorter than needed", max, got)
		}
	}
	if got := f.truncate("aten::mm", 11, false, 300); got != "aten::mm" {
		t.Errorf("short text changed to %q", got)
	}
	if got := f.truncate("aten::mm", 11, false, 2); got != "" {
		t.Errorf("nothing fits in 2 px, got %q", got)
	}
	// Liberation Sans digits are 0.556 em wide.
	if w := f.measure("0000", 10, false); math.Abs(w-22.24) > 0.01 {
		t.Errorf(`width of "0000" at 10 px = %v, want 22.24`, w)
	}
}

func texts(s *scene) []string {
	var out []string
	for _, it := range s.items {
		if it.kind == kindText {
			out = append(out, it.text)
		}
	}
	return out
}

func TestLegendOverflow(t *testing.T) {
	s, err := manySeries(60).plan()
	if err != nil {
		t.Fatal(err)
	}
	var shown int
	note := ""
	for _, tx := range texts(s) {
		if strings.HasPrefix(tx, "rank ") {
			shown++
		}
		if strings.HasSuffix(tx, " more") {
			note = tx
		}
	}
	if shown == 0 || shown >= 60 {
		t.Fatalf("%d of 60 legend entries shown", shown)
	}
	if want := fmt.Sprintf("+%d more", 60-shown); note != want {
		t.Errorf("note %q, want %q", note, want)
	}
	// With few series every entry is shown and there is no note.
	s, _ = manySeries(5).plan()
	for _, tx := range texts(s) {
		if strings.HasSuffix(tx, " more") {
			t.Errorf("unexpected note %q", tx)
		}
	}
}

func TestMarkerLabelsDoNotOverlap(t *testing.T) {
	l := Line{Series: []Series{{X: []float64{0, 100}, Y: []float64{0, 1}}}}
	for i := 0; i <= 100; i += 2 {
		l.Markers = append(l.Markers, Marker{X: float64(i), Label: fmt.Sprintf("step %d", i)})
	}
	l.Markers = append(l.Markers, Marker{X: 500, Label: "outside"})
	s, err := l.plan()
	if err != nil {
		t.Fatal(err)
	}
	f, _ := loadFaces()
	type span struct{ a, b float64 }
	var spans []span
	dashed := 0
	for _, it := range s.items {
		if it.kind == kindPath && len(it.dash) > 0 {
			dashed++
		}
		if it.kind == kindText && strings.HasPrefix(it.text, "step ") {
			spans = append(spans, span{it.x, it.x + f.measure(it.text, it.size, false)})
		}
		if it.text == "outside" {
			t.Error("marker outside the x range was drawn")
		}
	}
	if dashed != 51 {
		t.Errorf("%d marker lines, want 51", dashed)
	}
	if len(spans) < 5 || len(spans) == 51 {
		t.Errorf("%d marker labels shown; want some, not all", len(spans))
	}
	for i := 1; i < len(spans); i++ {
		if spans[i].a < spans[i-1].b {
			t.Errorf("marker labels %d and %d overlap", i-1, i)
		}
	}
}

// TestSeriesColoursStable checks that series i keeps its colour when other
// series are added or removed after it.
func TestSeriesColoursStable(t *testing.T) {
	for n := 1; n <= 25; n++ {
		s, err := manySeries(n).plan()
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < n; i++ {
			if p := seriesPath(t, s, i); p.stroke != hex(palette[i%len(palette)]) {
				t.Fatalf("series %d of %d has colour %v", i, n, p.stroke)
			}
		}
	}
	seen := map[rgba]bool{}
	for i := 0; i < len(palette); i++ {
		seen[seriesColor(i)] = true
	}
	if len(seen) != len(palette) {
		t.Errorf("palette has duplicate colours")
	}
}

func TestHorizontalBarsCapped(t *testing.T) {
	b := Bars{Horizontal: true, Unit: UnitBytes}
	y := make([]float64, 1000)
	for i := range y {
		b.Labels = append(b.Labels, fmt.Sprintf("tensor %d", i))
		y[i] = float64(1000-i) * mib
	}
	b.Stacks = []Series{{Y: y}}
	s, err := b.plan()
	if err != nil {
		t.Fatal(err)
	}
	if s.h > maxHBars*rowH+200 {
		t.Errorf("canvas %v px high for 1000 bars", s.h)
	}
	var note bool
	var bars int
	for _, tx := range texts(s) {
		note = note || tx == "+850 more not shown"
		if strings.HasPrefix(tx, "tensor ") {
			bars++
		}
	}
	if !note || bars != maxHBars {
		t.Errorf("note %v, %d labels drawn; want the note and %d", note, bars, maxHBars)
	}
	if len(b.Labels) != 1000 || len(b.Stacks[0].Y) != 1000 {
		t.Error("caller's chart was modified")
	}
}
