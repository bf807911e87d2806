// Package export writes ptscope's models in the formats other tools read:
// pprof profiles (go tool pprof), Chrome trace JSON (ui.perfetto.dev,
// chrome://tracing), PyTorch's memory_viz snapshot JSON, and folded stacks
// (flamegraph.pl, speedscope).
//
// The memory exports draw from one device of an allocator snapshot and its
// replay (Memory); the trace export streams a Kineto trace's raw events and
// never builds its model. Writers stream to an io.Writer; none keeps a copy
// of its output.
package export

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ptscope/ptscope/internal/memory"
	"github.com/ptscope/ptscope/internal/snapshot"
	"github.com/ptscope/ptscope/internal/units"
)

// Memory is one device of an allocator snapshot, replayed: what the memory
// exports draw from.
type Memory struct {
	Snap   *snapshot.Snapshot
	Device int
	Replay *memory.Replay // allocations with their categories
	Phases *memory.Phases // steps and per-entry phases; nil if unknown
	// Peak is the trace entry at which allocated memory peaked, from the
	// analysis (-1: before the first entry, e.g. a snapshot without trace).
	Peak int
	// Path names the input in comments and metadata.
	Path string
}

// FromAnalysis is the Memory of one analysed device of the snapshot at path.
func FromAnalysis(a *memory.Analysis, path string) *Memory {
	return &Memory{Snap: a.Snapshot, Device: a.Result.Device, Replay: a.Replay, Phases: a.Phases,
		Peak: a.Result.Peak.EventIndex, Path: path}
}

// Entries is the number of trace entries of the device.
func (m *Memory) Entries() int { return m.Replay.Timeline.Len() }

// AllocatedAt returns the allocated bytes just after entry i (i = -1:
// before the first entry).
func (m *Memory) AllocatedAt(i int) int64 {
	if i < 0 {
		return m.Replay.Baseline.Allocated
	}
	return m.Replay.Timeline.Allocated[i]
}

// timeUS returns entry i's time in microseconds, or i itself when the trace
// carries no times (a stand-in clock of one microsecond per entry).
func (m *Memory) timeUS(i int) int64 {
	if !m.Snap.Trace(m.Device).HasTime || i < 0 || i >= m.Entries() {
		return int64(i)
	}
	return m.Replay.Timeline.TimeUS[i]
}

// PointKind says how a Point names a moment of the trace.
type PointKind uint8

// Point kinds.
const (
	AtPeak   PointKind = iota // the peak of allocated memory
	AtEnd                     // after the last entry (the dump)
	AtStart                   // before the first entry
	AtEvent                   // just after trace entry N
	AtStep                    // the peak within step N
	AtOffset                  // the last entry at most D after the first entry's time
)

// Point is a moment of a snapshot's trace as a user names it: "peak",
// "end", "start", an entry index ("560"), a step ("step:3") or a time
// since the first entry ("1.5s", "250ms").
type Point struct {
	Kind   PointKind
	N      int           // entry index (AtEvent) or step index (AtStep)
	Offset time.Duration // AtOffset
}

// ParsePoint parses the --at/--from/--to syntax.
func ParsePoint(s string) (Point, error) {
	t := strings.TrimSpace(strings.ToLower(s))
	switch t {
	case "", "peak":
		return Point{Kind: AtPeak}, nil
	case "end":
		return Point{Kind: AtEnd}, nil
	case "start":
		return Point{Kind: AtStart}, nil
	}
	if rest, ok := strings.CutPrefix(t, "step:"); ok {
		n, err := strconv.Atoi(rest)
		if err != nil || n < 0 {
			return Point{}, fmt.Errorf("invalid step %q (want step:N, N from 0 as analyze numbers them)", s)
		}
		return Point{Kind: AtStep, N: n}, nil
	}
	if n, err := strconv.Atoi(strings.TrimPrefix(t, "event:")); err == nil {
		if n < -1 {
			return Point{}, fmt.Errorf("invalid entry index %q", s)
		}
		return Point{Kind: AtEvent, N: n}, nil
	}
	if d, err := time.ParseDuration(t); err == nil && d >= 0 {
		return Point{Kind: AtOffset, Offset: d}, nil
	}
	return Point{}, fmt.Errorf("invalid point %q (want peak, end, start, an entry index, step:N or a time since the first entry such as 1.5s)", s)
}

