package estreport

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/ptscope/ptscope/internal/estimate"
	"github.com/ptscope/ptscope/internal/report"
	"github.com/ptscope/ptscope/internal/report/rundir"
	"github.com/ptscope/ptscope/internal/units"
	"github.com/ptscope/ptscope/internal/whatif"
)

// WhatIf is a prediction from a run (`estimate --from`) as a report.Document.
type WhatIf struct{ R *whatif.Result }

// MarshalJSON writes the result.
func (d WhatIf) MarshalJSON() ([]byte, error) { return json.Marshal(d.R) }

// WriteText writes the run, the prediction and their difference per term.
func (d WhatIf) WriteText(w io.Writer, o report.TextOptions) error { return writeWhatIf(w, d.R, o) }

// RunFiles: the report is all.
func (d WhatIf) RunFiles(report.TextOptions) ([]rundir.File, error) { return nil, nil }

// RunName is "whatif_<model>".
func (d WhatIf) RunName() string { return "whatif_" + d.R.Model.Name }

func writeWhatIf(w io.Writer, r *whatif.Result, o report.TextOptions) error {
	p := &printer{w: w, o: o}
	run := r.Run
	p.para("", "  ", fmt.Sprintf("ptscope estimate --from %s (rank %d): %s, %s params", run.Source, run.Rank, r.Model.Name, Params(r.Params)))
	p.para("", "  ", "the run: "+jobText(r.RunSetup))
	if len(r.Changes) == 0 {
		p.line("changes: none (the run's own job)")
	} else {
		p.para("", "  ", "changes: "+strings.Join(r.Changes, ", "))
	}
	p.section("Run and prediction, term by term (* measured in the run)")
	t := &report.Table{Header: []string{"term", "run", "predicted", "change"},
		Align: []report.Align{report.Left, report.Right, report.Right, report.Right}}
	for _, row := range r.Rows {
		run := units.Bytes(row.RunBytes)
		if row.Measured {
			run += " *"
		} else {
			run += "  "
		}
		t.Rows = append(t.Rows, []string{row.Term, run, units.Bytes(row.PredictBytes), change(row.DiffBytes, row.RunBytes)})
	}
	p.table(t)
	p.section("Phases (allocated at each phase's peak)")
	pt := &report.Table{Header: []string{"phase", "run", "predicted", "at"},
		Align: []report.Align{report.Left, report.Right, report.Right, report.Left}}
	for _, ph := range r.Phases {
		run := units.Bytes(ph.RunBytes) + ifs(ph.Measured, " *", "  ")
		name := ph.Name.String() + ifs(ph.Name == r.PeakPhase, " *", "")
		pt.Rows = append(pt.Rows, []string{name, run, units.Bytes(ph.PredictBytes), ph.At})
	}
	p.table(pt)
	p.blank()
	if r.Verdict != estimate.VerdictUnknown {
		head := *r.HeadroomBytes
		how := fmt.Sprintf("with %s headroom", units.Bytes(head))
		if head < 0 {
			how = fmt.Sprintf("by %s", units.Bytes(-head))
		}
		p.para("", "  ", fmt.Sprintf("verdict: %s on %s (%s) %s", VerdictText(r.Verdict), r.Device.Name, units.Bytes(r.Device.MemoryBytes), how))
	}
	if len(r.Proposals) > 0 {
		writeProposals(p, r.Proposals, "Changes that fit, cheapest first (predicted from this run)")
	}
	p.section("How each prediction is made")
	for _, row := range r.Rows {
		p.para("  ", "    ", row.Term+": "+row.How)
	}
	for _, n := range r.Notes {
		p.para("note: ", "  ", n)
	}
	return p.err
}

// WriteProposals writes the changes that fit, as analyze lists them.
func WriteProposals(w io.Writer, ps []whatif.Proposal, o report.TextOptions, title string) error {
	p := &printer{w: w, o: o}
	writeProposals(p, ps, title)
	return p.err
}

func writeProposals(p *printer, ps []whatif.Proposal, title string) {
	p.section(title)
	t := &report.Table{Header: []string{"change", "peak allocated", "device total", "headroom", "verdict"},
		Align: []report.Align{report.Left, report.Right, report.Right, report.Right, report.Left}}
	for _, pr := range ps {
		ch := pr.Flags
		if pr.Env != "" && ch == "--expandable-segments" {
			ch = pr.Env
		}
		t.Rows = append(t.Rows, []string{ch, units.Bytes(pr.PeakAllocatedBytes), units.Bytes(pr.DeviceTotalBytes),
			units.Bytes(pr.HeadroomBytes), VerdictText(pr.Verdict)})
	}
	p.table(t)
	for _, pr := range ps {
		p.para("  ", "    ", pr.Flags+": "+pr.Why)
	}
}

// jobText is a setup on one line.
func jobText(s estimate.Setup) string {
	mode := "training"
	if s.ForwardOnly {
		mode = "inference"
	}
	t := fmt.Sprintf("%s, seq %d x micro-batch %d", mode, s.Seq, s.MicroBatch)
	if s.GradAccum > 1 {
		t += fmt.Sprintf(", grad-accum %d", s.GradAccum)
	}
	t += ", " + Assumptions(s) + ", " + Layout(s)
	if s.ExpandableSegments {
		t += ", expandable segments"
	}
	return t
}

// change is a signed size with its ratio to the run's.
func change(d, run int64) string {
	if d == 0 {
		return "0"
	}
	s := signedBytes(d)
	if run > 0 {
		s += fmt.Sprintf(" (%+.1f%%)", 100*float64(d)/float64(run))
	}
	return s
}
