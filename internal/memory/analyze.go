package memory

import (
	"sort"

	"github.com/ptscope/ptscope/internal/snapshot"
	"github.com/ptscope/ptscope/internal/spillmem"
)

// Options control an analysis. The result does not depend on how it will
// be shown: renderers choose how many rows and frames to print.
type Options struct {
	DeviceMemory int64  // device capacity in bytes; 0 if unknown
	Rules        []Rule // keyword groups; nil means DefaultRules()
	// Precision is what a ptscope run bundle saw of the numeric precision;
	// nil for bare snapshots, which carry no dtypes.
	Precision *Precision
	// AllowedBytes is the most the process's allocator could reserve on
	// the device when it had a limit of its own
	// (torch.cuda.set_per_process_memory_fraction; a bundle's OOM record
	// carries it); 0 when none or unknown.
	AllowedBytes int64
	// StackWindows are the spans of a ptscope run bundle whose allocations
	// recorded a Python stack (Unix ns, [From, To)); nil when unknown (a
	// bare snapshot: stacks were on throughout, or off).
	StackWindows []TimeSpan
	// PeakMarks are the process's own max_memory_allocated at known times
	// (a bundle's phase boundaries and exit); the last one at or before the
	// trace's last entry is reported with the peak and checked against it.
	PeakMarks []PeakMark
	// PhaseStarts are the phases of a ptscope run bundle (phases.jsonl)
	// with what was allocated as each began: an out-of-memory error inside
	// one reports what that phase allocated before it failed.
	PhaseStarts []PhaseStart
	// Roles are what allocations were, from a record that knows the
	// program's tensors (a ptscope run bundle's inventories); they override
	// the categories guessed from stacks and phases.
	Roles []Role
	// Run, when set, is the whole run the snapshot is one window of
	// (a bundle rank whose history was recorded in windows): the result
	// reports the run's steps, pattern, peak and end (Run).
	Run *Run
}

// TimeSpan is [FromNS, ToNS) in Unix ns.
type TimeSpan struct{ FromNS, ToNS int64 }

// stacked reports whether an allocation was made inside a stack window.
func (a *analyzer) stacked(al *Alloc) bool {
	if al.AllocIdx < 0 || !a.tr.HasTime {
		return true
	}
	t := a.timeNS(int(al.AllocIdx))
	for _, w := range a.o.StackWindows {
		if w.FromNS <= t && t < w.ToNS {
			return true
		}
	}
	return false
}

// PhaseStart is one phase of a run (Unix ns, its end included) and the
// allocated bytes it began with.
type PhaseStart struct {
	StartNS, EndNS int64
	AllocatedBytes int64
}

// PeakMark is the process's max_memory_allocated at a time (Unix ns).
type PeakMark struct {
	TimeNS            int64
	MaxAllocatedBytes int64
}

// Precision is the training's numeric precision as seen at the first
// forward: parameter bytes by dtype ("float32", "bfloat16", ...), whether
// CUDA autocast was on, and whether FSDP wraps the model (its mixed
// precision policy computes in low precision without autocast).
type Precision struct {
	ParameterBytesByDtype map[string]int64
	Autocast              bool
	AutocastDtype         string
	FSDP                  bool
}

func (o *Options) defaults() {
	if o.Rules == nil {
		o.Rules = DefaultRules()
	}
}

// analyzer carries what the parts of one analysis share.
type analyzer struct {
	res    *Result
	s      *snapshot.Snapshot
	tr     *snapshot.Trace
	r      *Replay
	ph     *Phases
	o      Options
	st     *stacks
	roles  *roles
	groups map[groupKey]string
	gm     *groupMatcher
	live   []*Alloc // alive at the peak, largest first
}

