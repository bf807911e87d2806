package load

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/ptscope/ptscope/internal/bundle"
	"github.com/ptscope/ptscope/internal/memory"
)

// addBundle analyses every snapshot of a ptscope run bundle (of the ranks
// o.Ranks names, when set), with the device capacity from its manifest, the
// precision and the phases it recorded, and the tensor inventories that say
// what its blocks are. Rank folders are read one at a time: a rank's side
// files stay in memory only as its inputs' models.
func (set *SnapshotSet) addBundle(ctx context.Context, dir string, o SnapshotOptions) error {
	b, err := bundle.ListBundle(dir)
	if err != nil {
		return err
	}
	before := len(set.Report.Inputs)
	for _, lr := range b.Ranks {
		if o.Ranks != nil && !contains(o.Ranks, lr.Rank) {
			continue
		}
		r, err := bundle.ReadRank(lr.Dir, lr.Rank)
		if err != nil {
			return err
		}
		if err := set.addBundleRank(ctx, b, r, o); err != nil {
			return err
		}
	}
	if len(set.Report.Inputs) == before {
		if o.Ranks != nil {
			return fmt.Errorf("%s: the bundle holds no snapshots and no phases of rank %v", dir, o.Ranks)
		}
		return fmt.Errorf("%s: the bundle holds no snapshots and no phases", dir)
	}
	return nil
}

// BundleRank analyses the snapshots of one rank of a bundle as Snapshots
// does for the whole bundle (b may come from bundle.ListBundle and r from
// bundle.ReadRank), for a reader of many ranks that keeps one at a time.
// A rank with neither snapshots nor phases gives an empty set.
func BundleRank(ctx context.Context, b *bundle.Bundle, r *bundle.Rank, o SnapshotOptions) (*SnapshotSet, error) {
	set := &SnapshotSet{Report: memory.NewReport()}
	err := set.addBundleRank(ctx, b, r, o)
	set.Report.Compare()
	return set, err
}

// BundleSnapshot analyses one snapshot file of rank r of b (b may come
// from bundle.ReadBundle) as Snapshots does inside the bundle: with the
// rank's device capacity and limit, precision, inventories, counters and
// phases, which a bare read of the file does not have; for a server that
// loads a bundle's snapshots one by one.
func BundleSnapshot(ctx context.Context, b *bundle.Bundle, r *bundle.Rank, path string, o SnapshotOptions) (*SnapshotSet, error) {
	set := &SnapshotSet{Report: memory.NewReport()}
	if err := ctx.Err(); err != nil {
		return set, err
	}
	mo, info := rankOptions(b, r, o)
	err := set.addRankFile(path, o, mo, b, r, info, nil)
	set.Report.Compare()
	return set, err
}

// addRankFile analyses snapshot path of rank r of b with the rank's
// options mo and bundle info (skipped: the rank's snapshots left out).
func (set *SnapshotSet) addRankFile(path string, o SnapshotOptions, mo memory.Options, b *bundle.Bundle, r *bundle.Rank,
	info func() *memory.BundleInfo, skipped []memory.SkippedSnapshot) error {
	err := set.addFile(path, o, mo, b, r)
	k := len(set.Report.Inputs) - 1
	in := set.Report.Inputs[k]
	in.Bundle = info()
	in.Bundle.SkippedSnapshots = skipped
	if err != nil {
		return err
	}
	in.Phases = phaseRows(r, set.Inputs[k].Devices, false)
	return nil
}

// rankOptions are the analysis options of rank r of b (o's, completed by
// what the rank recorded) and its bundle information.
func rankOptions(b *bundle.Bundle, r *bundle.Rank, o SnapshotOptions) (memory.Options, func() *memory.BundleInfo) {
	total := r.Info.DeviceTotalMemoryBytes
	if total == 0 {
		total = b.Manifest.DeviceTotalMemoryBytes
	}
	mo := o.Memory
	if mo.DeviceMemory == 0 {
		mo.DeviceMemory = total
	}
	if p := r.Info.Precision; p != nil {
		mo.Precision = &memory.Precision{ParameterBytesByDtype: p.ParameterBytesByDtype, Autocast: p.AutocastCUDA,
			AutocastDtype: p.AutocastDtype, FSDP: p.FSDP}
	}
	mo.Roles = rankRoles(r)
	mo.PeakMarks = peakMarks(r)
	mo.PhaseStarts = phaseStarts(r)
	mo.StackWindows = stackWindows(r)
	if x := r.OOM; x != nil && x.DeviceAllocatedBytes > 0 && (total == 0 || x.DeviceAllocatedBytes < total) {
		// the OOM observer reports the process's own limit
		// (set_per_process_memory_fraction) in place of the device's total
		// when one is set
		mo.AllowedBytes = x.DeviceAllocatedBytes
	}
	gpu := r.Info.DeviceName
	if gpu == "" {
		gpu = b.Manifest.DeviceName
	}
	info := func() *memory.BundleInfo {
		return &memory.BundleInfo{Dir: b.Dir, Rank: r.Rank, GPU: gpu, DeviceTotalBytes: total,
			Simulated: b.Manifest.Simulated, Mode: b.Manifest.Mode, Simulation: b.Manifest.SimulationSummary(),
			Unfinished: r.Info.Unfinished()}
	}
	return mo, info
}

