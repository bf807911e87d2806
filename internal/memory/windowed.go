package memory

import "strconv"

// A rank whose allocator history was recorded only in stack windows (a
// ptscope run bundle in history mode "windows") is analysed as one run
// from several snapshots: the windows', the end and the out-of-memory
// one. load reads them and hands their analyses here by file name; these
// functions decide what the run is: which snapshot gives the view at the
// peak, the windows' rows, the steps from the phases' counters, the leak
// the windows left behind and where an out-of-memory error belongs.

// PeakView names the snapshot whose analysis is the view at the run's
// peak: the one taken at the error (oom) when the run died of it; when
// the program caught it and went on, the snapshot of names (in order)
// holding the highest replayed peak, else end, else oom (caught, but
// nothing else of the run could be read); "" when none was analysed.
// view returns a snapshot's analysis (nil when not read).
func PeakView(names []string, view func(name string) *Analysis, oom, end string, caught bool) string {
	if a := view(oom); a != nil && !caught {
		return oom
	}
	base := ""
	var best int64 = -1
	for _, name := range names {
		if a := view(name); a != nil && a.Result.HasHistory && a.Result.Peak.AllocatedBytes > best {
			base, best = name, a.Result.Peak.AllocatedBytes
		}
	}
	if base == "" && view(end) != nil {
		base = end
	}
	if base == "" && view(oom) != nil {
		base = oom
	}
	return base
}

// WindowRows completes the rows of a run's stack windows (their steps,
// reason, snapshot and times set) from their snapshots' analyses: entries,
// replayed peak, the view's window (base), a snapshot's read error
// (errOf). It also returns the analysed window snapshots, each once, in
// time order (contiguous windows share one: the set-up and warm-up, a
// capacity window that goes on from them), and those of the steady state:
// snapshots none of whose windows is the set-up or a warm-up step.
func WindowRows(rows []StackWindow, base string, view func(name string) *Analysis, errOf func(name string) string) (out []StackWindow, windows, steady []*Analysis) {
	seen := map[string]bool{}
	warm := map[string]bool{}
	for _, w := range rows {
		if w.Reason == "setup" || w.Reason == "warmup" {
			warm[w.Snapshot] = true
		}
	}
	out = make([]StackWindow, 0, len(rows))
	for _, row := range rows {
		row.View = row.Snapshot != "" && row.Snapshot == base
		row.Error = errOf(row.Snapshot)
		if a := view(row.Snapshot); a != nil {
			row.Entries = a.Result.Entries
			if a.Result.HasHistory {
				row.PeakAllocatedBytes = a.Result.Peak.AllocatedBytes
			}
			if !seen[row.Snapshot] {
				seen[row.Snapshot] = true
				windows = append(windows, a)
				if !warm[row.Snapshot] {
					steady = append(steady, a)
				}
			}
		}
		out = append(out, row)
	}
	return out, windows, steady
}

// UnlistedWindow is the row of a window snapshot saved as the process was
// killed, before its process.json listed it, analysed as a: the steps its
// trace holds (times to the microsecond, as the companion records them),
// reason "unlisted".
func UnlistedWindow(a *Analysis, name string) StackWindow {
	w := StackWindow{FirstStep: -1, LastStep: -1, Reason: "unlisted", Snapshot: name}
	first := true
	for _, st := range a.Result.Steps {
		k, ok := st.RunStep()
		if !ok {
			continue
		}
		if first {
			w.FirstStep, w.StartNS, first = k, st.StartNS/1000*1000, false
		}
		w.LastStep, w.EndNS = max(w.LastStep, k), st.EndNS/1000*1000
	}
	return w
}

// SteadyLeak is the leak the steady windows left behind: the stacks of
// each one's survivors, witnessed by the next snapshot (the next of
// windows, in time order, else end when it is another).
func SteadyLeak(windows, steady []*Analysis, end *Analysis) []StackGroup {
	held := make([]func(uint64, int64) bool, len(steady))
	for i, a := range steady {
		if next := nextAfter(windows, a, end); next != nil {
			held[i] = next.HeldThroughout()
		}
	}
	return WindowLeak(steady, held)
}

