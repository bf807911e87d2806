package estreport

import (
	"fmt"
	"io"

	"github.com/ptscope/ptscope/internal/estimate"
	"github.com/ptscope/ptscope/internal/report"
	"github.com/ptscope/ptscope/internal/units"
)

// Mode names of a measured run (capture.Mode*).
const (
	modeSimulateWorld = "simulate-world"
	modeFake          = "fake"
)

func writeCalibration(w io.Writer, c *estimate.Calibration, o report.TextOptions) error {
	p := &printer{w: w, o: o}
	kind := "a real run"
	switch c.Mode {
	case modeSimulateWorld:
		kind = "a simulated rank (--simulate-world-size)"
	case modeFake:
		kind = "a fake-tensor run (--no-gpu)"
	}
	p.para("", "  ", fmt.Sprintf("ptscope estimate --calibrate: %s (%s params) against %s, rank %d", c.Model.Name, Params(c.Params), kind, c.Rank))
	p.para("  ", "  ", c.Source)
	p.blank()
	t := &report.Table{Header: []string{"term", "estimate", "measured", "diff"}}
	for _, row := range c.Rows {
		meas, diff := "-", "-"
		if row.Measured {
			meas = units.Bytes(row.MeasuredBytes)
			diff = signedBytes(row.DiffBytes)
			if row.MeasuredBytes > 0 {
				diff += fmt.Sprintf(" (%+.1f%%)", 100*row.DiffRatio)
			}
		}
		t.Rows = append(t.Rows, []string{row.Term, units.Bytes(row.EstimateBytes), meas, diff})
	}
	p.table(t)
	p.section("How each measured number is derived")
	for _, row := range c.Rows {
		p.para("  ", "    ", row.Term+": "+row.How)
	}
	for _, n := range c.Notes {
		p.para("note: ", "  ", n)
	}
	return p.err
}

func signedBytes(n int64) string {
	if n < 0 {
		return "-" + units.Bytes(-n)
	}
	return "+" + units.Bytes(n)
}
