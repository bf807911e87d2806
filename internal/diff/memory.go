package diff

import (
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/ptscope/ptscope/internal/finding"
	"github.com/ptscope/ptscope/internal/memory"
	"github.com/ptscope/ptscope/internal/rankname"
)

// MemoryDiff compares one device of a snapshot in A with its partner in B.
type MemoryDiff struct {
	Key string `json:"key"` // what paired them: "rank 0, device 0", or the file names
	A   Where  `json:"a"`
	B   Where  `json:"b"`

	PeakAllocated    Bytes `json:"peak_allocated"`
	PeakReserved     Bytes `json:"peak_reserved"`
	ReservedAtPeak   Bytes `json:"reserved_at_peak"`
	EndAllocated     Bytes `json:"end_allocated"`
	EfficiencyAtPeak Ratio `json:"efficiency_at_peak"` // allocated / reserved at the peak
	CachedFreeAtPeak Bytes `json:"cached_free_at_peak"`
	LargestFree      Bytes `json:"largest_free"` // largest free block at the end
	RoundingWaste    Bytes `json:"rounding_waste"`
	Segments         Count `json:"segments"`

	// What was alive at each side's own peak, complete, largest change
	// first. Stacks are matched by their frames, never by address.
	Categories []GroupRow `json:"categories"`
	Groups     []GroupRow `json:"groups"`
	Sources    []GroupRow `json:"sources"`
	Modules    []GroupRow `json:"modules"`
	Stacks     []StackRow `json:"stacks"`

	Steps          Count       `json:"steps"`
	MedianStepPeak Bytes       `json:"median_step_peak"` // over full steps
	MedianStepTime Duration    `json:"median_step_duration"`
	Pattern        PatternDiff `json:"pattern"`
	LeakPerStep    Bytes       `json:"leak_per_step"` // 0 on a side that does not leak
	Phases         []PhaseDiff `json:"phases"`        // forward, backward, optimizer, ...
	OOMs           Count       `json:"ooms"`

	// FindingsAppeared are B's findings that A did not have (by id and
	// name); FindingsResolved A's that B no longer has.
	FindingsAppeared []finding.Finding `json:"findings_appeared"`
	FindingsResolved []finding.Finding `json:"findings_resolved"`
}

// Where names one side's result.
type Where struct {
	Path   string `json:"path"`
	Rank   int    `json:"rank"`             // -1 when unknown
	Device int    `json:"device,omitempty"` // memory only
}

// GroupRow is a named group alive at the peak on either side.
type GroupRow struct {
	Name   string `json:"name"`
	Status Status `json:"status"`
	Bytes  Bytes  `json:"bytes"`
	Count  Count  `json:"count"`
}

// StackRow is one stack alive at the peak on either side.
type StackRow struct {
	Status   Status          `json:"status"`
	Bytes    Bytes           `json:"bytes"`
	Count    Count           `json:"count"`
	Category memory.Category `json:"category"` // of every block of the row, in A and B
	Source   string          `json:"source"`
	memory.Stack
}

// PatternDiff is each side's step pattern.
type PatternDiff struct {
	A memory.Pattern `json:"a"`
	B memory.Pattern `json:"b"`
}

// PhaseDiff compares one phase, each number the median over the full
// steps that have it.
type PhaseDiff struct {
	Phase    memory.Phase `json:"phase"`
	Steps    Count        `json:"steps"`
	Before   Bytes        `json:"allocated_before"`
	After    Bytes        `json:"allocated_after"`
	Growth   Bytes        `json:"growth"` // after - before
	Peak     Bytes        `json:"peak"`
	Duration Duration     `json:"duration"`
}

// memEntry is one device result of a side with what pairs it.
type memEntry struct {
	in   *memory.Input
	res  *memory.Result
	rank int    // -1 unknown
	name string // the snapshot's file name
}

func (e memEntry) key() string {
	var parts []string
	if e.rank >= 0 {
		parts = append(parts, "rank "+strconv.Itoa(e.rank))
	}
	parts = append(parts, e.name, "device "+strconv.Itoa(e.res.Device))
	return strings.Join(parts, ", ")
}

func (e memEntry) where() Where { return Where{Path: e.in.Path, Rank: e.rank, Device: e.res.Device} }

// rankOf reads a rank from a path's last elements ("rank3.pickle",
// "rank_3/snapshot.pickle"; rankname's rule); -1 when none says.
func rankOf(path string) int {
	for i := 0; i < 3 && path != "." && path != "/" && path != ""; i++ {
		if n, ok := rankname.Of(filepath.Base(path)); ok {
			return n
		}
		path = filepath.Dir(path)
	}
	return -1
}

