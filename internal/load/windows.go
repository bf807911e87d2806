package load

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/ptscope/ptscope/internal/bundle"
	"github.com/ptscope/ptscope/internal/memory"
	"github.com/ptscope/ptscope/internal/units"
)

// addWindowedRank reads a rank whose allocator history was recorded only in
// stack windows, a snapshot each (bundle.RankInfo.Windowed), as one run
// from the snapshots named in part (WindowParts):
// one Input whose device result is the analysis of the snapshot that holds
// the highest peak (the out-of-memory snapshot when the rank ran out),
// given the run (memory.Run) measured by the phases' counters over every
// step, the leak stacks the windows left behind and the state at the end.
// The window, end and OOM snapshots are not inputs of their own; any other
// snapshot of the rank (--snapshot-at) is, as in a rank of history mode
// "run". Data flows one way: this reads the snapshots; memory decides
// what the run is from their analyses (memory/windowed.go).
func (set *SnapshotSet) addWindowedRank(ctx context.Context, b *bundle.Bundle, r *bundle.Rank, o SnapshotOptions,
	mo memory.Options, info *memory.BundleInfo, part map[string]bool) error {
	oomName := ""
	if r.OOM != nil {
		oomName = r.OOM.Snapshot
	}
	// every snapshot of the run, analysed on its own first
	ws := &windowSnaps{r: r, sub: &SnapshotSet{Report: memory.NewReport()}, byName: map[string]int{}}
	defer func() { set.arenas = append(set.arenas, ws.sub.arenas...) }()
	errs, err := ws.read(ctx, b, o, mo, part)
	if err != nil {
		return err
	}

	// the snapshot of the view at the peak, and the windows' rows
	caught := r.OOM != nil && ranOn(r)
	names := make([]string, len(r.Snapshots))
	for i, path := range r.Snapshots {
		names[i] = filepath.Base(path)
	}
	base := memory.PeakView(names, ws.dev, oomName, endSnapshot, caught)
	rows, windows, steady := memory.WindowRows(ws.stackWindows(names, part), base, ws.dev, ws.errOf)

	info.HistoryMode, info.PeakSnapshot = bundle.HistoryWindows, base
	in := &memory.Input{Path: r.Dir, Bytes: ws.bytes, Devices: []*memory.Result{}, Bundle: info, StackWindows: rows,
		Format: fmt.Sprintf("ptscope run bundle (allocator history in %s)", units.Plural(len(rows), "stack window", "stack windows"))}
	m := &SnapshotInput{Path: r.Dir, Bundle: b, Rank: r}
	set.Report.Inputs = append(set.Report.Inputs, in)
	set.Inputs = append(set.Inputs, m)
	in.Phases = phaseRows(r, windows, true)
	if base == "" {
		in.Error = "no snapshot of the run could be read"
		if len(errs) == 0 {
			in.Error = "the run wrote no snapshot"
		}
		return errors.Join(errs...)
	}

	run := ws.run(windows, steady, base, oomName, caught)
	b0 := ws.dev(base)
	bo := mo
	bo.Run = run
	if x := r.OOM; x != nil && base == oomName && !b0.Result.HasHistory {
		bo.Roles = memory.RolesUntil(bo.Roles, x.TimeUs*1000)
	}
	a := analyzeSafe(b0, bo)
	if a == nil {
		in.Error = fmt.Sprintf("%s: internal error analysing the run (please report it)", filepath.Join(r.Dir, base))
		return errors.Join(append(errs, errors.New(in.Error))...)
	}
	in.Devices = []*memory.Result{a.Result}
	m.Snapshot, m.Devices = a.Snapshot, []*memory.Analysis{a}
	return errors.Join(errs...)
}

// windowSnaps is the snapshots of a windowed rank's run (r), each
// analysed on its own in sub.
type windowSnaps struct {
	r      *bundle.Rank
	sub    *SnapshotSet
	byName map[string]int // file name -> index in sub
	bytes  int64          // the snapshots' bytes
}

// read analyses the snapshots of r named in part, in order. It returns
// the errors of those that could not be read, and err when ctx ends.
func (ws *windowSnaps) read(ctx context.Context, b *bundle.Bundle, o SnapshotOptions, mo memory.Options, part map[string]bool) (errs []error, err error) {
	sub := ws.sub
	for _, path := range ws.r.Snapshots {
		name := filepath.Base(path)
		if !part[name] {
			continue
		}
		if err := ctx.Err(); err != nil {
			return errs, err
		}
		if err := sub.addFile(path, o, mo, b, ws.r); err != nil {
			errs = append(errs, err)
		}
		k := len(sub.Inputs) - 1
		ws.byName[name] = k
		ws.bytes += sub.Report.Inputs[k].Bytes
	}
	return errs, nil
}

// dev is the analysis of snapshot name for the rank's device (its first
// device when it has not that one), nil when it was not read.
func (ws *windowSnaps) dev(name string) *memory.Analysis {
	k, ok := ws.byName[name]
	if !ok {
		return nil
	}
	in := ws.sub.Inputs[k]
	for _, a := range in.Devices {
		if a.Result.Device == ws.r.Info.DeviceIndex {
			return a
		}
	}
	if len(in.Devices) > 0 {
		return in.Devices[0]
	}
	return nil
}

// errOf is why snapshot name could not be read ("" when it was, or was
// not tried).
func (ws *windowSnaps) errOf(name string) string {
	if k, ok := ws.byName[name]; ok {
		return ws.sub.Report.Inputs[k].Error
	}
	return ""
}