// Resolve maps p to a trace entry index (-1: before the first entry) and
// describes it ("entry 560 (peak)").
func (m *Memory) Resolve(p Point) (int, string, error) {
	n := m.Entries()
	if n == 0 && p.Kind != AtOffset && (p.Kind != AtEvent || p.N == -1) && p.Kind != AtStep {
		return -1, fmt.Sprintf("the dump (no trace recorded, %s allocated)", units.Bytes(m.AllocatedAt(-1))), nil
	}
	switch p.Kind {
	case AtPeak:
		return m.Peak, fmt.Sprintf("entry %d (peak, %s allocated)", m.Peak, units.Bytes(m.AllocatedAt(m.Peak))), nil
	case AtEnd:
		return n - 1, fmt.Sprintf("entry %d (end of the trace)", n-1), nil
	case AtStart:
		return -1, "before the first entry", nil
	case AtEvent:
		if p.N >= n {
			return 0, "", fmt.Errorf("entry %d is out of range: device %d has %d trace entries", p.N, m.Device, n)
		}
		return p.N, fmt.Sprintf("entry %d", p.N), nil
	case AtStep:
		if m.Phases == nil || p.N >= len(m.Phases.Steps) {
			return 0, "", fmt.Errorf("step %d is out of range: device %d has %d steps", p.N, m.Device, m.steps())
		}
		st := m.Phases.Steps[p.N]
		return st.PeakIdx, fmt.Sprintf("entry %d (peak of step %d, %s)", st.PeakIdx, p.N, st.Name), nil
	case AtOffset:
		if !m.Snap.Trace(m.Device).HasTime || n == 0 {
			return 0, "", fmt.Errorf("device %d's trace has no times: give an entry index instead of %s", m.Device, p.Offset)
		}
		t := m.Replay.Timeline.TimeUS
		limit := t[0] + p.Offset.Microseconds()
		// times repeat and may, rarely, step back: the entry before the
		// first one past the limit, in file order
		i := n - 1
		for k, v := range t {
			if v > limit {
				i = k - 1
				break
			}
		}
		return i, fmt.Sprintf("entry %d (%s after the first entry)", i, p.Offset), nil
	}
	return 0, "", fmt.Errorf("unknown point kind %d", p.Kind)
}

func (m *Memory) steps() int {
	if m.Phases == nil {
		return 0
	}
	return len(m.Phases.Steps)
}

// Window is a range of trace entries [Lo, Hi], both included.
type Window struct{ Lo, Hi int }

// StepWindow returns the entries of steps first..last (inclusive, indexes as
// analyze numbers them).
func (m *Memory) StepWindow(first, last int) (Window, error) {
	if first > last {
		return Window{}, fmt.Errorf("step range %d-%d is empty", first, last)
	}
	if last >= m.steps() {
		return Window{}, fmt.Errorf("step %d is out of range: device %d has %d steps", last, m.Device, m.steps())
	}
	return Window{m.Phases.Steps[first].Start, m.Phases.Steps[last].End - 1}, nil
}

// frameText renders a frame for folded stacks and pprof function names:
// "name (path/file.py:123)" with the path trimmed as the reports trim it.
func frameText(f snapshot.Frame) string {
	name := f.Name
	if name == "" {
		name = "??"
	}
	if f.Filename == "" {
		return name
	}
	return name + " (" + memory.TrimPath(f.Filename) + ":" + strconv.Itoa(f.Line) + ")"
}

// noStack names the frame of an allocation whose stack was not recorded.
const noStack = "<no stack recorded>"