// Analyze runs every analysis on device d of s and returns the result with
// the models it was computed from.
func Analyze(s *snapshot.Snapshot, d int, o Options) *Analysis {
	o.defaults()
	// The phases need the replay only to measure the steps: find them
	// meanwhile.
	var ph *Phases
	wait := goPanicSafe(func() { ph = tracePhases(s, d) })
	r := NewReplay(s, d)
	wait()
	ph.measure(r)
	categorize(s, r, ph)
	tr := s.Trace(d)
	rl := applyRoles(o.Roles, r, stringID(s, DDPMetadata))
	res := &Result{Device: d, Entries: tr.Len(), HasTime: tr.HasTime, HasHistory: tr.Len() > 0,
		Start: stateOf(r.Baseline), End: stateOf(r.End), Truncated: r.Truncated,
		TruncationEvidence: r.TruncationEvidence, UnmatchedFrees: r.Unmatched, GhostBlocks: r.Ghosts,
		StepSource: ph.Source}
	if tr.HasTime && tr.Len() > 0 {
		res.FirstTimeNS, res.LastTimeNS = tr.TimeUS[0]*1000, tr.TimeUS[tr.Len()-1]*1000
	}
	a := &analyzer{res: res, s: s, tr: tr, r: r, ph: ph, o: o, st: newStacks(s), roles: rl,
		groups: map[groupKey]string{}}
	a.peak()
	a.atPeak()
	a.steps()
	res.PhaseStats = a.phaseStats()
	res.Pattern, res.Leak = a.pattern()
	f := NewFragmentation(s, d)
	if p := res.Peak; p.ReservedAtPeakBytes > 0 {
		f.EfficiencyAtPeak = float64(p.AllocatedBytes) / float64(p.ReservedAtPeakBytes)
		f.CachedFreeAtPeakBytes = max(p.ReservedAtPeakBytes-p.ActiveBytes, 0)
	}
	res.Fragmentation = *f
	res.OOMs = a.ooms()
	res.Timeline = thin(r, ph)
	if o.Run != nil {
		a.applyRun()
	}
	res.Findings = a.findings()
	return &Analysis{Result: res, Snapshot: s, Replay: r, Phases: ph}
}

// stringID is the id of str in the snapshot's string table, 0 if absent.
func stringID(s *snapshot.Snapshot, str string) uint32 {
	for i, v := range s.Strings {
		if v == str && i > 0 {
			return uint32(i)
		}
	}
	return 0
}

// goPanicSafe runs f on its own goroutine; the returned wait blocks until f
// is done and re-raises a panic of f on the caller's goroutine (where the
// CLI turns it into a one-line error instead of a crash).
func goPanicSafe(f func()) (wait func()) {
	done := make(chan any, 1)
	go func() {
		defer func() { done <- recover() }()
		f()
	}()
	return func() {
		if p := <-done; p != nil {
			panic(p)
		}
	}
}

func stateOf(s ReplayState) State {
	return State{AllocatedBytes: s.Allocated, RequestedBytes: s.Requested, ActiveBytes: s.Active, ReservedBytes: s.Reserved}
}

func (a *analyzer) timeNS(i int) int64 {
	if i < 0 || !a.tr.HasTime || i >= len(a.r.Timeline.TimeUS) {
		return 0
	}
	return a.r.Timeline.TimeUS[i] * 1000
}

func (a *analyzer) peak() {
	r := a.r
	t := &r.Timeline
	p := Peak{EventIndex: -1, Step: -1, Phase: PhaseUnknown, AllocatedBytes: r.Baseline.Allocated,
		ReservedBytes: r.Baseline.Reserved, ReservedAtPeakBytes: r.Baseline.Reserved,
		ActiveBytes: r.Baseline.Active, RequestedBytes: r.Baseline.Requested}
	for i, v := range t.Allocated {
		spillmem.Poll(r.arena, i)
		if v > p.AllocatedBytes {
			p.AllocatedBytes, p.EventIndex = v, i
		}
		p.ReservedBytes = max(p.ReservedBytes, t.Reserved[i])
	}
	if a.tr.Len() == 0 {
		// No history: the only instant is dump time, so the peak is the
		// end state (the baseline rebuilt from segments counts no
		// pending frees as active, the segments' state does).
		p.AllocatedBytes, p.ReservedBytes, p.ReservedAtPeakBytes = r.End.Allocated, r.End.Reserved, r.End.Reserved
		p.ActiveBytes, p.RequestedBytes = r.End.Active, r.End.Requested
	}
	if i := p.EventIndex; i >= 0 {
		p.TimeNS = a.timeNS(i)
		p.ReservedAtPeakBytes = t.Reserved[i]
		p.ActiveBytes = t.Active[i]
		p.RequestedBytes = t.Requested[i]
		p.Phase = a.ph.Of[i]
		if k := a.ph.StepOf[i]; k >= 0 {
			p.Step = int(k)
		}
	}
	if a.tr.HasTime && a.tr.Len() > 0 {
		last, at := a.timeNS(a.tr.Len()-1), int64(-1)
		for _, m := range a.o.PeakMarks {
			if m.TimeNS <= last && m.TimeNS >= at {
				at, p.ProcessMaxAllocatedBytes = m.TimeNS, m.MaxAllocatedBytes
			}
		}
	}
	a.res.Peak = p
}

// LiveAt returns the allocations alive just after entry i (i = -1: before the first).
func (r *Replay) LiveAt(i int) []*Alloc {
	var out []*Alloc
	for k := range r.Allocs {
		spillmem.Poll(r.arena, k)
		if r.Allocs[k].Alive(i) {
			out = append(out, &r.Allocs[k])
		}
	}
	return out
}

