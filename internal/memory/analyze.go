package memory

import (
	"sort"

	"github.com/ptscope/ptscope/internal/snapshot"
)

// Options control an analysis.
type Options struct {
	TopN         int    // top allocations and groups kept (default 10)
	StackDepth   int    // frames kept per stack (default 6; 0 with FullStacks = all)
	FullStacks   bool   // keep PyTorch-internal and noise frames
	DeviceMemory int64  // device capacity in bytes; 0 if unknown
	Rules        []Rule // keyword groups; nil means DefaultRules()
	// Precision is what a ptscope run bundle saw of the numeric precision;
	// nil for bare snapshots, which carry no dtypes.
	Precision *Precision
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
	if o.TopN <= 0 {
		o.TopN = 10
	}
	if o.StackDepth <= 0 && !o.FullStacks {
		o.StackDepth = 6
	}
	if o.Rules == nil {
		o.Rules = DefaultRules()
	}
}

// Device is the full analysis of one device of a snapshot.
type Device struct {
	Device             int            `json:"device"`
	Entries            int            `json:"entries"`
	HasTime            bool           `json:"has_time"`
	Peak               Peak           `json:"peak"`
	Start              StateOut       `json:"start"`
	End                StateOut       `json:"end"`
	CategoriesAtPeak   []Group        `json:"categories_at_peak"`
	GroupsAtPeak       []Group        `json:"groups_at_peak"`
	SourcesAtPeak      []Group        `json:"sources_at_peak"`
	ModulesAtPeak      []Group        `json:"modules_at_peak"`
	StacksAtPeak       []StackGroup   `json:"stacks_at_peak"`
	TopAllocations     []TopAlloc     `json:"top_allocations"`
	PhaseSource        string         `json:"step_source"`
	Steps              []StepOut      `json:"steps"`
	Pattern            string         `json:"pattern"`
	Leak               *Leak          `json:"leak,omitempty"`
	Fragmentation      *Fragmentation `json:"-"`
	FragmentationOut   FragOut        `json:"fragmentation"`
	EfficiencyRatio    float64        `json:"efficiency_ratio"`
	OOMs               []OOM          `json:"ooms"`
	Truncated          bool           `json:"truncated"`
	TruncationEvidence string         `json:"truncation_evidence,omitempty"`
	UnmatchedFrees     int            `json:"unmatched_frees"`
	GhostBlocks        int            `json:"blocks_before_recording"`
	Findings           []Finding      `json:"findings"`

	Replay *Replay `json:"-"`
	Phases *Phases `json:"-"`
	snap   *snapshot.Snapshot
	live   []*Alloc // alive at the peak, largest first
}

// Peak is the highest allocated memory of the trace.
type Peak struct {
	AllocatedBytes      int64  `json:"allocated_bytes"`
	ReservedBytes       int64  `json:"reserved_bytes"`         // highest reserved over the trace
	ReservedAtPeakBytes int64  `json:"reserved_at_peak_bytes"` // reserved when allocated peaked
	ActiveBytes         int64  `json:"active_bytes"`
	RequestedBytes      int64  `json:"requested_bytes"`
	TimeUS              int64  `json:"time_us"`
	EventIndex          int    `json:"event_index"`
	Phase               string `json:"phase"`
	Step                int    `json:"step"` // -1 if outside any step
}

// StateOut is a point of the timeline in JSON form.
type StateOut struct {
	AllocatedBytes int64 `json:"allocated_bytes"`
	RequestedBytes int64 `json:"requested_bytes"`
	ActiveBytes    int64 `json:"active_bytes"`
	ReservedBytes  int64 `json:"reserved_bytes"`
}

func stateOut(s State) StateOut {
	return StateOut{s.Allocated, s.Requested, s.Active, s.Reserved}
}

// Group is bytes alive at the peak under one name.
type Group struct {
	Name  string `json:"name"`
	Bytes int64  `json:"bytes"`
	Count int    `json:"count"`
}

// FrameOut is a frame in JSON form.
type FrameOut struct {
	Filename string `json:"filename"`
	Line     int    `json:"line"`
	Name     string `json:"name"`
}

// StackGroup is bytes alive at the peak allocated from one stack.
type StackGroup struct {
	Bytes    int64      `json:"bytes"`
	Count    int        `json:"count"`
	Category string     `json:"category"`
	Frames   []FrameOut `json:"frames"`
}

