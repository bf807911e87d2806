package fleet

import (
	"context"
	"sort"

	"github.com/ptscope/ptscope/internal/envelope"
	"github.com/ptscope/ptscope/internal/finding"
	"github.com/ptscope/ptscope/internal/input"
	"github.com/ptscope/ptscope/internal/memory"
	"github.com/ptscope/ptscope/internal/perf"
)

// Summarize reads and analyses every input (Each) and returns the fleet
// summary, with command naming its document. visit, when not nil, also
// sees every input's complete results, in order, before they are dropped
// (the Parquet export writes its rows there). Inputs that cannot be read
// are in Report.Errors; the error is visit's or the context's.
func Summarize(ctx context.Context, command string, in *Inputs, o Options, visit func(*Loaded) error) (*Report, error) {
	s := NewSummary(command, in)
	err := Each(ctx, in, o, func(l *Loaded) error {
		s.Add(l)
		if visit != nil {
			return visit(l)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s.Finish(), nil
}

// Summary accumulates the fleet summary one input at a time; it keeps one
// row per rank and one entry per matched collective and step name, never an
// input's full result.
type Summary struct {
	rep    *Report
	mem    map[int]*RankMemory
	memIdx []int // ranks with a memory row, in the order added
	tim    map[int]*rankTimeAcc
	timIdx []int
	coll   map[collKey]*collAcc
	order  []collKey
	steps  map[string]*StepSpread
	snames []string
	rf     map[string]*rankFindingAcc
	rfIDs  []string
}

type collKey struct {
	name, group string
	n           int64
}

// collAcc is a collective being matched across ranks, as perf's
// cross-rank comparison does, one rank at a time.
type collAcc struct {
	ranks          int
	first, last    int64
	lastRank       int // the first rank (in rank order) with the latest start
	maxDur, minDur int64
	slowest        int
	// events are the ranks' events of the collective (names left out: the
	// key has them), for the wait split (perf.WaitSplit) at the end
	events []rankEvent
}

type rankEvent struct {
	rank int
	ev   perf.CollectiveEvent
}

type rankTimeAcc struct {
	row         RankTime
	stepTotalNS int64 // sum of step durations, for the average
	utilNS      float64
	dlNS        float64
}

type rankFindingAcc struct {
	RankFinding
	seen map[int]bool
}

// NewSummary starts an empty summary of the inputs in.
func NewSummary(command string, in *Inputs) *Summary {
	rep := &Report{Header: envelope.NewHeader(command), Fleet: true, Inputs: len(in.Files), Ranks: len(in.Ranks()),
		Findings: []finding.Finding{}, RankFindings: []RankFinding{}, Errors: []InputError{}, Skipped: in.Skipped}
	if rep.Skipped == nil {
		rep.Skipped = []Skipped{}
	}
	return &Summary{rep: rep, mem: map[int]*RankMemory{}, tim: map[int]*rankTimeAcc{}, coll: map[collKey]*collAcc{},
		steps: map[string]*StepSpread{}, rf: map[string]*rankFindingAcc{}}
}

// Add folds one input's results into the summary.
func (s *Summary) Add(l *Loaded) {
	if l.Err != nil {
		s.rep.Errors = append(s.rep.Errors, InputError{Rank: l.Rank, Path: l.Path, Error: errorLine(l.Err)})
	}
	if l.Kind == input.Snapshot {
		s.addMemory(l)
	} else {
		s.addTime(l)
	}
}

func (s *Summary) addMemory(l *Loaded) {
	row := s.mem[l.Rank]
	if row == nil {
		row = &RankMemory{Rank: l.Rank, Path: l.Path, Device: -1, Findings: []string{}}
		s.mem[l.Rank] = row
		s.memIdx = append(s.memIdx, l.Rank)
	}
	if l.Err != nil && row.Error == "" {
		row.Error = errorLine(l.Err)
	}
	if l.Memory == nil {
		return
	}
	for _, in := range l.Memory.Inputs {
		row.Inputs++
		if len(in.Devices) == 0 && len(in.Phases) > 0 && row.Device < 0 {
			alloc, res := memory.PhasePeaks(in.Phases)
			row.Path, row.PhasesOnly = in.Path, true
			row.PeakAllocatedBytes = max(row.PeakAllocatedBytes, alloc)
			row.PeakReservedBytes = max(row.PeakReservedBytes, res)
			if in.Bundle != nil {
				row.DeviceTotalBytes = in.Bundle.DeviceTotalBytes
			}
		}
		for _, d := range in.Devices {
			row.Devices++
			if peak := in.RunPeakAllocatedBytes(d); row.Device < 0 || peak > row.PeakAllocatedBytes {
				row.Path, row.Device, row.PhasesOnly = in.Path, d.Device, false
				row.PeakAllocatedBytes = peak
				row.EndAllocatedBytes = d.End.AllocatedBytes
				row.EfficiencyAtPeakRatio = d.Fragmentation.EfficiencyAtPeak
				row.TopCategory = memory.CatUnknown
				if len(d.Categories) > 0 {
					row.TopCategory = d.Categories[0].Category
				}
				row.Steps = len(d.Steps)
				if in.Bundle != nil {
					row.DeviceTotalBytes = in.Bundle.DeviceTotalBytes
				}
			}
			row.PeakReservedBytes = max(row.PeakReservedBytes, d.Peak.ReservedBytes)
			// A leak, an OOM or a truncation on any snapshot of the rank
			// marks the rank; several snapshots of one run may repeat the
			// same OOM, so counts are the most any snapshot holds.
			if d.Pattern == memory.PatternLeak || row.Pattern == memory.PatternUnknown ||
				(row.Pattern != memory.PatternLeak && d.Pattern == memory.PatternSpike) {
				row.Pattern = d.Pattern
			}
			if d.Pattern == memory.PatternLeak && d.Leak != nil {
				row.LeakPerStepBytes = max(row.LeakPerStepBytes, d.Leak.PerStepBytes)
			}
			row.OOMs = max(row.OOMs, d.OOMCount())
			row.Truncated = row.Truncated || d.Truncated
			for _, f := range d.Findings {
				if !contains(row.Findings, f.ID) {
					row.Findings = append(row.Findings, f.ID)
				}
				s.rankFinding("memory", l.Rank, f)
			}
		}
	}
}

func (s *Summary) addTime(l *Loaded) {
	acc := s.tim[l.Rank]
	if acc == nil {
		acc = &rankTimeAcc{row: RankTime{Rank: l.Rank, Path: l.Path, Findings: []string{}, Warnings: []string{}}}
		s.tim[l.Rank] = acc
		s.timIdx = append(s.timIdx, l.Rank)
	}
	row := &acc.row
	if l.Err != nil && row.Error == "" {
		row.Error = errorLine(l.Err)
	}
	r := l.Trace
	if r == nil {
		return
	}
	first := row.Traces == 0
	row.Traces++
	if r.WorldSize > 0 {
		row.WorldSize = r.WorldSize
	}
	var total int64
	for _, st := range r.Steps {
		total += st.DurationNS
	}
	row.Steps += len(r.Steps)
	acc.stepTotalNS += total
	acc.utilNS += r.GPUUtilizationRatio * float64(total)
	acc.dlNS += r.DataLoaderRatio * float64(total)
	if row.Steps > 0 {
		row.AverageStepNS = acc.stepTotalNS / int64(row.Steps)
	}
	if acc.stepTotalNS > 0 {
		row.GPUUtilizationRatio = acc.utilNS / float64(acc.stepTotalNS)
		row.DataLoaderRatio = acc.dlNS / float64(acc.stepTotalNS)
	} else if first {
		row.GPUUtilizationRatio, row.DataLoaderRatio = r.GPUUtilizationRatio, r.DataLoaderRatio
	}
	if first {
		row.MedianStepNS = r.MedianStepNS
	}
	row.CommunicationNS += r.Comm.KernelNS
	row.ExposedCommunicationNS += r.Comm.ExposedNS
	row.Warnings = append(row.Warnings, r.Warnings...)
	for _, f := range r.Findings {
		if !contains(row.Findings, f.ID) {
			row.Findings = append(row.Findings, f.ID)
		}
		s.rankFinding("trace", l.Rank, f)
	}
	for _, st := range r.Steps {
		sp := s.steps[st.Name]
		if sp == nil {
			sp = &StepSpread{Name: st.Name, MinNS: st.DurationNS, SlowestRank: l.Rank}
			s.steps[st.Name] = sp
			s.snames = append(s.snames, st.Name)
		}
		sp.Ranks++
		sp.MinNS = min(sp.MinNS, st.DurationNS)
		if st.DurationNS > sp.MaxNS {
			sp.MaxNS, sp.SlowestRank = st.DurationNS, l.Rank
		}
	}
	// Collectives: the rank's first kernel of each key counts, as in
	// perf's comparison.
	seen := map[collKey]bool{}
	r.CollectiveEvents(func(e perf.CollectiveEvent) bool {
		row.Collectives++
		k := collKey{e.Name, e.Group, e.Index}
		if seen[k] {
			return true
		}
		seen[k] = true
		c := s.coll[k]
		if c == nil {
			c = &collAcc{first: e.StartNS, last: e.StartNS, lastRank: l.Rank, minDur: -1, slowest: l.Rank}
			s.coll[k] = c
			s.order = append(s.order, k)
		} else {
			c.first = min(c.first, e.StartNS)
			if e.StartNS > c.last {
				c.last, c.lastRank = e.StartNS, l.Rank
			}
		}
		c.ranks++
		e = e.Detach()
		e.Name, e.Group = "", ""
		c.events = append(c.events, rankEvent{l.Rank, e})
		d := e.EndNS - e.StartNS
		if d > c.maxDur {
			c.maxDur, c.slowest = d, l.Rank
		}
		if c.minDur < 0 || d < c.minDur {
			c.minDur = d
		}
		return true
	})
}

func (s *Summary) rankFinding(source string, rank int, f finding.Finding) {
	// the example names its rank, whatever the analysis pointed at
	at := finding.Ref{}
	if f.At != nil {
		at = *f.At
	}
	at.Rank = finding.Int(rank)
	f.At = &at
	id := source + "/" + f.ID
	a := s.rf[id]
	if a == nil {
		a = &rankFindingAcc{RankFinding: RankFinding{ID: f.ID, Source: source, Severity: f.Severity, Example: f}, seen: map[int]bool{}}
		s.rf[id] = a
		s.rfIDs = append(s.rfIDs, id)
	}
	if !a.seen[rank] {
		a.seen[rank] = true
		a.Ranks++
	}
	if f.Severity > a.Severity {
		a.Severity, a.Example = f.Severity, f
	}
}

// Finish computes the distributions, outliers and findings.
func (s *Summary) Finish() *Report {
	rep := s.rep
	if len(s.memIdx) > 0 {
		rep.Memory = s.finishMemory()
	}
	if len(s.timIdx) > 0 {
		rep.Time = s.finishTime()
	}
	for _, id := range s.rfIDs {
		rep.RankFindings = append(rep.RankFindings, s.rf[id].RankFinding)
	}
	sort.SliceStable(rep.RankFindings, func(i, j int) bool {
		a, b := rep.RankFindings[i], rep.RankFindings[j]
		if a.Severity != b.Severity {
			return a.Severity > b.Severity
		}
		if a.Ranks != b.Ranks {
			return a.Ranks > b.Ranks
		}
		return a.ID < b.ID
	})
	rep.Findings = fleetFindings(rep)
	sort.SliceStable(rep.Errors, func(i, j int) bool { return rep.Errors[i].Rank < rep.Errors[j].Rank })
	return rep
}

func (s *Summary) finishMemory() *MemoryFleet {
	m := &MemoryFleet{Ranks: []RankMemory{}, OOMRanks: []int{}, LeakRanks: []int{}, TruncatedRanks: []int{}}
	ranks := append([]int(nil), s.memIdx...)
	sort.Ints(ranks)
	var peak, reserved, eff []sample
	for _, r := range ranks {
		row := s.mem[r]
		m.Ranks = append(m.Ranks, *row)
		if row.Measured() {
			peak = append(peak, sample{r, float64(row.PeakAllocatedBytes)})
			reserved = append(reserved, sample{r, float64(row.PeakReservedBytes)})
		}
		if row.Device >= 0 {
			eff = append(eff, sample{r, row.EfficiencyAtPeakRatio})
		}
		if row.OOMs > 0 {
			m.OOMRanks = append(m.OOMRanks, r)
		}
		if row.Pattern == memory.PatternLeak {
			m.LeakRanks = append(m.LeakRanks, r)
		}
		if row.Truncated {
			m.TruncatedRanks = append(m.TruncatedRanks, r)
		}
	}
	m.PeakAllocated = bytesStats(peak)
	m.PeakReserved = bytesStats(reserved)
	m.EfficiencyAtPeak = ratioStats(eff)
	if m.PeakAllocated.MeanBytes > 0 {
		m.ImbalanceRatio = float64(m.PeakAllocated.MaxBytes)/float64(m.PeakAllocated.MeanBytes) - 1
	}
	return m
}

func (s *Summary) finishTime() *TimeFleet {
	t := &TimeFleet{Ranks: []RankTime{}, Stragglers: []Straggler{}, Steps: []StepSpread{}}
	late := map[int]int{}
	matched := 0
	// the step time the late-arrival rule compares with
	var averages []int64
	for _, r := range s.timIdx {
		if row := s.tim[r].row; row.Steps > 0 {
			averages = append(averages, row.AverageStepNS)
		}
	}
	stepNS := perf.MedianStepNS(averages)
	var skews []sample
	var most []Collective
	for _, k := range s.order {
		c := s.coll[k]
		if c.ranks < 2 {
			continue
		}
		matched++
		x := Collective{Name: k.name, Group: k.group, Index: k.n, Ranks: c.ranks, StartNS: c.first, StartSkewNS: c.last - c.first,
			LastRank: c.lastRank, MaxDurNS: c.maxDur, MinDurNS: c.minDur, SlowestRank: c.slowest}
		if x.StartSkewNS == 0 {
			x.LastRank = -1
		} else if perf.LateArrival(x.StartSkewNS, stepNS) {
			late[c.lastRank]++
		}
		skews = append(skews, sample{-1, float64(x.StartSkewNS)})
		most = append(most, x)
	}
	t.Collectives.Matched = matched
	t.Collectives.StartSkew = durationStats(skews)
	t.Collectives.StartSkew.MinRank, t.Collectives.StartSkew.MaxRank = -1, -1
	t.Collectives.StartSkew.Outliers = []DurationOutlier{}
	sort.SliceStable(most, func(i, j int) bool { return most[i].StartSkewNS > most[j].StartSkewNS })
	if len(most) > MaxSkewedCollectives {
		most = most[:MaxSkewedCollectives]
	}
	t.Collectives.MostSkewed = append([]Collective{}, most...)

	ranks := append([]int(nil), s.timIdx...)
	sort.Ints(ranks)
	var step, util, dl, exposed []sample
	for _, r := range ranks {
		row := s.tim[r].row
		row.LateArrivals = late[r]
		t.Ranks = append(t.Ranks, row)
		if row.Steps > 0 {
			step = append(step, sample{r, float64(row.AverageStepNS)})
			util = append(util, sample{r, row.GPUUtilizationRatio})
			dl = append(dl, sample{r, row.DataLoaderRatio})
			exposed = append(exposed, sample{r, float64(row.ExposedCommunicationNS) / float64(row.Steps)})
		}
	}
	t.StepTime = durationStats(step)
	t.GPUUtilization = ratioStats(util)
	t.DataLoader = ratioStats(dl)
	t.ExposedCommunication = durationStats(exposed)
	for _, n := range s.snames {
		if sp := s.steps[n]; sp.Ranks >= 2 {
			sp.SkewNS = sp.MaxNS - sp.MinNS
			t.Steps = append(t.Steps, *sp)
		}
	}
	t.Stragglers = s.stragglers(t, matched)
	return t
}

// stragglers splits the ranks' time in the matched collectives into
// waiting and transfer and names the rank the others wait for, with perf's
// rule (perf.WaitSplit, as the cross-rank comparison does): it fills the
// ranks' wait columns and returns the straggler, if any.
func (s *Summary) stragglers(t *TimeFleet, matched int) []Straggler {
	idx := map[int]int{}
	rs := make([]perf.RankSummary, len(t.Ranks))
	for k, r := range t.Ranks {
		idx[r.Rank] = k
		rs[k] = perf.RankSummary{Rank: r.Rank, Steps: r.Steps, AverageStepNS: r.AverageStepNS, LateArrivals: r.LateArrivals,
			StepsNS: s.tim[r.Rank].stepTotalNS}
	}
	split := perf.NewWaitSplit(rs)
	events := make([]*perf.CollectiveEvent, len(rs))
	for _, k := range s.order {
		c := s.coll[k]
		if c.ranks < 2 {
			continue
		}
		clear(events)
		for i := range c.events {
			events[idx[c.events[i].rank]] = &c.events[i].ev
		}
		split.Collective(events, nil)
	}
	rank, ratio := split.Finish(matched)
	for k := range t.Ranks {
		r, x := &t.Ranks[k], split.Ranks[k]
		r.CommunicationWaitNS, r.CommunicationTransferNS, r.ExposedWaitNS, r.CausedWaitNS = x.CommunicationWaitNS, x.CommunicationTransferNS, x.ExposedWaitNS, x.CausedWaitNS
		if len(x.WaitsFor) > 0 {
			r.WaitsForRank = x.WaitsFor[0].Rank
		} else {
			r.WaitsForRank = -1
		}
	}
	out := []Straggler{}
	if rank < 0 {
		return out
	}
	r := t.Ranks[idx[rank]]
	lateRatio, dev := 0.0, 0.0
	if r.Collectives > 0 && matched > 0 {
		lateRatio = float64(r.LateArrivals) / float64(min(r.Collectives, matched))
	}
	if t.StepTime.MedianNS > 0 {
		dev = float64(r.AverageStepNS)/float64(t.StepTime.MedianNS) - 1
	}
	return append(out, Straggler{Rank: r.Rank, AverageStepNS: r.AverageStepNS, StepRatio: dev, LateArrivals: r.LateArrivals, LateRatio: lateRatio,
		WaitRatio: ratio, CausedWaitNS: r.CausedWaitNS})
}

func contains[T comparable](xs []T, x T) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}