// nextAfter is the snapshot after window a: the next of windows (in time
// order), else the end snapshot when it is another (nil when none).
func nextAfter(windows []*Analysis, a, end *Analysis) *Analysis {
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

// RunOOM places a run's out-of-memory error (rec, its count): in the run
// itself when the view is the snapshot taken at the error (base == oom),
// else as a note on a view taken elsewhere, saying why the error's own
// snapshot is not the view (missing, unreadable: readErr, caught).
// path is the error snapshot's path; read says it was read.
func RunOOM(rec OOMRecord, count int, base, oom, path string, caught, read bool, readErr string) (*OOMRecord, *OOMNote) {
	if base == oom {
		return &rec, nil
	}
	n := &OOMNote{OOMRecord: rec, Count: max(count, 1), Caught: caught, Snapshot: oom, Path: path}
	switch {
	case oom == "":
		n.SnapshotError = "could not be written"
	case !read:
		n.SnapshotError = "is missing (" + oom + ")"
	case readErr != "":
		n.SnapshotError = "could not be read: " + readErr
	case !caught:
		n.SnapshotError = "holds no allocator state"
	}
	return nil, n
}

// RolesUntil are the roles taken at or before tNS: the inventories of a
// snapshot taken at an error without a trace, which those taken after it
// (at exit) do not describe.
func RolesUntil(roles []Role, tNS int64) []Role {
	var keep []Role
	for _, ro := range roles {
		if ro.TimeNS <= tNS {
			keep = append(keep, ro)
		}
	}
	return keep
}

// PhaseCounters is one phase of a run (a ptscope run bundle's
// phases.jsonl line) with the allocator counters read around it.
type PhaseCounters struct {
	Name                 string // forward, backward, optimizer, ...
	Step                 int
	StartNS, EndNS       int64
	AllocatedBeforeBytes int64
	AllocatedAfterBytes  int64
	MaxAllocatedBefore   int64
	MaxAllocatedAfter    int64
	MaxReservedAfter     int64
	Aborted              bool
}

// RunFromPhases is the run of a rank from its phases' counters: every step
// with its end-of-step allocated bytes and peak, and the process's own
// peak (from maxAllocated, maxReserved and the counters). A step's peak is
// the running max_memory_allocated where it rose inside the step (the step
// set a new high: that is its peak, exactly), else the replay's where a
// window snapshot holds the whole step (never below what the counters saw
// at its phase boundaries), else the most allocated at those boundaries, a
// lower bound (PeakLowerBound).
func RunFromPhases(phases []PhaseCounters, maxAllocated, maxReserved int64, windows []*Analysis) *Run {
	exact := map[string]int64{}
	for _, a := range windows {
		for _, st := range a.Result.Steps {
			if !st.Partial {
				exact[st.Name] = max(exact[st.Name], st.PeakAllocatedBytes)
			}
		}
	}
	training := false
	for _, ph := range phases {
		training = training || ph.Name == "optimizer"
	}
	type acc struct {
		row                 StepRow
		maxBefore, maxAfter int64
		optimizer           bool
	}
	var steps []*acc
	at := map[int]*acc{}
	run := &Run{MaxAllocatedBytes: maxAllocated, MaxAllocatedStep: -1, MaxReservedBytes: maxReserved}
	for _, ph := range phases {
		s := at[ph.Step]
		if s == nil {
			s = &acc{row: StepRow{Name: "step " + strconv.Itoa(ph.Step), StartIndex: -1, EndIndex: -1, PeakIndex: -1,
				StartNS: ph.StartNS, EndNS: ph.EndNS}, maxBefore: ph.MaxAllocatedBefore}
			at[ph.Step] = s
			steps = append(steps, s)
		}
		row := &s.row
		row.StartNS = min(row.StartNS, ph.StartNS)
		if e := ph.EndNS; e >= row.EndNS {
			row.EndNS = e
			row.EndAllocatedBytes = ph.AllocatedAfterBytes
		}
		row.PeakAllocatedBytes = max(row.PeakAllocatedBytes, ph.AllocatedBeforeBytes, ph.AllocatedAfterBytes)
		s.maxBefore = min(s.maxBefore, ph.MaxAllocatedBefore)
		s.maxAfter = max(s.maxAfter, ph.MaxAllocatedAfter)
		s.optimizer = s.optimizer || ph.Name == "optimizer"
		row.Partial = row.Partial || ph.Aborted
		run.MaxAllocatedBytes = max(run.MaxAllocatedBytes, ph.MaxAllocatedAfter)
		run.MaxReservedBytes = max(run.MaxReservedBytes, ph.MaxReservedAfter)
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
