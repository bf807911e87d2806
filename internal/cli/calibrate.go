package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/ptscope/ptscope/internal/capture"
	"github.com/ptscope/ptscope/internal/estimate"
	"github.com/ptscope/ptscope/internal/units"
)

// measurementFromBundle reads the rank to compare from a run bundle: the
// simulated rank of a simulated run, else the lowest rank.
func measurementFromBundle(dir string) (estimate.Measurement, error) {
	var m estimate.Measurement
	b, err := capture.ReadBundle(dir)
	if err != nil {
		return m, err
	}
	if len(b.Ranks) == 0 {
		return m, fmt.Errorf("%s: the bundle captured no rank", b.Dir)
	}
	r := b.Ranks[0]
	m = estimate.Measurement{Source: b.Dir, Rank: r.Rank, Mode: b.Manifest.Mode, Simulated: b.Manifest.Simulated,
		MaxAllocatedBytes: r.Info.MaxAllocatedBytes}
	if m.Mode == "" {
		m.Mode = capture.ModeCapture
	}
	for _, p := range r.Phases {
		m.Phases = append(m.Phases, estimate.PhaseMeasure{Name: p.Name, Step: p.Step,
			AllocatedBefore: p.AllocatedBeforeBytes, AllocatedAfter: p.AllocatedAfterBytes,
			MaxAllocatedBefore: p.MaxAllocatedBeforeBytes, MaxAllocatedAfter: p.MaxAllocatedAfterBytes,
			Nested: p.Parent != "", Aborted: p.Aborted})
	}
	return m, nil
}

// runCalibrate prints the estimate r against the run in bundle, term by term.
func runCalibrate(e *env, r *estimate.Result, bundle string, asJSON bool) error {
	m, err := measurementFromBundle(bundle)
	if err != nil {
		return usagef("estimate: --calibrate: %v", err)
	}
	c := estimate.Calibrate(r, m)
	if asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			SchemaVersion int `json:"schema_version"`
			estimate.Calibration
		}{1, c})
	}
	writeCalibration(e.stdout, r, c)
	return nil
}

func writeCalibration(w io.Writer, r *estimate.Result, c estimate.Calibration) {
	kind := "a real run"
	switch c.Mode {
	case capture.ModeSimulateWorld:
		kind = "a simulated rank (--simulate-world-size)"
	case capture.ModeFake:
		kind = "a fake-tensor run (--no-gpu)"
	}
	fmt.Fprintf(w, "ptscope estimate --calibrate: %s (%.1fM params) against %s, rank %d\n  %s\n\n", r.Model.Name, float64(r.Params)/1e6, kind, c.Rank, c.Source)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  term\testimate\tmeasured\tdiff\t")
	for _, row := range c.Rows {
		meas, diff := "-", "-"
		if row.Measured {
			meas = units.Bytes(row.MeasuredBytes)
			diff = signedBytes(row.DiffBytes)
			if row.MeasuredBytes > 0 {
				diff += fmt.Sprintf(" (%+.1f%%)", 100*row.DiffRatio)
			}
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t\n", row.Term, units.Bytes(row.EstimateBytes), meas, diff)
	}
	tw.Flush()
	fmt.Fprintln(w, "\nhow each measured number is derived:")
	for _, row := range c.Rows {
		fmt.Fprintf(w, "  %s: %s\n", row.Term, row.How)
	}
	for _, n := range c.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
}

func signedBytes(n int64) string {
	if n < 0 {
		return "-" + units.Bytes(-n)
	}
	return "+" + units.Bytes(n)
}