// TopAlloc is one large allocation alive at the peak.
type TopAlloc struct {
	Bytes          int64      `json:"bytes"`
	RequestedBytes int64      `json:"requested_bytes"`
	Category       string     `json:"category"`
	Group          string     `json:"group"`
	Module         string     `json:"module,omitempty"`
	Stream         int64      `json:"stream"`
	Address        uint64     `json:"address"`
	AgeNS          int64      `json:"age_ns"` // at the peak; -1 if allocated before recording
	AllocIndex     int        `json:"alloc_index"`
	Origin         string     `json:"origin"`
	Frames         []FrameOut `json:"frames"`
}

// StepOut is one step in JSON form.
type StepOut struct {
	Name               string `json:"name"`
	StartIndex         int    `json:"start_index"`
	EndIndex           int    `json:"end_index"`
	StartUS            int64  `json:"start_us"`
	DurationNS         int64  `json:"duration_ns"`
	PeakAllocatedBytes int64  `json:"peak_allocated_bytes"`
	EndAllocatedBytes  int64  `json:"end_allocated_bytes"`
	Partial            bool   `json:"partial"`
}

// topStacks is how many stacks alive at the peak are kept at least (the
// top-consumers chart shows 30).
const topStacks = 30

// Analyze runs every analysis on device d of s.
func Analyze(s *snapshot.Snapshot, d int, o Options) *Device {
	o.defaults()
	// The phases need the replay only to measure the steps: find them
	// meanwhile.
	var ph *Phases
	wait := goPanicSafe(func() { ph = tracePhases(s, d) })
	r := NewReplay(s, d)
	wait()
	ph.measure(r)
	categorize(s, r, ph)
	out := &Device{Device: d, Entries: s.Trace(d).Len(), HasTime: s.Trace(d).HasTime, Replay: r, Phases: ph, snap: s,
		Start: stateOut(r.Baseline), End: stateOut(r.End), Truncated: r.Truncated,
		TruncationEvidence: r.TruncationEvidence, UnmatchedFrees: r.Unmatched, GhostBlocks: r.Ghosts,
		PhaseSource: ph.Source}
	out.peak()
	out.atPeak(o)
	for _, st := range ph.Steps {
		out.Steps = append(out.Steps, StepOut{Name: st.Name, StartIndex: st.Start, EndIndex: st.End, StartUS: st.StartUS,
			DurationNS: (st.EndUS - st.StartUS) * 1000, PeakAllocatedBytes: st.Peak, EndAllocatedBytes: st.EndAllocated, Partial: st.Partial})
	}
	out.Pattern, out.Leak = classifyPattern(s, r, ph, o)
	out.Fragmentation = NewFragmentation(s, d)
	out.FragmentationOut = fragOut(out.Fragmentation, r, out.Peak)
	out.EfficiencyRatio = out.Fragmentation.Efficiency
	out.OOMs = explainOOMs(s, d, r, out.Fragmentation, o)
	out.Findings = findings(out, o)
	return out
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

func (a *Device) peak() {
	t := &a.Replay.Timeline
	p := Peak{EventIndex: -1, Step: -1, Phase: PhaseUnknown.String(), AllocatedBytes: a.Replay.Baseline.Allocated,
		ReservedBytes: a.Replay.Baseline.Reserved, ReservedAtPeakBytes: a.Replay.Baseline.Reserved,
		ActiveBytes: a.Replay.Baseline.Active, RequestedBytes: a.Replay.Baseline.Requested}
	for i, v := range t.Allocated {
		if v > p.AllocatedBytes {
			p.AllocatedBytes, p.EventIndex = v, i
		}
		p.ReservedBytes = max(p.ReservedBytes, t.Reserved[i])
	}
	if i := p.EventIndex; i >= 0 {
		p.TimeUS = t.TimeUS[i]
		p.ReservedAtPeakBytes = t.Reserved[i]
		p.ActiveBytes = t.Active[i]
		p.RequestedBytes = t.Requested[i]
		p.Phase = a.Phases.Of[i].String()
		for _, st := range a.Phases.Steps {
			if i >= st.Start && i < st.End {
				p.Step = st.Index
			}
		}
	}
	a.Peak = p
}

func (a *Device) frames(id snapshot.StackID, o Options) []FrameOut {
	fs := ShortStack(a.snap, id, o.StackDepth, o.FullStacks)
	out := make([]FrameOut, len(fs))
	for i, f := range fs {
		out[i] = FrameOut{f.Filename, f.Line, f.Name}
	}
	return out
}

// LiveAt returns the allocations alive just after entry i (i = -1: before the first).
func (r *Replay) LiveAt(i int) []*Alloc {
	var out []*Alloc
	for k := range r.Allocs {
		if r.Allocs[k].Alive(i) {
			out = append(out, &r.Allocs[k])
		}
	}
	return out
}

func (a *Device) atPeak(o Options) {
	s := a.snap
	live := a.Replay.LiveAt(a.Peak.EventIndex)
	sort.SliceStable(live, func(i, j int) bool { return live[i].Size > live[j].Size })
	a.live = live

	cats := map[string]*Group{}
	groups := map[string]*Group{}
	sources := map[string]*Group{}
	modules := map[string]*Group{}
	stacks := map[snapshot.StackID]*StackGroup{}
	stackCat := map[snapshot.StackID]map[Category]int64{}
	add := func(m map[string]*Group, k string, b int64) {
		g := m[k]
		if g == nil {
			g = &Group{Name: k}
			m[k] = g
		}
		g.Bytes += b
		g.Count++
	}
	peakUS := a.Peak.TimeUS
	type gkey struct {
		stack snapshot.StackID
		meta  uint32
	}
	groupCache := map[gkey]string{}
	type src struct{ source, module string }
	srcCache := map[snapshot.StackID]src{}
	for i, al := range live {
		meta := ""
		if al.Metadata != 0 {
			meta = s.Strings[al.Metadata]
		}
		group, ok := groupCache[gkey{al.Stack, al.Metadata}]
		if !ok {
			group = groupOf(s, al.Stack, o.Rules, meta)
			groupCache[gkey{al.Stack, al.Metadata}] = group
		}
		add(cats, al.Category.String(), al.Size)
		add(groups, group, al.Size)
		sc, ok := srcCache[al.Stack]
		if !ok {
			sc = src{"<no stack recorded>", "<no stack recorded>"}
			if f, ok := SourceFrame(s, al.Stack); ok {
				sc = src{ShortFrame(f), TrimPath(f.Filename)}
			}
			srcCache[al.Stack] = sc
		}
		srcName, modName := sc.source, sc.module
		if meta != "" {
			modName = meta
		}
		add(sources, srcName, al.Size)
		add(modules, modName, al.Size)
		sg := stacks[al.Stack]
		if sg == nil {
			sg = &StackGroup{}
			stacks[al.Stack] = sg
			stackCat[al.Stack] = map[Category]int64{}
		}
		sg.Bytes += al.Size
		sg.Count++
		stackCat[al.Stack][al.Category] += al.Size
		if i < o.TopN {
			ta := TopAlloc{Bytes: al.Size, RequestedBytes: al.Requested, Category: al.Category.String(), Group: group,
				Module: meta, Stream: s.Streams[al.Stream], Address: al.Addr, AgeNS: -1, AllocIndex: int(al.AllocIdx),
				Origin: originName(al.Origin), Frames: a.frames(al.Stack, o)}
			if al.AllocIdx >= 0 && a.HasTime {
				ta.AgeNS = (peakUS - a.Replay.Timeline.TimeUS[al.AllocIdx]) * 1000
			}
			a.TopAllocations = append(a.TopAllocations, ta)
		}
	}
	a.CategoriesAtPeak = sortedGroups(cats, 0)
	a.GroupsAtPeak = sortedGroups(groups, 0)
	a.SourcesAtPeak = sortedGroups(sources, o.TopN)
	a.ModulesAtPeak = sortedGroups(modules, o.TopN)
	ids := make([]snapshot.StackID, 0, len(stacks))
	for id := range stacks {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool {
		if stacks[ids[i]].Bytes != stacks[ids[j]].Bytes {
			return stacks[ids[i]].Bytes > stacks[ids[j]].Bytes
		}
		return ids[i] < ids[j]
	})
	for i, id := range ids {
		if i >= max(o.TopN, topStacks) {
			break
		}
		sg := stacks[id]
		var best Category
		var bestB int64 = -1
		for c, b := range stackCat[id] {
			if b > bestB || (b == bestB && c < best) {
				best, bestB = c, b
			}
		}
		sg.Category = best.String()
		sg.Frames = a.frames(id, o)
		a.StacksAtPeak = append(a.StacksAtPeak, *sg)
	}
}

func originName(o Origin) string {
	switch o {
	case BeforeUnmatched:
		return "before_recording_freed_in_trace"
	case BeforeGhost:
		return "before_recording"
	}
	return "trace"
}

func sortedGroups(m map[string]*Group, n int) []Group {
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
	if n > 0 && len(out) > n {
		out = out[:n]
	}
	return out
}
