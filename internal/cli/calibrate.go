package cli

import (
	"fmt"
	"os"

	"github.com/ptscope/ptscope/internal/bundle"
	"github.com/ptscope/ptscope/internal/capture"
	"github.com/ptscope/ptscope/internal/estimate"
)

// measurementFromBundle reads the rank to compare from a run bundle: the
// simulated rank of a simulated run, else the lowest rank.
func measurementFromBundle(dir string) (estimate.Measurement, error) {
	var m estimate.Measurement
	if st, err := os.Stat(dir); err == nil && !st.IsDir() {
		return m, usagef("%s is a file; --calibrate takes the folder of a ptscope run bundle (ptscope run or simulate writes one; a snapshot is read by ptscope analyze)", dir)
	}
	b, err := bundle.ReadBundle(dir)
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