// stackWindows is the rank's stack windows: those process.json lists, then
// those saved as the process was killed, before it listed them (names:
// the rank's snapshots; part: those of the run), whose steps are those
// their trace holds.
func (ws *windowSnaps) stackWindows(names []string, part map[string]bool) []memory.StackWindow {
	r := ws.r
	listed := make([]memory.StackWindow, 0, len(r.Info.StackWindows))
	for _, w := range r.Info.StackWindows {
		listed = append(listed, memory.StackWindow{FirstStep: w.FirstStep, LastStep: w.LastStep, Reason: w.Reason, Snapshot: w.Snapshot,
			StartNS: w.StartTimeUs * 1000, EndNS: w.EndTimeUs * 1000})
	}
	for _, name := range names {
		if part[name] && unlistedWindow(r, name) {
			if a := ws.dev(name); a != nil {
				listed = append(listed, memory.UnlistedWindow(a, name))
			}
		}
	}
	return listed
}

// run is the rank's run as the phases' counters measured it, viewed at
// snapshot base: its out-of-memory error (in snapshot oomName; caught
// when the program went on), the state at the end and the leak stacks
// the windows left behind.
func (ws *windowSnaps) run(windows, steady []*memory.Analysis, base, oomName string, caught bool) *memory.Run {
	r := ws.r
	run := memory.RunFromPhases(phaseCounters(r.Phases), r.Info.MaxAllocatedBytes, r.Info.MaxReservedBytes, windows)
	run.Snapshot = base
	if x := r.OOM; x != nil {
		rec := memory.OOMRecord{RequestedBytes: x.RequestedBytes, DeviceFreeBytes: x.DeviceFreeBytes,
			TimeNS: x.TimeUs * 1000, Phase: x.Phase, Step: x.Step}
		_, read := ws.byName[oomName]
		run.OOM, run.OOMElsewhere = memory.RunOOM(rec, x.Count, base, oomName, filepath.Join(r.Dir, oomName), caught, read, ws.errOf(oomName))
	}
	end := ws.dev(endSnapshot)
	if end != nil && base != endSnapshot && base != oomName {
		e := end.Result
		run.End, run.EndFragmentation = &e.End, &e.Fragmentation
	}
	run.LeakStacks = memory.SteadyLeak(windows, steady, end)
	return run
}

// ranOn reports whether rank r, which ran out of memory (r.OOM), went on
// after its first error: a phase began after it, so the program caught
// the error.
func ranOn(r *bundle.Rank) bool { return memory.WentOn(phaseStarts(r), r.OOM.TimeUs*1000) }

// windowParts are the file names of the snapshots a windowed rank's run is
// read from: its windows' (with one saved as the process was killed,
// before process.json listed it), the end and the OOM snapshot.
func windowParts(r *bundle.Rank) map[string]bool {
	part := map[string]bool{endSnapshot: true}
	if r.OOM != nil && r.OOM.Snapshot != "" {
		part[r.OOM.Snapshot] = true
	}
	for _, w := range r.Info.StackWindows {
		if w.Snapshot != "" {
			part[w.Snapshot] = true
		}
	}
	for _, path := range r.Snapshots {
		if name := filepath.Base(path); unlistedWindow(r, name) {
			part[name] = true
		}
	}
	return part
}

// unlistedWindow reports whether snapshot name of rank r is a window
// snapshot (snapshot_windowN.pickle, as the companion names them) that
// none of r's stack windows names, in a rank whose process did not finish:
// saved in the moment between its snapshot and the process.json that
// would have listed it, when the process was killed.
func unlistedWindow(r *bundle.Rank, name string) bool {
	n, pre := strings.CutPrefix(name, "snapshot_window")
	n, suf := strings.CutSuffix(n, ".pickle")
	if !pre || !suf || !r.Info.Unfinished() {
		return false
	}
	if _, err := strconv.ParseUint(n, 10, 31); err != nil {
		return false
	}
	for _, w := range r.Info.StackWindows {
		if w.Snapshot == name {
			return false
		}
	}
	return true
}

// WindowParts are, for a bundle rank recorded in stack windows that wrote
// snapshots, the file names of the snapshots its run is read from as one
// (the windows', the end and the OOM snapshot); nil for any other rank,
// whose snapshots are each an input of their own.
func WindowParts(r *bundle.Rank) map[string]bool {
	if !r.Info.Windowed() || len(r.Snapshots) == 0 {
		return nil
	}
	return windowParts(r)
}

// analyzeSafe analyses the device of b again with o, nil on a panic (a
// bug).
func analyzeSafe(b *memory.Analysis, o memory.Options) (a *memory.Analysis) {
	defer func() {
		if recover() != nil {
			a = nil
		}
	}()
	return memory.Analyze(b.Snapshot, b.Result.Device, o)
}

// phaseCounters are a bundle rank's phases as memory.RunFromPhases takes
// them.
func phaseCounters(phases []bundle.Phase) []memory.PhaseCounters {
	out := make([]memory.PhaseCounters, len(phases))
	for i, ph := range phases {
		out[i] = memory.PhaseCounters{Name: ph.Name, Step: ph.Step, StartNS: ph.StartTimeUs * 1000, EndNS: ph.EndTimeUs * 1000,
			AllocatedBeforeBytes: ph.AllocatedBeforeBytes, AllocatedAfterBytes: ph.AllocatedAfterBytes,
			MaxAllocatedBefore: ph.MaxAllocatedBeforeBytes, MaxAllocatedAfter: ph.MaxAllocatedAfterBytes,
			MaxReservedAfter: ph.MaxReservedAfterBytes, Aborted: ph.Aborted}
	}
	return out
}
