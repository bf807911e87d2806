// Package diff compares two results of the same kind: the analyses of two
// snapshots (memory.Result, per device), of two traces (perf.Rank, per rank),
// of two ptscope run bundles (both), or of two folders of ranks matched by
// rank. Every compared number carries both sides and the change; groups
// (categories, stacks, sources, modules, operators, kernels) are matched by
// name or by stack, never by address, and are complete: renderers trim.
// It reads results only, so that documents (--json) could be compared as
// well as fresh analyses.
package diff

import (
	"github.com/ptscope/ptscope/internal/envelope"
	"github.com/ptscope/ptscope/internal/finding"
	"github.com/ptscope/ptscope/internal/memory"
	"github.com/ptscope/ptscope/internal/perf"
)

// Input is one side of a comparison: what was loaded from its path.
type Input struct {
	Path   string
	Memory *memory.Report // nil when the side holds no snapshot
	Trace  *perf.Report   // nil when the side holds no trace
}

// Report is the document of `ptscope diff A B` (docs/json.md, "diff").
type Report struct {
	envelope.Header
	A Side `json:"a"`
	B Side `json:"b"`
	// Memory has one entry per device result found on both sides, Trace
	// one per rank found on both sides.
	Memory    []MemoryDiff `json:"memory"`
	Trace     []TraceDiff  `json:"trace"`
	Unmatched []Unmatched  `json:"unmatched"` // results found on one side only
	// Findings say what changed, most severe first (ids in docs/diff.md);
	// each pair also lists the findings of its own analyses that appeared
	// or were resolved.
	Findings []finding.Finding `json:"findings"`
}

// Side describes one input of the comparison.
type Side struct {
	Path    string `json:"path"`
	Devices int    `json:"devices"` // snapshot device results
	Ranks   int    `json:"ranks"`   // trace ranks
}

// Unmatched is a result on one side with no partner on the other.
type Unmatched struct {
	Side string `json:"side"` // "a" or "b"
	Kind string `json:"kind"` // "memory" or "trace"
	Key  string `json:"key"`
	Path string `json:"path"`
}

// Bytes compares a size.
type Bytes struct {
	A     int64 `json:"a_bytes"`
	B     int64 `json:"b_bytes"`
	Delta int64 `json:"delta_bytes"` // B - A
	// Change is (B - A) / A, signed and unbounded; absent when A is 0.
	Change *float64 `json:"change_ratio,omitempty"`
}

// Duration compares a time span.
type Duration struct {
	A      int64    `json:"a_ns"`
	B      int64    `json:"b_ns"`
	Delta  int64    `json:"delta_ns"`
	Change *float64 `json:"change_ratio,omitempty"`
}

// Count compares a count (possibly an average, such as calls per step).
type Count struct {
	A      float64  `json:"a_count"`
	B      float64  `json:"b_count"`
	Delta  float64  `json:"delta_count"`
	Change *float64 `json:"change_ratio,omitempty"`
}

// Ratio compares a ratio (utilisation, efficiency); Delta is the
// difference B - A, not a relative change.
type Ratio struct {
	A     float64 `json:"a_ratio"`
	B     float64 `json:"b_ratio"`
	Delta float64 `json:"delta_ratio"`
}

func change(a, b float64) *float64 {
	if a == 0 {
		return nil
	}
	c := (b - a) / a
	return &c
}

func bytesOf(a, b int64) Bytes {
	return Bytes{A: a, B: b, Delta: b - a, Change: change(float64(a), float64(b))}
}

func durationOf(a, b int64) Duration {
	return Duration{A: a, B: b, Delta: b - a, Change: change(float64(a), float64(b))}
}

func countOf(a, b float64) Count {
	return Count{A: a, B: b, Delta: b - a, Change: change(a, b)}
}

func ratioOf(a, b float64) Ratio { return Ratio{A: a, B: b, Delta: b - a} }

// Status says how a matched group changed.
type Status uint8

// Statuses.
const (
	Same   Status = iota // equal on both sides
	Grown                // larger in B
	Shrunk               // smaller in B
	New                  // only in B
	Gone                 // only in A
)

var statusNames = [...]string{"same", "grown", "shrunk", "new", "gone"}

func (s Status) String() string {
	if int(s) < len(statusNames) {
		return statusNames[s]
	}
	return "invalid"
}

// MarshalText writes the status's name.
func (s Status) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText reads a status's name.
func (s *Status) UnmarshalText(b []byte) error {
	for i, n := range statusNames {
		if n == string(b) {
			*s = Status(i)
			return nil
		}
	}
	return &unknownStatus{string(b)}
}

type unknownStatus struct{ s string }

func (u *unknownStatus) Error() string { return "diff: unknown status " + u.s }

// statusOf classifies a group present on side A (inA), on side B (inB),
// with the values a and b.
func statusOf(inA, inB bool, a, b float64) Status {
	switch {
	case !inA:
		return New
	case !inB:
		return Gone
	case b > a:
		return Grown
	case b < a:
		return Shrunk
	}
	return Same
}

// Compare compares a with b. Results are paired as docs/diff.md says:
// when each side has one result of a kind, those two; otherwise by rank,
// snapshot name and device (memory) or by rank (traces).
func Compare(a, b Input) *Report {
	rep := &Report{Header: envelope.NewHeader("diff"), A: side(a), B: side(b), Memory: []MemoryDiff{}, Trace: []TraceDiff{},
		Unmatched: []Unmatched{}, Findings: []finding.Finding{}}
	if a.Memory != nil && b.Memory != nil {
		pairs, un := pairMemory(a.Memory, b.Memory)
		for _, p := range pairs {
			rep.Memory = append(rep.Memory, compareMemory(p))
		}
		rep.Unmatched = append(rep.Unmatched, un...)
	}
	if a.Trace != nil && b.Trace != nil {
		pairs, un := pairRanks(a.Trace, b.Trace)
		for _, p := range pairs {
			rep.Trace = append(rep.Trace, compareRanks(p[0], p[1]))
		}
		rep.Unmatched = append(rep.Unmatched, un...)
	}
	rep.Findings = findings(rep)
	return rep
}

func side(in Input) Side {
	s := Side{Path: in.Path}
	if in.Memory != nil {
		for _, x := range in.Memory.Inputs {
			s.Devices += len(x.Devices)
		}
	}
	if in.Trace != nil {
		s.Ranks = len(in.Trace.Ranks)
	}
	return s
}
