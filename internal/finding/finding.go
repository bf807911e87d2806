// Package finding is the one diagnosis type of every ptscope analysis
// (memory, trace, estimate, diff, fleet): an id, a typed severity, the
// numbers the diagnosis rests on, a message and a recommendation. Analyses
// produce findings; renderers only format them.
package finding

import (
	"fmt"
	"sort"
)

// Severity orders findings by what they cost the user.
type Severity uint8

// Severities, from least to most urgent.
const (
	Info Severity = iota
	Warning
	Critical
)

var severityNames = [...]string{"info", "warning", "critical"}

func (s Severity) String() string {
	if int(s) < len(severityNames) {
		return severityNames[s]
	}
	return fmt.Sprintf("severity(%d)", s)
}

// MarshalText writes the severity's name ("info", "warning", "critical").
func (s Severity) MarshalText() ([]byte, error) {
	if int(s) >= len(severityNames) {
		return nil, fmt.Errorf("finding: invalid severity %d", s)
	}
	return []byte(severityNames[s]), nil
}

// UnmarshalText reads a severity's name.
func (s *Severity) UnmarshalText(b []byte) error {
	v, err := ParseSeverity(string(b))
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// ParseSeverity reads "info", "warning" or "critical".
func ParseSeverity(name string) (Severity, error) {
	for i, n := range severityNames {
		if n == name {
			return Severity(i), nil
		}
	}
	return 0, fmt.Errorf("unknown severity %q (info, warning, critical)", name)
}

// Numbers are the values a finding rests on, named with the project's JSON
// unit suffixes (_bytes, _ns, _ratio, _count; plain names for other counts),
// so that a renderer, a diff or a CI check can use them without parsing the
// message.
type Numbers map[string]float64

// Ref points at the place in a view that shows a finding; every field is
// optional. The web UI turns it into a link.
type Ref struct {
	View       string `json:"view,omitempty"`        // timeline, state, steps, operators, kernels, trace, ranks
	Device     *int   `json:"device,omitempty"`      // device ordinal of a memory finding
	Rank       *int   `json:"rank,omitempty"`        // rank of a trace or fleet finding
	EventIndex *int   `json:"event_index,omitempty"` // snapshot trace entry
	Step       *int   `json:"step,omitempty"`        // step number
	TimeNS     *int64 `json:"time_ns,omitempty"`     // Unix ns (memory) or trace ns
	Name       string `json:"name,omitempty"`        // operator, kernel, stack or module name
}

// Finding is one diagnosis with what to do about it.
type Finding struct {
	ID             string   `json:"id"`
	Severity       Severity `json:"severity"`
	Numbers        Numbers  `json:"numbers,omitempty"`
	Message        string   `json:"message"`
	Recommendation string   `json:"recommendation,omitempty"`
	At             *Ref     `json:"at,omitempty"`
}

// New returns a finding; numbers may be nil.
func New(id string, sev Severity, numbers Numbers, message, recommendation string) Finding {
	return Finding{ID: id, Severity: sev, Numbers: numbers, Message: message, Recommendation: recommendation}
}

// Sort orders findings most severe first, then by id, keeping the analysis'
// order among equals.
func Sort(fs []Finding) {
	sort.SliceStable(fs, func(i, j int) bool {
		if fs[i].Severity != fs[j].Severity {
			return fs[i].Severity > fs[j].Severity
		}
		return fs[i].ID < fs[j].ID
	})
}

// Max is the highest severity among fs (Info when fs is empty).
func Max(fs []Finding) Severity {
	var m Severity
	for _, f := range fs {
		m = max(m, f.Severity)
	}
	return m
}

// Has reports whether fs holds a finding with this id.
func Has(fs []Finding, id string) bool {
	for _, f := range fs {
		if f.ID == id {
			return true
		}
	}
	return false
}

// Int is a helper for Ref fields.
func Int(v int) *int { return &v }

// Int64 is a helper for Ref fields.
func Int64(v int64) *int64 { return &v }
