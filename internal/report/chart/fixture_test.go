package chart

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// timelineCategories names the columns of prof.export_memory_timeline rows
// (column 0 is unused by PyTorch and always 0).
var timelineCategories = []string{"", "parameter", "optimizer state", "input", "temporary", "activation", "gradient", "autograd detail", "unknown"}

// TestFixtureMemoryTimeline draws the real profiler memory timeline of the
// 4-layer GPT-2 run as a stacked area: the peak total must survive
// decimation, and both writers must succeed.
func TestFixtureMemoryTimeline(t *testing.T) {
	// The fixture as PyTorch wrote it (../shared/fixtures), gzipped.
	f, err := os.Open(filepath.Join("testdata", "gpt2tiny_memory_timeline.json.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	var d [2]json.RawMessage
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatal(err)
	}
	var times []float64
	var rows [][]float64
	if err := json.Unmarshal(d[0], &times); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(d[1], &rows); err != nil {
		t.Fatal(err)
	}
	if len(times) != 2326 || len(rows) != len(times) {
		t.Fatalf("%d times, %d rows; the fixture has 2326 of each", len(times), len(rows))
	}
	a := StackedArea{Title: "GPT-2 tiny: memory by category (profiler timeline)", XLabel: "time", YLabel: "memory", YUnit: UnitBytes, XUnit: UnitDuration}
	for _, us := range times {
		a.X = append(a.X, (us-times[0])*1000)
	}
	peak, peakAt := 0.0, 0
	for c := 1; c < len(timelineCategories); c++ {
		l := Series{Name: timelineCategories[c], Y: make([]float64, len(rows))}
		for i, r := range rows {
			l.Y[i] = r[c]
		}
		a.Layers = append(a.Layers, l)
	}
	for i, r := range rows {
		sum := 0.0
		for _, v := range r {
			sum += v
		}
		if sum > peak {
			peak, peakAt = sum, i
		}
	}
	if peak != 1551809536 {
		t.Fatalf("peak total %v, want 1551809536 bytes", peak)
	}
	idx := areaIndices(a.X, a.Layers, axis{min: a.X[0], max: a.X[len(a.X)-1]}, plotBox{x0: 60, x1: 460})
	kept := false
	for _, i := range idx {
		kept = kept || i == peakAt
	}
	if !kept || len(idx) >= len(a.X) {
		t.Errorf("peak at %d kept: %v; %d of %d points kept", peakAt, kept, len(idx), len(a.X))
	}
	var svg, png bytes.Buffer
	if err := WriteSVG(&svg, a); err != nil {
		t.Fatal(err)
	}
	if err := WritePNG(&png, a); err != nil {
		t.Fatal(err)
	}
	if *pngDir != "" {
		os.WriteFile(filepath.Join(*pngDir, "fixture_timeline.png"), png.Bytes(), 0o644)
	}
}