// addBundleRank analyses the snapshots of one rank of b.
func (set *SnapshotSet) addBundleRank(ctx context.Context, b *bundle.Bundle, r *bundle.Rank, o SnapshotOptions) error {
	mo, info := rankOptions(b, r, o)
	if len(r.Snapshots) == 0 && len(r.Phases) > 0 {
		// No allocator snapshot (--no-gpu runs, or memory history off):
		// the phases the companion measured are the result.
		in := &memory.Input{Path: r.Dir, Format: "ptscope run bundle (phases only, no snapshot)", Devices: []*memory.Result{},
			Bundle: info()}
		in.Phases = phaseRows(r, nil, false)
		set.Report.Inputs = append(set.Report.Inputs, in)
		set.Inputs = append(set.Inputs, &SnapshotInput{Path: r.Dir, Bundle: b, Rank: r})
		return nil
	}
	var snaps []string
	var skipped []memory.SkippedSnapshot
	if part := WindowParts(r); part != nil {
		// one run; other snapshots (--snapshot-at) stay inputs of their own
		if err := set.addWindowedRank(ctx, b, r, o, mo, info(), part); err != nil {
			return err
		}
		for _, p := range r.Snapshots {
			if !part[filepath.Base(p)] {
				snaps = append(snaps, p)
			}
		}
	} else {
		snaps, skipped = rankSnapshots(r)
	}
	for _, path := range snaps {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := set.addRankFile(path, o, mo, b, r, info, skipped); err != nil {
			return err
		}
	}
	return nil
}

// rankSnapshots are the snapshots of r to analyse, and those left out: the
// snapshot written at exit when it only repeats the OOM observer's. That
// one holds the same history up to the out-of-memory error, and the
// exception's unwinding after it; with no phase started after the error,
// the run did not go on (a run that catches the error and trains on keeps
// both). Reading the end snapshot's file by its path still analyses it.
func rankSnapshots(r *bundle.Rank) ([]string, []memory.SkippedSnapshot) {
	x := r.OOM
	if x == nil || x.Snapshot == "" {
		return r.Snapshots, nil
	}
	var oom, end bool
	for _, p := range r.Snapshots {
		oom = oom || filepath.Base(p) == x.Snapshot
		end = end || filepath.Base(p) == endSnapshot
	}
	if !oom || !end || ranOn(r) {
		return r.Snapshots, nil
	}
	var keep []string
	var skipped []memory.SkippedSnapshot
	for _, p := range r.Snapshots {
		if filepath.Base(p) == endSnapshot {
			skipped = append(skipped, memory.SkippedSnapshot{Path: p,
				Reason: "written at exit after the out-of-memory error, with no step after it: the history of " + x.Snapshot + " and the error's unwinding"})
			continue
		}
		keep = append(keep, p)
	}
	return keep, skipped
}

// endSnapshot is the snapshot ptscope run writes at process exit.
const endSnapshot = "snapshot_end.pickle"

// phaseRows turns the phases a rank recorded into rows, with each phase's
// peak taken from the snapshots' replay where one covers the phase. With
// windows (a rank whose history was recorded in windows), or without any
// snapshot, a phase no snapshot covers takes the running maximum where it
// rose inside the phase: the new maximum is the phase's peak.
func phaseRows(r *bundle.Rank, devs []*memory.Analysis, windows bool) []memory.PhaseRow {
	var rows []memory.PhaseRow
	for _, ph := range r.Phases {
		row := memory.PhaseRow{Phase: ph.Name, Rank: ph.Rank, Step: ph.Step, StartNS: ph.StartTimeUs * 1000, EndNS: ph.EndTimeUs * 1000,
			AllocatedBeforeBytes: ph.AllocatedBeforeBytes, AllocatedAfterBytes: ph.AllocatedAfterBytes,
			DeltaBytes: ph.AllocatedAfterBytes - ph.AllocatedBeforeBytes, PeakBytes: -1, ReservedAfterBytes: ph.ReservedAfterBytes,
			MaxAllocatedBytes: max(ph.MaxAllocatedBeforeBytes, ph.MaxAllocatedAfterBytes),
			MaxReservedBytes:  max(ph.MaxReservedBeforeBytes, ph.MaxReservedAfterBytes)}
		for _, d := range devs {
			if res := d.Result; res.HasTime && (res.LastTimeNS < row.StartNS || res.FirstTimeNS > row.EndNS) {
				continue // the phase is outside the snapshot's trace (another window's)
			}
			if p, ok := d.Replay.PeakBetween(ph.StartTimeUs, ph.EndTimeUs); ok {
				row.PeakBytes = max(row.PeakBytes, p)
			}
		}
		if (len(devs) == 0 || windows && row.PeakBytes < 0) && ph.MaxAllocatedAfterBytes > ph.MaxAllocatedBeforeBytes {
			// Without a snapshot: the running maximum rose inside the phase,
			// so the new maximum is this phase's peak.
			row.PeakBytes = ph.MaxAllocatedAfterBytes
		}
		rows = append(rows, row)
	}
	return rows
}
