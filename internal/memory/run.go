package memory

import (
	"sort"
	"strconv"
	"strings"

	"github.com/ptscope/ptscope/internal/spillmem"
)

// Run is what a ptscope run bundle measured over the whole run of a rank
// whose allocator history was recorded only in stack windows, a snapshot
// each (docs/analyze.md). Analyze, given a Run (Options.Run) for the
// snapshot chosen for the view at the peak, reports the run rather than
// that snapshot alone: the run's steps, their pattern and leak, the
// process's own peak and the state at the end; what was alive at the peak,
// the timeline, the fragmentation at the peak, phase statistics and OOMs
// stay the snapshot's.
type Run struct {
	// Steps are every step of the run in order, from the phases'
	// counters, with StartIndex, EndIndex and PeakIndex -1: Analyze sets
	// them for the steps its own trace holds, matched by name ("step N"),
	// and the peak of those it holds whole where Steps only had a lower
	// bound.
	Steps []StepRow
	// MaxAllocatedBytes is the process's max_memory_allocated at the end
	// of the run; MaxAllocatedStep is the index into Steps of the step in
	// which the counters first reached it, -1 when unknown (or reached
	// after the last step).
	MaxAllocatedBytes int64
	MaxAllocatedStep  int
	// MaxReservedBytes is the process's max_memory_reserved at the end of
	// the run (0 when unknown).
	MaxReservedBytes int64
	// Snapshot names the snapshot analysed, for the findings' words.
	Snapshot string
	// LeakStacks are the stacks of what accumulates, from the windows
	// (WindowLeak); reported when the steps show a leak.
	LeakStacks []StackGroup
	// End and EndFragmentation, when set, are the state at the end of
	// the run (the end snapshot's segments); the fragmentation's at-peak
	// fields stay the analysed snapshot's.
	End              *State
	EndFragmentation *Fragmentation
	// OOM, when set, is the out-of-memory error the run's OOM observer
	// recorded, for an OOM snapshot taken outside every window: without
	// a trace it holds no oom entry, so the OOM is explained from this
	// record and the allocator's state at the error (the snapshot's
	// segments).
	OOM *OOMRecord
	// OOMElsewhere, when set, is the first out-of-memory error of a run
	// whose view at the peak is not the snapshot taken at the error: the
	// program caught it and went on, or that snapshot could not be written
	// or read. A finding tells of it (oom-caught, oom-no-snapshot).
	OOMElsewhere *OOMNote
}

// OOMNote is an out-of-memory error of a run recorded in windows, told of
// beside the view rather than explained from it (Run.OOMElsewhere).
type OOMNote struct {
	OOMRecord
	Count  int  // how many times the process ran out of memory (>= 1)
	Caught bool // the program went on after it: a phase began after the error
	// Snapshot is the file name of the snapshot taken at the error, Path
	// its path; when SnapshotError is set it could not be written ("") or
	// read.
	Snapshot, Path string
	SnapshotError  string
}

// OOMRecord is an out-of-memory error as ptscope run's OOM observer
// recorded it.
type OOMRecord struct {
	RequestedBytes  int64
	DeviceFreeBytes int64
	TimeNS          int64
	Phase           string // forward, backward, optimizer, ...
	Step            int    // 0-based step of the run
}