func memEntries(r *memory.Report) []memEntry {
	var out []memEntry
	for _, in := range r.Inputs {
		if in.Error != "" {
			continue
		}
		rank := rankOf(in.Path)
		if in.Bundle != nil {
			rank = in.Bundle.Rank
		}
		for _, d := range in.Devices {
			out = append(out, memEntry{in: in, res: d, rank: rank, name: filepath.Base(in.Path)})
		}
	}
	return out
}

type memPair struct{ a, b memEntry }

// pairMemory pairs device results: one on each side pair up whatever their
// names; otherwise by rank, file name and device, then what is left by rank
// and device when that is unambiguous.
func pairMemory(a, b *memory.Report) ([]memPair, []Unmatched) {
	ea, eb := memEntries(a), memEntries(b)
	if len(ea) == 1 && len(eb) == 1 {
		p := memPair{ea[0], eb[0]}
		return []memPair{p}, nil
	}
	usedA, usedB := make([]bool, len(ea)), make([]bool, len(eb))
	var pairs []memPair
	match := func(key func(memEntry) string) {
		count := func(es []memEntry, used []bool) map[string]int {
			m := map[string]int{}
			for i, e := range es {
				if !used[i] {
					m[key(e)]++
				}
			}
			return m
		}
		ca, cb := count(ea, usedA), count(eb, usedB)
		for i, x := range ea {
			k := key(x)
			if usedA[i] || ca[k] != 1 || cb[k] != 1 {
				continue
			}
			for j, y := range eb {
				if !usedB[j] && key(y) == k {
					usedA[i], usedB[j] = true, true
					pairs = append(pairs, memPair{x, y})
					break
				}
			}
		}
	}
	match(func(e memEntry) string { return e.key() })
	match(func(e memEntry) string { return fmt.Sprintf("%d/%d", e.rank, e.res.Device) })
	var un []Unmatched
	for i, e := range ea {
		if !usedA[i] {
			un = append(un, Unmatched{Side: "a", Kind: "memory", Key: e.key(), Path: e.in.Path})
		}
	}
	for j, e := range eb {
		if !usedB[j] {
			un = append(un, Unmatched{Side: "b", Kind: "memory", Key: e.key(), Path: e.in.Path})
		}
	}
	return pairs, un
}

// pairKey says what the two sides share: rank, file name, device.
func pairKey(a, b memEntry) string {
	var parts []string
	if a.rank >= 0 && a.rank == b.rank {
		parts = append(parts, "rank "+strconv.Itoa(a.rank))
	}
	if a.name == b.name {
		parts = append(parts, a.name)
	}
	if a.res.Device == b.res.Device {
		parts = append(parts, "device "+strconv.Itoa(a.res.Device))
	} else {
		parts = append(parts, fmt.Sprintf("device %d vs %d", a.res.Device, b.res.Device))
	}
	return strings.Join(parts, ", ")
}

func compareMemory(p memPair) MemoryDiff {
	a, b := p.a.res, p.b.res
	key := pairKey(p.a, p.b)
	fa, fb := &a.Fragmentation, &b.Fragmentation
	d := MemoryDiff{Key: key, A: p.a.where(), B: p.b.where(),
		PeakAllocated:    bytesOf(a.Peak.AllocatedBytes, b.Peak.AllocatedBytes),
		PeakReserved:     bytesOf(a.Peak.ReservedBytes, b.Peak.ReservedBytes),
		ReservedAtPeak:   bytesOf(a.Peak.ReservedAtPeakBytes, b.Peak.ReservedAtPeakBytes),
		EndAllocated:     bytesOf(a.End.AllocatedBytes, b.End.AllocatedBytes),
		EfficiencyAtPeak: ratioOf(fa.EfficiencyAtPeak, fb.EfficiencyAtPeak),
		CachedFreeAtPeak: bytesOf(fa.CachedFreeAtPeakBytes, fb.CachedFreeAtPeakBytes),
		LargestFree:      bytesOf(fa.LargestFreeBytes, fb.LargestFreeBytes),
		RoundingWaste:    bytesOf(fa.RoundingWasteBytes, fb.RoundingWasteBytes),
		Segments:         countOf(float64(fa.SegmentCount), float64(fb.SegmentCount)),
		Steps:            countOf(float64(len(a.Steps)), float64(len(b.Steps))),
		MedianStepPeak:   bytesOf(medianStep(a, func(s memory.StepRow) int64 { return s.PeakAllocatedBytes }), medianStep(b, func(s memory.StepRow) int64 { return s.PeakAllocatedBytes })),
		MedianStepTime:   durationOf(medianStep(a, func(s memory.StepRow) int64 { return s.DurationNS }), medianStep(b, func(s memory.StepRow) int64 { return s.DurationNS })),
		Pattern:          PatternDiff{a.Pattern, b.Pattern},
		LeakPerStep:      bytesOf(leakPerStep(a), leakPerStep(b)),
		OOMs:             countOf(float64(a.OOMCount()), float64(b.OOMCount())),
	}
	d.Categories = groups(catGroups(a.Categories), catGroups(b.Categories))
	d.Groups = groups(a.Groups, b.Groups)
	d.Sources = groups(a.Sources, b.Sources)
	d.Modules = groups(a.Modules, b.Modules)
	d.Stacks = stacks(a.Stacks, b.Stacks)
	d.Phases = phases(a, b)
	d.FindingsAppeared, d.FindingsResolved = changedFindings(a.Findings, b.Findings)
	return d
}

