// Package check is the policy of `ptscope check`: thresholds applied to
// the results of the analyses (an analyze report, a trace report, a diff,
// a fleet summary), each giving a line per input, a record per threshold
// for check --json, and the failures. cli parses the flags, loads and
// analyses the inputs, and turns failures into exit 1.
package check

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/ptscope/ptscope/internal/envelope"
)

// Limits are check's thresholds on one run (-1 or false: unset).
type Limits struct {
	Peak, Reserved int64   // --max-peak, --max-reserved (bytes)
	Efficiency     float64 // --min-efficiency (0..1)
	NoLeak, NoOOM  bool
	MinGPUUtil     float64 // --min-gpu-util (0..1)
	MaxDataLoader  float64 // --max-dataloader (0..1)
}

// Memory reports whether a memory threshold is set.
func (l Limits) Memory() bool {
	return l.Peak >= 0 || l.Reserved >= 0 || l.Efficiency >= 0 || l.NoLeak || l.NoOOM
}

// Trace reports whether a trace threshold is set.
func (l Limits) Trace() bool { return l.MinGPUUtil >= 0 || l.MaxDataLoader >= 0 }

// ParseRatio reads "0.9", "90%" or "" (unset: -1); flagName names the
// flag in the error.
func ParseRatio(flagName, v string) (float64, error) {
	if v == "" {
		return -1, nil
	}
	t := strings.TrimSuffix(strings.TrimSpace(v), "%")
	x, err := strconv.ParseFloat(t, 64)
	if err != nil || x < 0 {
		return 0, fmt.Errorf("%s: %q is not a ratio (use 0..1 or a percentage)", flagName, v)
	}
	if strings.HasSuffix(strings.TrimSpace(v), "%") || x > 1 {
		x /= 100
	}
	return x, nil
}

// Doc is the document of `check --json`: every threshold applied, to
// which input, with the measured value and the limit, and the verdict.
type Doc struct {
	envelope.Header
	Passed bool     `json:"passed"`
	Checks []Record `json:"checks"`
	// Failures are the exceeded thresholds as the text names them (a
	// fleet's failure names the worst ranks).
	Failures []string `json:"failures"`
}

// Record is one threshold applied to one input. Metric carries the unit of
// Value and Limit in its suffix (_bytes, _ratio, _count); a baseline check
// compares the change, a ratio of the baseline's value.
type Record struct {
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

// Log collects the records of check --json; a nil Log (without --json,
// when the text lines are the output) records nothing.
type Log struct {
	records []Record
}

func (l *Log) add(input string, device, rank int, metric string, value *float64, limit float64, passed bool) {
	if l != nil {
		l.records = append(l.records, Record{input, device, rank, metric, value, limit, passed})
	}
}

func num[T int | int64 | float64](v T) *float64 {
	f := float64(v)
	return &f
}

// Write writes the document; failures are those the checks returned.
func (l *Log) Write(w io.Writer, failures []string) error {
	doc := Doc{Header: envelope.NewHeader("check"), Passed: len(failures) == 0, Checks: l.records, Failures: failures}
	if doc.Checks == nil {
		doc.Checks = []Record{}
	}
	if doc.Failures == nil {
		doc.Failures = []string{}
	}
	return json.NewEncoder(w).Encode(doc)
}