// applyRun replaces the snapshot's own steps, pattern, process peak, most
// reserved and end state with the run's (Options.Run), and moves every
// step index of the result (peak, phase statistics, OOMs) onto the run's
// steps.
func (a *analyzer) applyRun() {
	run, res := a.o.Run, a.res
	own := res.Steps
	byName := make(map[string]int, len(run.Steps))
	steps := make([]StepRow, len(run.Steps))
	for i, st := range run.Steps {
		st.Index, st.Outlier = i, false
		steps[i] = st
		byName[st.Name] = i
	}
	remap := make([]int, len(own)) // own step index -> run step index, -1 none
	for k, o := range own {
		remap[k] = -1
		i, ok := byName[o.Name]
		if !ok {
			continue
		}
		remap[k] = i
		st := &steps[i]
		st.StartIndex, st.EndIndex, st.PeakIndex = o.StartIndex, o.EndIndex, o.PeakIndex
		if !o.Partial && st.PeakLowerBound {
			// the loader's rule (load.runOf): torch's running max where it
			// rose in the step, else the replay, never below the counters
			st.PeakAllocatedBytes, st.PeakLowerBound = max(st.PeakAllocatedBytes, o.PeakAllocatedBytes), false
		}
	}
	move := func(k int) int {
		if k < 0 || k >= len(remap) {
			return -1
		}
		return remap[k]
	}
	res.Peak.Step = move(res.Peak.Step)
	if res.Peak.Step < 0 && res.Peak.EventIndex >= 0 && res.HasTime {
		// the snapshot's steps are named otherwise (ProfilerStep#N)
		res.Peak.Step = runStepAt(steps, res.Peak.TimeNS)
	}
	for i := range res.PhaseStats {
		res.PhaseStats[i].Step = move(res.PhaseStats[i].Step)
	}
	for i := range res.OOMs {
		res.OOMs[i].Step = move(res.OOMs[i].Step)
	}
	markOutliers(steps)
	res.Steps, res.StepSource = steps, StepsPtscopeStep

	var ends, peaks []int64
	for _, st := range steps {
		if st.Partial {
			continue
		}
		ends = append(ends, st.EndAllocatedBytes)
		if !st.PeakLowerBound {
			peaks = append(peaks, st.PeakAllocatedBytes)
		}
	}
	res.Pattern, res.Leak = classifySteps(ends, peaks)
	if res.Leak != nil {
		res.Leak.Stacks = append([]StackGroup{}, run.LeakStacks...)
	}
	res.Peak.ProcessMaxAllocatedBytes = run.MaxAllocatedBytes
	if k := run.MaxAllocatedStep; k >= 0 && k < len(steps) {
		res.Peak.ProcessMaxStep = &k
	}
	if x := run.OOM; x != nil && len(res.OOMs) == 0 && !res.HasHistory {
		res.OOMs = []OOM{a.recordedOOM(x, byName)}
	}
	if x := run.OOMElsewhere; x != nil && len(res.OOMs) == 0 {
		res.OOMsOutsideView = max(x.Count, 1)
	}
	if run.End != nil {
		res.End = *run.End
	}
	// the most reserved is the run's, as its end is: a window's reserved
	// is only what the windows saw
	res.Peak.ReservedBytes = max(res.Peak.ReservedBytes, run.MaxReservedBytes, res.End.ReservedBytes)
	if f := run.EndFragmentation; f != nil {
		g := *f
		g.EfficiencyAtPeak, g.CachedFreeAtPeakBytes = res.Fragmentation.EfficiencyAtPeak, res.Fragmentation.CachedFreeAtPeakBytes
		res.Fragmentation = g
	}
}

// recordedOOM explains an out-of-memory error from the OOM observer's
// record and a snapshot taken at the error without a trace: the state the
// allocator failed in is the snapshot's segments.
func (a *analyzer) recordedOOM(x *OOMRecord, steps map[string]int) OOM {
	r, res := a.r, a.res
	o := OOM{EventIndex: -1, TimeNS: x.TimeNS, RequestedBytes: x.RequestedBytes, DeviceFreeBytes: x.DeviceFreeBytes,
		AllocatedBytes: r.End.Allocated, ReservedBytes: r.End.Reserved, CachedFreeBytes: max(r.End.Reserved-r.End.Active, 0),
		Phase: PhaseUnknown, Step: -1, Stack: Stack{Frames: []Frame{}, UserFrame: -1}}
	var ph Phase
	if ph.UnmarshalText([]byte(x.Phase)) == nil {
		o.Phase = ph
	}
	if k, ok := steps[stepName(x.Step)]; ok {
		o.Step = k
	}
	o.LargestFreeBytes = res.Fragmentation.LargestFreeBytes
	a.judgeOOM(&o, a.live)
	return o
}

// runStepAt is the index of the step of steps whose span holds t, -1 if
// none.
func runStepAt(steps []StepRow, t int64) int {
	for i, st := range steps {
		if st.StartNS <= t && t <= st.EndNS {
			return i
		}
	}
	return -1
}