func catGroups(cs []memory.CategoryGroup) []memory.Group {
	out := make([]memory.Group, len(cs))
	for i, c := range cs {
		out[i] = memory.Group{Name: c.Category.String(), Bytes: c.Bytes, Count: c.Count}
	}
	return out
}

// groups matches named groups of the two sides.
func groups(a, b []memory.Group) []GroupRow {
	type pair struct {
		a, b     memory.Group
		inA, inB bool
	}
	m := map[string]*pair{}
	var order []string
	get := func(name string) *pair {
		p := m[name]
		if p == nil {
			p = &pair{}
			m[name] = p
			order = append(order, name)
		}
		return p
	}
	for _, g := range a {
		p := get(g.Name)
		p.a.Bytes += g.Bytes
		p.a.Count += g.Count
		p.inA = true
	}
	for _, g := range b {
		p := get(g.Name)
		p.b.Bytes += g.Bytes
		p.b.Count += g.Count
		p.inB = true
	}
	out := make([]GroupRow, 0, len(order))
	for _, name := range order {
		p := m[name]
		out = append(out, GroupRow{Name: name, Status: statusOf(p.inA, p.inB, float64(p.a.Bytes), float64(p.b.Bytes)),
			Bytes: bytesOf(p.a.Bytes, p.b.Bytes), Count: countOf(float64(p.a.Count), float64(p.b.Count))})
	}
	sort.SliceStable(out, func(i, j int) bool { return byChange(out[i].Bytes, out[j].Bytes, out[i].Name, out[j].Name) })
	return out
}

// byChange orders rows by the size of their change, then by their larger
// side, then by name.
func byChange(x, y Bytes, nx, ny string) bool {
	dx, dy := abs(x.Delta), abs(y.Delta)
	if dx != dy {
		return dx > dy
	}
	if mx, my := max(x.A, x.B), max(y.A, y.B); mx != my {
		return mx > my
	}
	return nx < ny
}

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// stackKey identifies a stack by its frames (and the backward node that
// ran it), so that the same code path matches across runs; rows are a
// stack's bytes in one category (memory.StackGroup), matched by both.
func stackKey(s *memory.Stack) string {
	var b strings.Builder
	for _, f := range s.Frames {
		b.WriteString(f.Filename)
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(f.Line))
		b.WriteByte(':')
		b.WriteString(f.Name)
		b.WriteByte('\n')
	}
	b.WriteString(s.AutogradNode)
	return b.String()
}

func stacks(a, b []memory.StackGroup) []StackRow {
	type pair struct {
		a, b     *memory.StackGroup
		ab, bb   int64
		ac, bc   int
		inA, inB bool
	}
	m := map[string]*pair{}
	var order []string
	get := func(g *memory.StackGroup) *pair {
		k := stackKey(&g.Stack) + "\x00" + g.Category.String()
		p := m[k]
		if p == nil {
			p = &pair{}
			m[k] = p
			order = append(order, k)
		}
		return p
	}
	for i := range a {
		p := get(&a[i])
		p.a, p.inA = &a[i], true
		p.ab += a[i].Bytes
		p.ac += a[i].Count
	}
	for i := range b {
		p := get(&b[i])
		p.b, p.inB = &b[i], true
		p.bb += b[i].Bytes
		p.bc += b[i].Count
	}
	out := make([]StackRow, 0, len(order))
	for _, k := range order {
		p := m[k]
		g := p.b
		if g == nil {
			g = p.a
		}
		out = append(out, StackRow{Status: statusOf(p.inA, p.inB, float64(p.ab), float64(p.bb)), Bytes: bytesOf(p.ab, p.bb),
			Count: countOf(float64(p.ac), float64(p.bc)), Category: g.Category, Source: g.Source, Stack: g.Stack})
	}
	sort.SliceStable(out, func(i, j int) bool { return byChange(out[i].Bytes, out[j].Bytes, "", "") })
	return out
}

