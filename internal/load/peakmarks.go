package load

import (
	"github.com/ptscope/ptscope/internal/bundle"
	"github.com/ptscope/ptscope/internal/memory"
)

// peakMarks are the process's own max_memory_allocated readings of a
// bundle rank: at every phase boundary, and at exit (process.json).
func peakMarks(r *bundle.Rank) []memory.PeakMark {
	var out []memory.PeakMark
	for _, ph := range r.Phases {
		if ph.MaxAllocatedBeforeBytes > 0 {
			out = append(out, memory.PeakMark{TimeNS: ph.StartTimeUs * 1000, MaxAllocatedBytes: ph.MaxAllocatedBeforeBytes})
		}
		if ph.MaxAllocatedAfterBytes > 0 {
			out = append(out, memory.PeakMark{TimeNS: ph.EndTimeUs * 1000, MaxAllocatedBytes: ph.MaxAllocatedAfterBytes})
		}
	}
	if r.Info.MaxAllocatedBytes > 0 && r.Info.EndTimeUs > 0 {
		out = append(out, memory.PeakMark{TimeNS: r.Info.EndTimeUs * 1000, MaxAllocatedBytes: r.Info.MaxAllocatedBytes})
	}
	return out
}

// phaseStarts are the phases of a bundle rank with the allocated bytes each
// began with.
func phaseStarts(r *bundle.Rank) []memory.PhaseStart {
	out := make([]memory.PhaseStart, 0, len(r.Phases))
	for _, ph := range r.Phases {
		out = append(out, memory.PhaseStart{StartNS: ph.StartTimeUs * 1000, EndNS: ph.EndTimeUs * 1000, AllocatedBytes: ph.AllocatedBeforeBytes})
	}
	return out
}

// stackWindows are the spans whose allocations recorded a Python stack,
// as the rank's process.json says (nil when it says nothing: an older
// bundle, or stacks off).
func stackWindows(r *bundle.Rank) []memory.TimeSpan {
	if r.Info.History == nil || !r.Info.History.Switchable {
		return nil
	}
	out := []memory.TimeSpan{}
	for _, w := range r.Info.StackWindows {
		out = append(out, memory.TimeSpan{FromNS: w.StartTimeUs * 1000, ToNS: w.EndTimeUs * 1000})
	}
	return out
}
