package cli

import (
	"encoding/json"
	"io"

	"github.com/ptscope/ptscope/internal/envelope"
)

// checkDoc is the document of `check --json`: every threshold applied, to
// which input, with the measured value and the limit, and the verdict.
type checkDoc struct {
	envelope.Header
	Passed bool          `json:"passed"`
	Checks []checkRecord `json:"checks"`
	// Failures are the exceeded thresholds as the text names them (a
	// fleet's failure names the worst ranks).
	Failures []string `json:"failures"`
}

// checkRecord is one threshold applied to one input. Metric carries the
// unit of Value and Limit in its suffix (_bytes, _ratio, _count); a
// baseline check compares the change, a ratio of the baseline's value.
type checkRecord struct {
	Input  string `json:"input"`
	Device int    `json:"device"` // -1: not a snapshot device
	Rank   int    `json:"rank"`   // -1: no rank
	Metric string `json:"metric"`
	// Value is null for a baseline check of growth from nothing (the
	// baseline had none of it): a change no limit allows; and for a
	// threshold the input cannot be checked against (a phases-only bundle
	// has no fragmentation, leak or OOM record).
	Value  *float64 `json:"value"`
	Limit  float64  `json:"limit"`
	Passed bool     `json:"passed"`
}

// checkLog collects the records of check --json; nil without --json, when
// the text lines are the output.
type checkLog struct {
	records []checkRecord
}

func (l *checkLog) add(input string, device, rank int, metric string, value *float64, limit float64, passed bool) {
	if l != nil {
		l.records = append(l.records, checkRecord{input, device, rank, metric, value, limit, passed})
	}
}

func num[T int | int64 | float64](v T) *float64 {
	f := float64(v)
	return &f
}

// write writes the document; failures are those of the thresholdError
// that check returns, if any.
func (l *checkLog) write(w io.Writer, failures []string) error {
	doc := checkDoc{Header: envelope.NewHeader("check"), Passed: len(failures) == 0, Checks: l.records, Failures: failures}
	if doc.Checks == nil {
		doc.Checks = []checkRecord{}
	}
	if doc.Failures == nil {
		doc.Failures = []string{}
	}
	return json.NewEncoder(w).Encode(doc)
}