// Survivor is an allocation a window's trace made that was still alive at
// the window's end.
type Survivor struct {
	Address uint64
	Bytes   int64
	alloc   *Alloc
}

// Survivors are the allocations device analysis an's trace made (inside
// its recording) that were still alive at its last entry: in a window
// snapshot, what the window's steps left behind.
func (an *Analysis) Survivors() []Survivor {
	var out []Survivor
	r := an.Replay
	for i := range r.Allocs {
		spillmem.Poll(r.arena, i)
		al := &r.Allocs[i]
		if al.Origin == FromTrace && al.AllocIdx >= 0 && al.FreeReqIdx < 0 {
			out = append(out, Survivor{Address: al.Addr, Bytes: al.Size, alloc: al})
		}
	}
	return out
}

// WindowLeak groups by stack what the steady-state windows of a run left
// behind and the run still held later: the Survivors of each of windows
// (steady-state windows only, in time order), where held[k], when set,
// reports whether a block (address, size) was still held by the next
// snapshot after window k, alive from before its recording to its end
// (HeldThroughout of the next window's snapshot, or of the end snapshot
// after the last; nil: unknown, every survivor counts). A tensor each step
// frees and the next allocates again (gradients, the batch, the loss) is
// freed inside the next window and does not count; the end snapshot, taken
// at exit, may hold less than the run did (a function's locals are gone),
// so it witnesses only the last window. A stack counts when its survivors
// come from two windows or more: what accumulates step after step, not
// what one step left. Groups are by stack frames and category across the
// windows, largest first; Count is the allocations seen in windows, not in
// every step.
func WindowLeak(windows []*Analysis, held []func(addr uint64, size int64) bool) []StackGroup {
	type acc struct {
		g       StackGroup
		largest int64
		windows map[int]bool
	}
	by := map[string]*acc{}
	var keys []string
	for w, an := range windows {
		var a *analyzer
		for _, sv := range an.Survivors() {
			if w < len(held) && held[w] != nil && !held[w](sv.Address, sv.Bytes) {
				continue
			}
			if a == nil {
				a = &analyzer{s: an.Snapshot, tr: an.Snapshot.Trace(an.Result.Device), r: an.Replay, ph: an.Phases,
					st: newStacks(an.Snapshot)}
			}
			al := sv.alloc
			st := a.st.stack(al.Stack)
			k := frameKey(st.Frames, al.Category)
			g := by[k]
			if g == nil {
				g = &acc{windows: map[int]bool{}}
				g.g.Category = al.Category
				by[k] = g
				keys = append(keys, k)
			}
			g.g.Bytes += al.Size
			g.g.Count++
			g.windows[w] = true
			if al.Size > g.largest || g.g.Frames == nil {
				g.largest = al.Size
				g.g.Source, _ = a.st.source(al.Stack)
				g.g.Stack = a.resultStack(al.Stack, al)
			}
		}
	}
	out := []StackGroup{}
	sort.Strings(keys)
	for _, k := range keys {
		if g := by[k]; len(g.windows) >= 2 {
			out = append(out, g.g)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Bytes > out[j].Bytes })
	return out
}

// frameKey identifies a stack by its frames across snapshots (whose stack
// ids differ), with the category of its blocks.
func frameKey(fs []Frame, c Category) string {
	var b strings.Builder
	b.WriteString(c.String())
	for _, f := range fs {
		b.WriteByte(0)
		b.WriteString(f.Filename)
		b.WriteByte(':')
		b.WriteString(f.Name)
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(f.Line))
	}
	return b.String()
}

// HeldThroughout reports, for a block (address, size), whether the
// program held it from before the first entry of analysis an to after its
// last: allocated before the recording and never freed in it (for a
// snapshot without a trace: every block of its segments).
func (an *Analysis) HeldThroughout() func(addr uint64, size int64) bool {
	type block struct {
		addr uint64
		size int64
	}
	held := map[block]bool{}
	r := an.Replay
	for i := range r.Allocs {
		spillmem.Poll(r.arena, i)
		if al := &r.Allocs[i]; al.AllocIdx < 0 && al.FreeReqIdx < 0 {
			held[block{al.Addr, al.Size}] = true
		}
	}
	return func(addr uint64, size int64) bool { return held[block{addr, size}] }
}
