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
// "run". Data flows one way: this reads and picks; memory analyses.
func (set *SnapshotSet) addWindowedRank(ctx context.Context, b *bundle.Bundle, r *bundle.Rank, o SnapshotOptions,
	mo memory.Options, info *memory.BundleInfo, part map[string]bool) error {
	oomName := ""
	if r.OOM != nil {
		oomName = r.OOM.Snapshot
	}
	// every snapshot of the run, analysed on its own first
	sub := &SnapshotSet{Report: memory.NewReport()}
	defer func() { set.arenas = append(set.arenas, sub.arenas...) }()
	var errs []error
	byName := map[string]int{} // file name -> index in sub
	var bytes int64
	for _, path := range r.Snapshots {
		name := filepath.Base(path)
		if !part[name] {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := sub.addFile(path, o, mo, b, r); err != nil {
			errs = append(errs, err)
		}
		k := len(sub.Inputs) - 1
		byName[name] = k
		bytes += sub.Report.Inputs[k].Bytes
	}
	dev := func(name string) *memory.Analysis {
		k, ok := byName[name]
		if !ok {
			return nil
		}
		in := sub.Inputs[k]
		for _, a := range in.Devices {
			if a.Result.Device == r.Info.DeviceIndex {
				return a
			}
		}
		if len(in.Devices) > 0 {
			return in.Devices[0]
		}
		return nil
	}

	// the snapshot of the view at the peak: the one taken at the error when
	// the run died of it; when the program caught it and went on, the run's
	// peak is where it is
	caught := r.OOM != nil && ranOn(r)
	base := ""
	if a := dev(oomName); a != nil && !caught {
		base = oomName
	} else {
		var best int64 = -1
		for _, path := range r.Snapshots {
			name := filepath.Base(path)
			if a := dev(name); a != nil && a.Result.HasHistory && a.Result.Peak.AllocatedBytes > best {
				base, best = name, a.Result.Peak.AllocatedBytes
			}
		}
		if base == "" && dev(endSnapshot) != nil {
			base = endSnapshot
		}
		if base == "" && dev(oomName) != nil {
			base = oomName // caught, but nothing else of the run could be read
		}
	}

	// The analysed window snapshots, each once, in time order (contiguous
	// windows share one: the set-up and warm-up, a capacity window that
	// goes on from them), and those of the steady state: snapshots none
	// of whose windows is the set-up or a warm-up step.
	var windows, steady []*memory.Analysis
	seen := map[string]bool{}
	warm := map[string]bool{}
	for _, w := range r.Info.StackWindows {
		if w.Reason == "setup" || w.Reason == "warmup" {
			warm[w.Snapshot] = true
		}
	}
	listed := r.Info.StackWindows
	for _, path := range r.Snapshots {
		// a window saved as the process was killed, before process.json
		// listed it (windowParts): its steps are those its trace holds
		if name := filepath.Base(path); part[name] && unlistedWindow(r, name) {
			if a := dev(name); a != nil {
				listed = append(listed, unlisted(a, name))
			}
		}
	}
	rows := make([]memory.StackWindow, 0, len(listed))
	for _, w := range listed {
		row := memory.StackWindow{FirstStep: w.FirstStep, LastStep: w.LastStep, Reason: w.Reason, Snapshot: w.Snapshot,
			StartNS: w.StartTimeUs * 1000, EndNS: w.EndTimeUs * 1000, View: w.Snapshot != "" && w.Snapshot == base}
		if k, ok := byName[w.Snapshot]; ok && sub.Report.Inputs[k].Error != "" {
			row.Error = sub.Report.Inputs[k].Error
		}
		if a := dev(w.Snapshot); a != nil {
			row.Entries = a.Result.Entries
			if a.Result.HasHistory {
				row.PeakAllocatedBytes = a.Result.Peak.AllocatedBytes
			}
			if !seen[w.Snapshot] {
				seen[w.Snapshot] = true
				windows = append(windows, a)
				if !warm[w.Snapshot] {
					steady = append(steady, a)
				}
			}
		}
		rows = append(rows, row)
	}

	info.HistoryMode, info.PeakSnapshot = bundle.HistoryWindows, base
	in := &memory.Input{Path: r.Dir, Bytes: bytes, Devices: []*memory.Result{}, Bundle: info, StackWindows: rows,
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

	run := runOf(r, windows)
	run.Snapshot = base
	if x := r.OOM; x != nil {
		rec := memory.OOMRecord{RequestedBytes: x.RequestedBytes, DeviceFreeBytes: x.DeviceFreeBytes,
			TimeNS: x.TimeUs * 1000, Phase: x.Phase, Step: x.Step}
		if base == oomName {
			run.OOM = &rec
		} else {
			n := &memory.OOMNote{OOMRecord: rec, Count: max(x.Count, 1), Caught: caught, Snapshot: oomName, Path: filepath.Join(r.Dir, oomName)}
			k, read := byName[oomName]
			switch {
			case oomName == "":
				n.SnapshotError = "could not be written"
			case !read:
				n.SnapshotError = "is missing (" + oomName + ")"
			case sub.Report.Inputs[k].Error != "":
				n.SnapshotError = "could not be read: " + sub.Report.Inputs[k].Error
			case !caught:
				n.SnapshotError = "holds no allocator state"
			}
			run.OOMElsewhere = n
		}
	}
	end := dev(endSnapshot)
	if end != nil && base != endSnapshot && base != oomName {
		e := end.Result
		run.End, run.EndFragmentation = &e.End, &e.Fragmentation
	}
	// each steady window's survivors, witnessed by the next snapshot
	held := make([]func(uint64, int64) bool, len(steady))
	for i, a := range steady {
		if next := nextAfter(windows, a, end); next != nil {
			held[i] = next.HeldThroughout()
		}
	}
	run.LeakStacks = memory.WindowLeak(steady, held)

	b0 := dev(base)
	bo := mo
	bo.Run = run
	if x := r.OOM; x != nil && base == oomName && !b0.Result.HasHistory {
		// the OOM snapshot without a trace is the state at the error:
		// the inventories taken after it (at exit) do not describe it
		var keep []memory.Role
		for _, ro := range bo.Roles {
			if ro.TimeNS <= x.TimeUs*1000 {
				keep = append(keep, ro)
			}
		}
		bo.Roles = keep
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

// ranOn reports whether rank r, which ran out of memory (r.OOM), went on
// after its first error: a phase began after it, so the program caught
// the error.
func ranOn(r *bundle.Rank) bool { return memory.WentOn(phaseStarts(r), r.OOM.TimeUs*1000) }

// nextAfter is the snapshot after window a: the next of windows (in time
// order), else the end snapshot when it is another (nil when none).
func nextAfter(windows []*memory.Analysis, a, end *memory.Analysis) *memory.Analysis {
	for i, w := range windows {
		if w == a && i+1 < len(windows) {
			return windows[i+1]
		}
	}
	if end != nil && end != a {
		return end
	}
	return nil
}

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

// unlisted is the stack window record of an unlisted window snapshot
// (unlistedWindow) analysed as a: the steps its trace holds, reason
// "unlisted".
func unlisted(a *memory.Analysis, name string) bundle.StackWindow {
	w := bundle.StackWindow{FirstStep: -1, LastStep: -1, Reason: "unlisted", Snapshot: name}
	first := true
	for _, st := range a.Result.Steps {
		k, ok := st.RunStep()
		if !ok {
			continue
		}
		if first {
			w.FirstStep, w.StartTimeUs, first = k, st.StartNS/1000, false
		}
		w.LastStep, w.EndTimeUs = max(w.LastStep, k), st.EndNS/1000
	}
	return w
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

// runOf is the run of a rank from its phases' counters: every step with
// its end-of-step allocated bytes and peak, and the process's own peak.
// A step's peak is the running max_memory_allocated where it rose inside
// the step (the step set a new high: that is its peak, exactly), else the
// replay's where a window snapshot holds the whole step (never below what
// the counters saw at its phase boundaries), else the most allocated at
// those boundaries, a lower bound (PeakLowerBound).
func runOf(r *bundle.Rank, windows []*memory.Analysis) *memory.Run {
	exact := map[string]int64{}
	for _, a := range windows {
		for _, st := range a.Result.Steps {
			if !st.Partial {
				exact[st.Name] = max(exact[st.Name], st.PeakAllocatedBytes)
			}
		}
	}
	training := false
	for _, ph := range r.Phases {
		training = training || ph.Name == "optimizer"
	}
	type acc struct {
		row                 memory.StepRow
		maxBefore, maxAfter int64
		optimizer           bool
	}
	var steps []*acc
	at := map[int]*acc{}
	run := &memory.Run{MaxAllocatedBytes: r.Info.MaxAllocatedBytes, MaxAllocatedStep: -1, MaxReservedBytes: r.Info.MaxReservedBytes}
	for _, ph := range r.Phases {
		s := at[ph.Step]
		if s == nil {
			s = &acc{row: memory.StepRow{Name: "step " + strconv.Itoa(ph.Step), StartIndex: -1, EndIndex: -1, PeakIndex: -1,
				StartNS: ph.StartTimeUs * 1000, EndNS: ph.EndTimeUs * 1000}, maxBefore: ph.MaxAllocatedBeforeBytes}
			at[ph.Step] = s
			steps = append(steps, s)
		}
		row := &s.row
		row.StartNS = min(row.StartNS, ph.StartTimeUs*1000)
		if e := ph.EndTimeUs * 1000; e >= row.EndNS {
			row.EndNS = e
			row.EndAllocatedBytes = ph.AllocatedAfterBytes
		}
		row.PeakAllocatedBytes = max(row.PeakAllocatedBytes, ph.AllocatedBeforeBytes, ph.AllocatedAfterBytes)
		s.maxBefore = min(s.maxBefore, ph.MaxAllocatedBeforeBytes)
		s.maxAfter = max(s.maxAfter, ph.MaxAllocatedAfterBytes)
		s.optimizer = s.optimizer || ph.Name == "optimizer"
		row.Partial = row.Partial || ph.Aborted
		run.MaxAllocatedBytes = max(run.MaxAllocatedBytes, ph.MaxAllocatedAfterBytes)
		run.MaxReservedBytes = max(run.MaxReservedBytes, ph.MaxReservedAfterBytes)
	}
	for i, s := range steps {
		row := &s.row
		row.Index = i
		row.DurationNS = row.EndNS - row.StartNS
		row.Partial = row.Partial || training && !s.optimizer
		switch p, ok := exact[row.Name]; {
		case s.maxAfter > s.maxBefore:
			row.PeakAllocatedBytes = s.maxAfter
		case ok:
			row.PeakAllocatedBytes = max(row.PeakAllocatedBytes, p)
		default:
			row.PeakLowerBound = true
		}
		if run.MaxAllocatedStep < 0 && run.MaxAllocatedBytes > 0 && s.maxAfter >= run.MaxAllocatedBytes {
			run.MaxAllocatedStep = i
		}
		run.Steps = append(run.Steps, *row)
	}
	return run
}
