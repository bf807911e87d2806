package cli

import (
	"fmt"

	"github.com/ptscope/ptscope/internal/capture"
	"github.com/ptscope/ptscope/internal/memory"
	"github.com/ptscope/ptscope/internal/report/memreport"
)

// analyzeBundle analyses every snapshot of a ptscope run bundle, with the
// device capacity from its manifest and the phases it recorded.
func analyzeBundle(dir string, f *analyzeFlags, o memory.Options) ([]*memreport.Input, error) {
	b, err := capture.ReadBundle(dir)
	if err != nil {
		return nil, err
	}
	var out []*memreport.Input
	for _, r := range b.Ranks {
		total := r.Info.DeviceTotalMemoryBytes
		if total == 0 {
			total = b.Manifest.DeviceTotalMemoryBytes
		}
		ro := o
		if ro.DeviceMemory == 0 {
			ro.DeviceMemory = total
		}
		if p := r.Info.Precision; p != nil {
			ro.Precision = &memory.Precision{ParameterBytesByDtype: p.ParameterBytesByDtype, Autocast: p.AutocastCUDA,
				AutocastDtype: p.AutocastDtype, FSDP: p.FSDP}
		}
		gpu := r.Info.DeviceName
		if gpu == "" {
			gpu = b.Manifest.DeviceName
		}
		info := func() *memreport.BundleInfo {
			return &memreport.BundleInfo{Dir: b.Dir, Rank: r.Rank, GPU: gpu, DeviceTotalBytes: total,
				Simulated: b.Manifest.Simulated, Mode: b.Manifest.Mode, Simulation: b.Manifest.SimulationSummary()}
		}
		if len(r.Snapshots) == 0 && len(r.Phases) > 0 {
			// No allocator snapshot (--no-gpu runs, or memory history off):
			// the phases the companion measured are the result.
			in := &memreport.Input{Path: r.Dir, Format: "ptscope run bundle (phases only, no snapshot)", Bundle: info()}
			in.Phases = phaseRows(r, in)
			out = append(out, in)
			continue
		}
		for _, path := range r.Snapshots {
			in, err := analyzeSnapshotFile(path, f, ro)
			in.Bundle = info()
			if err != nil {
				out = append(out, in)
				return out, err
			}
			in.Phases = phaseRows(r, in)
			out = append(out, in)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: the bundle holds no snapshots and no phases", dir)
	}
	return out, nil
}

func phaseRows(r capture.Rank, in *memreport.Input) []memreport.PhaseRow {
	var rows []memreport.PhaseRow
	for _, ph := range r.Phases {
		row := memreport.PhaseRow{Phase: ph.Name, Rank: ph.Rank, Step: ph.Step, AllocatedBeforeBytes: ph.AllocatedBeforeBytes,
			AllocatedAfterBytes: ph.AllocatedAfterBytes, DeltaBytes: ph.AllocatedAfterBytes - ph.AllocatedBeforeBytes,
			PeakBytes: -1, ReservedAfterBytes: ph.ReservedAfterBytes}
		for _, d := range in.Devices {
			if p, ok := d.Replay.PeakBetween(ph.StartTimeUs, ph.EndTimeUs); ok {
				row.PeakBytes = max(row.PeakBytes, p)
			}
		}
		if len(in.Devices) == 0 && ph.MaxAllocatedAfterBytes > ph.MaxAllocatedBeforeBytes {
			// Without a snapshot: the running maximum rose inside the phase,
			// so the new maximum is this phase's peak.
			row.PeakBytes = ph.MaxAllocatedAfterBytes
		}
		rows = append(rows, row)
	}
	return rows
}
