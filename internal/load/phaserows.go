package load

import (
	"github.com/ptscope/ptscope/internal/capture"
	"github.com/ptscope/ptscope/internal/memory"
)

// PhaseRows returns the phases table of a bundle rank (before/after/delta
// per forward, backward and optimizer of every step) with each phase's peak
// from the given analyses, as Snapshots fills memory.Input.Phases; for a
// server that loads a bundle's snapshots one by one.
func PhaseRows(r *capture.Rank, devs []*memory.Analysis) []memory.PhaseRow {
	return phaseRows(r, devs, r.Info.Windowed())
}
