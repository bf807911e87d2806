package memreport

import (
	"bytes"
	"io"
	"testing"

	"github.com/ptscope/ptscope/internal/memory"
	"github.com/ptscope/ptscope/internal/report"
	"github.com/ptscope/ptscope/internal/report/chart"
	"github.com/ptscope/ptscope/internal/snapshot"
	"github.com/ptscope/ptscope/internal/snapshot/snapgen"
)

// report1M analyses a generated 1,000,000-entry snapshot (about 340
// training steps) and returns its analyze document.
func report1M(b *testing.B) *memory.Report {
	b.Helper()
	var buf bytes.Buffer
	if err := snapgen.Write(&buf, snapgen.Options{Entries: 1_000_000, Seed: 1}); err != nil {
		b.Fatal(err)
	}
	s, err := snapshot.Read(&buf)
	if err != nil {
		b.Fatal(err)
	}
	rep := memory.NewReport()
	rep.Inputs = append(rep.Inputs, &memory.Input{Path: "snap_1m.pickle", Format: s.Format, Bytes: s.InputBytes,
		Devices: []*memory.Result{memory.Analyze(s, 0, memory.Options{}).Result}})
	return rep
}

// BenchmarkRunFiles1M draws the run folder's README.md and every SVG chart
// of a 1M-entry snapshot's result (what --out adds to --json).
func BenchmarkRunFiles1M(b *testing.B) {
	doc := New(report1M(b))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := doc.RunFiles(report.DefaultText()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPNG1M rasterises the same charts as PNG, to see what PNG
// output would add.
func BenchmarkPNG1M(b *testing.B) {
	rep := report1M(b)
	charts := DeviceCharts(rep.Inputs[0], rep.Inputs[0].Devices[0])
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, c := range charts {
			if err := chart.WritePNG(io.Discard, c.Chart); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkText1M writes the terminal report of a 1M-entry snapshot.
func BenchmarkText1M(b *testing.B) {
	rep := report1M(b)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := WriteText(io.Discard, rep, report.DefaultText()); err != nil {
			b.Fatal(err)
		}
	}
}
