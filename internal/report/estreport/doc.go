// Package estreport renders memory estimates (internal/estimate results):
// the terminal report of one estimate, the seed-style tables of a sweep,
// the term-by-term comparison with a measured run, and the charts of a run
// folder. It only formats: every number comes from the estimate.
package estreport

import (
	"encoding/json"
	"io"

	"github.com/ptscope/ptscope/internal/estimate"
	"github.com/ptscope/ptscope/internal/report"
	"github.com/ptscope/ptscope/internal/report/rundir"
)

// Estimate is one estimate as a report.Document. Its JSON is the result.
type Estimate struct {
	R *estimate.Result
	// Explain adds every formula, what one layer saves and each phase's terms.
	Explain bool
}

// MarshalJSON writes the result.
func (d Estimate) MarshalJSON() ([]byte, error) { return json.Marshal(d.R) }

// WriteText writes the terminal report.
func (d Estimate) WriteText(w io.Writer, o report.TextOptions) error {
	return writeEstimate(w, d.R, o, d.Explain)
}

// RunFiles are the run folder's charts (phases, and ranks for pipelines)
// and explain.txt, the report with every formula.
func (d Estimate) RunFiles(o report.TextOptions) ([]rundir.File, error) {
	files, err := estimateCharts(d.R)
	if err != nil {
		return nil, err
	}
	if !d.Explain {
		var b writerBuf
		if err := writeEstimate(&b, d.R, o, true); err != nil {
			return nil, err
		}
		files = append(files, rundir.File{Name: "explain.txt", Data: b.Bytes()})
	}
	return files, nil
}

// RunName is "estimate_<model>".
func (d Estimate) RunName() string { return "estimate_" + d.R.Model.Name }

// Sweep is a sweep as a report.Document.
type Sweep struct{ R *estimate.SweepResult }

// MarshalJSON writes the result.
func (d Sweep) MarshalJSON() ([]byte, error) { return json.Marshal(d.R) }

// WriteText writes the sweep's tables.
func (d Sweep) WriteText(w io.Writer, o report.TextOptions) error { return writeSweep(w, d.R, o) }

// RunFiles: a sweep's run folder holds only the report.
func (d Sweep) RunFiles(report.TextOptions) ([]rundir.File, error) { return nil, nil }

// RunName is "estimate_sweep".
func (d Sweep) RunName() string { return "estimate_sweep" }

// Calibration is an estimate set against a measured run, as a report.Document.
type Calibration struct{ C *estimate.Calibration }

// MarshalJSON writes the comparison.
func (d Calibration) MarshalJSON() ([]byte, error) { return json.Marshal(d.C) }

// WriteText writes the term-by-term table.
func (d Calibration) WriteText(w io.Writer, o report.TextOptions) error {
	return writeCalibration(w, d.C, o)
}

// RunFiles: the report is all.
func (d Calibration) RunFiles(report.TextOptions) ([]rundir.File, error) { return nil, nil }

// RunName is "calibrate_<model>".
func (d Calibration) RunName() string { return "calibrate_" + d.C.Model.Name }