// atPeak groups everything alive at the peak: by category, keyword group,
// source, module and stack, and the largest allocations.
func (a *analyzer) atPeak() {
	s, res := a.s, a.res
	live := a.r.LiveAt(res.Peak.EventIndex)
	sort.SliceStable(live, func(i, j int) bool { return live[i].Size > live[j].Size })
	a.live = live

	var cats [numCategories]CategoryGroup
	groups := map[string]*Group{}
	sources := map[string]*Group{}
	modules := map[string]*Group{}
	type stackAcc struct {
		g     StackGroup
		first *Alloc // its largest allocation
	}
	stacks := map[stackKey]*stackAcc{}
	add := func(m map[string]*Group, k string, b int64) {
		g := m[k]
		if g == nil {
			g = &Group{Name: k}
			m[k] = g
		}
		g.Bytes += b
		g.Count++
	}
	type src struct{ source, module string }
	srcCache := map[snapshot.StackID]src{}
	for _, al := range live {
		meta := a.moduleOf(al)
		group := a.group(al)
		c := &cats[al.Category]
		c.Bytes += al.Size
		c.Count++
		add(groups, group, al.Size)
		sc, ok := srcCache[al.Stack]
		if !ok {
			sc.source, sc.module = a.st.source(al.Stack)
			srcCache[al.Stack] = sc
		}
		modName := sc.module
		if meta != "" {
			modName = meta
		}
		add(sources, sc.source, al.Size)
		add(modules, modName, al.Size)
		sk := stackKey{al.Stack, al.Category}
		acc := stacks[sk]
		if acc == nil {
			acc = &stackAcc{first: al}
			acc.g.Source, acc.g.Category = sc.source, al.Category
			stacks[sk] = acc
		}
		acc.g.Bytes += al.Size
		acc.g.Count++
	}
	res.Categories = []CategoryGroup{}
	for c := range cats {
		if cats[c].Count > 0 {
			cats[c].Category = Category(c)
			res.Categories = append(res.Categories, cats[c])
		}
	}
	sort.SliceStable(res.Categories, func(i, j int) bool {
		x, y := res.Categories[i], res.Categories[j]
		if x.Bytes != y.Bytes {
			return x.Bytes > y.Bytes
		}
		return x.Category < y.Category
	})
	res.Groups = sortedGroups(groups)
	res.Sources = sortedGroups(sources)
	res.Modules = sortedGroups(modules)
	res.ModuleGroups = moduleGroups(res.Modules)

	ids := make([]stackKey, 0, len(stacks))
	for id := range stacks {
		ids = append(ids, id)
	}
	sortStackKeys(ids, func(k stackKey) int64 { return stacks[k].g.Bytes })
	index := make(map[stackKey]int, len(ids))
	res.Stacks = make([]StackGroup, 0, len(ids))
	for i, id := range ids {
		acc := stacks[id]
		acc.g.Stack = a.resultStack(id.id, acc.first)
		res.Stacks = append(res.Stacks, acc.g)
		index[id] = i
	}

	res.TopAllocations = []TopAlloc{}
	for i, al := range live {
		if i >= MaxTopAllocations {
			break
		}
		ta := TopAlloc{Bytes: al.Size, RequestedBytes: al.Requested, Category: al.Category,
			Group: a.group(al), Module: a.moduleOf(al), Stream: s.Streams[al.Stream], Address: al.Addr,
			AgeNS: -1, AllocIndex: int(al.AllocIdx), Origin: al.Origin, Stack: index[stackKey{al.Stack, al.Category}]}
		if al.AllocIdx >= 0 && a.tr.HasTime {
			ta.AgeNS = res.Peak.TimeNS - a.timeNS(int(al.AllocIdx))
		}
		res.TopAllocations = append(res.TopAllocations, ta)
	}
}

// stackKey identifies a StackGroup: stacks are grouped by (stack,
// category), since one stack can hold blocks of several categories (the
// frameless one holds blocks made before the recording and temporaries
// whose stack was not recorded), and a group names one.
type stackKey struct {
	id  snapshot.StackID
	cat Category
}

// sortStackKeys orders stack groups by their bytes, largest first, then by
// stack and category.
func sortStackKeys(ids []stackKey, bytes func(stackKey) int64) {
	sort.Slice(ids, func(i, j int) bool {
		x, y := ids[i], ids[j]
		if bx, by := bytes(x), bytes(y); bx != by {
			return bx > by
		}
		if x.id != y.id {
			return x.id < y.id
		}
		return x.cat < y.cat
	})
}