// fullSteps are the steps not cut by the recording (all steps when every
// one is cut).
func fullSteps(r *memory.Result) map[int]bool {
	full := map[int]bool{}
	for _, s := range r.Steps {
		if !s.Partial {
			full[s.Index] = true
		}
	}
	if len(full) == 0 {
		for _, s := range r.Steps {
			full[s.Index] = true
		}
	}
	return full
}

func medianStep(r *memory.Result, v func(memory.StepRow) int64) int64 {
	full := fullSteps(r)
	var xs []int64
	for _, s := range r.Steps {
		if full[s.Index] {
			xs = append(xs, v(s))
		}
	}
	return median(xs)
}

// median of xs (the lower middle of an even count); 0 when empty.
func median(xs []int64) int64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]int64(nil), xs...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[(len(s)-1)/2]
}

func leakPerStep(r *memory.Result) int64 {
	if r.Pattern == memory.PatternLeak && r.Leak != nil {
		return r.Leak.PerStepBytes
	}
	return 0
}

// phases compares each phase's medians over the full steps of each side
// (every row when a side has no steps).
func phases(a, b *memory.Result) []PhaseDiff {
	type stats struct {
		n                                  int
		before, after, growth, peak, durNS int64
	}
	summarize := func(r *memory.Result) map[memory.Phase]stats {
		full := fullSteps(r)
		by := map[memory.Phase][]memory.PhaseStat{}
		for _, p := range r.PhaseStats {
			if len(full) == 0 || full[p.Step] {
				by[p.Phase] = append(by[p.Phase], p)
			}
		}
		out := map[memory.Phase]stats{}
		for ph, rows := range by {
			col := func(f func(memory.PhaseStat) int64) int64 {
				xs := make([]int64, len(rows))
				for i, r := range rows {
					xs[i] = f(r)
				}
				return median(xs)
			}
			out[ph] = stats{n: len(rows),
				before: col(func(p memory.PhaseStat) int64 { return p.AllocatedBeforeBytes }),
				after:  col(func(p memory.PhaseStat) int64 { return p.AllocatedAfterBytes }),
				growth: col(func(p memory.PhaseStat) int64 { return p.AllocatedAfterBytes - p.AllocatedBeforeBytes }),
				peak:   col(func(p memory.PhaseStat) int64 { return p.PeakBytes }),
				durNS:  col(func(p memory.PhaseStat) int64 { return p.DurationNS })}
		}
		return out
	}
	sa, sb := summarize(a), summarize(b)
	out := []PhaseDiff{}
	for _, ph := range []memory.Phase{memory.PhaseForward, memory.PhaseBackward, memory.PhaseOptimizer, memory.PhaseZeroGrad, memory.PhaseOther} {
		x, okA := sa[ph]
		y, okB := sb[ph]
		if !okA && !okB {
			continue
		}
		out = append(out, PhaseDiff{Phase: ph, Steps: countOf(float64(x.n), float64(y.n)),
			Before: bytesOf(x.before, y.before), After: bytesOf(x.after, y.after), Growth: bytesOf(x.growth, y.growth),
			Peak: bytesOf(x.peak, y.peak), Duration: durationOf(x.durNS, y.durNS)})
	}
	return out
}

// changedFindings returns b's findings that a lacks and a's that b lacks,
// matched by id and the name they point at.
func changedFindings(a, b []finding.Finding) (appeared, resolved []finding.Finding) {
	key := func(f finding.Finding) string {
		if f.At != nil {
			return f.ID + "\x00" + f.At.Name
		}
		return f.ID
	}
	in := func(fs []finding.Finding) map[string]bool {
		m := map[string]bool{}
		for _, f := range fs {
			m[key(f)] = true
		}
		return m
	}
	ka, kb := in(a), in(b)
	appeared, resolved = []finding.Finding{}, []finding.Finding{}
	for _, f := range b {
		if !ka[key(f)] {
			appeared = append(appeared, f)
		}
	}
	for _, f := range a {
		if !kb[key(f)] {
			resolved = append(resolved, f)
		}
	}
	return appeared, resolved
}