// moduleOf is the module path of an allocation: its tensor's module from a
// bundle's inventories, else the module ptscope run recorded while it was
// made (forward, or backward in stacked steps), else "".
func (a *analyzer) moduleOf(al *Alloc) string {
	if m := a.roles.module(al); m != "" {
		return m
	}
	if al.Metadata != 0 {
		if m := a.s.Strings[al.Metadata]; m != DDPMetadata {
			return m
		}
		return DDPBuckets
	}
	return ""
}

// groupKey is what an allocation's keyword group depends on.
type groupKey struct {
	stack snapshot.StackID
	meta  uint32
	role  string
}

// group is the keyword group of an allocation (groupOf), cached.
func (a *analyzer) group(al *Alloc) string {
	k := groupKey{al.Stack, al.Metadata, a.roles.module(al)}
	if g, ok := a.groups[k]; ok {
		return g
	}
	meta := ""
	if al.Metadata != 0 {
		meta = a.s.Strings[al.Metadata]
	}
	if a.gm == nil {
		// each frame is matched once, however many stacks share it
		a.gm = newGroupMatcher(a.s, a.o.Rules, a.st.kinds)
	}
	g := a.gm.group(al.Stack, meta, k.role)
	a.groups[k] = g
	return g
}

// resultStack is the result form of a stack; for stacks without Python
// frames it adds the Python caller of the backward pass that al ran in.
func (a *analyzer) resultStack(id snapshot.StackID, al *Alloc) Stack {
	st := *a.st.stack(id)
	if len(st.Frames) == 0 || a.st.hasPython(id) || al == nil || al.AllocIdx <= 0 {
		return st
	}
	if c, ok := a.backwardCaller(int(al.AllocIdx)); ok {
		st.Caller = a.st.frames(c)
	}
	return st
}

// maxCallerScan bounds how far back backwardCaller looks.
const maxCallerScan = 1 << 20

// backwardCaller finds the stack of the backward call an allocation at
// entry i made without Python frames ran under: autograd's worker threads
// record no Python, but .backward() itself allocates on the calling thread
// (the gradient seed), so the nearest earlier allocation with Python frames
// is that call when its frames show .backward(). Anything else (a forward
// allocation, a hook) gives no caller rather than a wrong one.
func (a *analyzer) backwardCaller(i int) (snapshot.StackID, bool) {
	tr := a.tr
	for j := i - 1; j >= 0 && j >= i-maxCallerScan; j-- {
		spillmem.Poll(a.r.arena, j)
		if tr.Action[j] != snapshot.ActionAlloc {
			continue
		}
		id := tr.Stack[j]
		if !a.st.hasPython(id) {
			continue
		}
		return id, a.ph.classes[id] == fcBackward
	}
	return 0, false
}

// steps turns the phases' steps into rows and marks outliers.
func (a *analyzer) steps() {
	a.res.Steps = []StepRow{}
	for _, st := range a.ph.Steps {
		row := StepRow{Index: st.Index, Name: st.Name, StartIndex: st.Start, EndIndex: st.End,
			PeakAllocatedBytes: st.Peak, PeakIndex: st.PeakIdx, EndAllocatedBytes: st.EndAllocated, Partial: st.Partial}
		if a.tr.HasTime {
			row.StartNS, row.EndNS = st.StartUS*1000, st.EndUS*1000
			row.DurationNS = row.EndNS - row.StartNS
		}
		a.res.Steps = append(a.res.Steps, row)
	}
	markOutliers(a.res.Steps)
}

// Outlier thresholds: a full step whose peak is spikeFactor above the
// median and spikeMinBytes more, or that takes twice the median time.
const slowFactor = 2.0

func markOutliers(rows []StepRow) {
	var peaks, durs []int64
	for _, r := range rows {
		if !r.Partial {
			if !r.PeakLowerBound {
				peaks = append(peaks, r.PeakAllocatedBytes)
			}
			durs = append(durs, r.DurationNS)
		}
	}
	if len(durs) < 3 {
		return
	}
	var mp int64
	if len(peaks) >= 3 {
		mp = median(peaks)
	}
	md := median(durs)
	for i := range rows {
		r := &rows[i]
		if r.Partial {
			continue
		}
		high := len(peaks) >= 3 && !r.PeakLowerBound && float64(r.PeakAllocatedBytes) > spikeFactor*float64(mp) && r.PeakAllocatedBytes-mp > spikeMinBytes
		slow := md > 0 && float64(r.DurationNS) > slowFactor*float64(md)
		r.Outlier = high || slow
	}
}

func median(v []int64) int64 {
	s := append([]int64(nil), v...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func sortedGroups(m map[string]*Group) []Group {
	out := make([]Group, 0, len(m))
	for _, g := range m {
		out = append(out, *g)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Bytes != out[j].Bytes {
			return out[i].Bytes > out[j].Bytes
		}
		return out[i].Name < out[j].Name
	})
	return out
}
