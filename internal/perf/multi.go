package perf

import (
	"fmt"
	"sort"
	"strings"

	"github.com/ptscope/ptscope/internal/finding"
	"github.com/ptscope/ptscope/internal/units"
)

// CrossRank compares the ranks of a distributed run.
type CrossRank struct {
	Ranks       []RankSummary    `json:"ranks"`
	Steps       []StepSkew       `json:"steps"`
	Collectives []CollectiveSkew `json:"collectives"`    // every collective seen on two or more ranks, most skewed first
	Straggler   int              `json:"straggler_rank"` // -1 if none stands out
	// StragglerWaitRatio is the other ranks' mean wait for the straggler
	// over their steps' time (0 without a straggler).
	StragglerWaitRatio float64 `json:"straggler_wait_ratio"`
	MaxSkewNS          int64   `json:"max_step_skew_ns"`
	// Workers are the plugin's per-rank bars of the average step (workers.go).
	Workers []WorkerOverlap `json:"workers"`
}

// RankSummary is one rank's headline numbers.
type RankSummary struct {
	Rank                int     `json:"rank"`
	Steps               int     `json:"steps"`
	AverageStepNS       int64   `json:"average_step_ns"`
	GPUUtilizationRatio float64 `json:"gpu_utilization_ratio"`
	CommunicationNS     int64   `json:"communication_total_ns"` // its communication kernels' durations, summed
	// LateArrivals counts the collectives the rank was the last to join,
	// late enough to count (LateArrival).
	LateArrivals int `json:"late_arrivals"`
	// Of its matched collectives' time (collectives seen on two or more
	// ranks): the transfer, the shortest time any rank spent in the
	// collective, and the rest, waiting for the rank that joined last (the
	// one whose own time is that shortest; the plugin's "synchronizing
	// time").
	CommunicationTransferNS int64 `json:"communication_transfer_ns"`
	CommunicationWaitNS     int64 `json:"communication_wait_ns"`
	// ExposedWaitNS is the part of the waiting in which the rank runs no
	// compute kernel: what the waiting costs it (waiting while compute runs
	// costs nothing). WaitsFor splits the waiting by the rank waited for,
	// most exposed first; CausedWaitNS is the other ranks' exposed waiting
	// for this rank.
	ExposedWaitNS int64      `json:"exposed_wait_ns"`
	WaitsFor      []RankWait `json:"waits_for"`
	CausedWaitNS  int64      `json:"caused_wait_ns"`
	// StepsNS is the sum of the rank's step durations.
	StepsNS int64 `json:"steps_ns"`
}

// RankWait is time spent waiting for one rank: in its collectives, and of
// that, with no compute running.
type RankWait struct {
	Rank      int   `json:"rank"`
	WaitNS    int64 `json:"wait_ns"`
	ExposedNS int64 `json:"exposed_wait_ns"`
}

// StepSkew is one step across ranks.
type StepSkew struct {
	Name        string  `json:"name"`
	DurationsNS []int64 `json:"durations_ns"` // by rank order of Ranks
	SkewNS      int64   `json:"skew_ns"`
	SlowestRank int     `json:"slowest_rank"`
	// WaitNS and TransferNS split each rank's matched collectives that
	// start in its step (by rank order of Ranks; -1: no such step).
	WaitNS     []int64 `json:"wait_ns"`
	TransferNS []int64 `json:"transfer_ns"`
}

// CollectiveSkew is one collective matched across ranks (by process group
// and sequence number, else by order per name).
type CollectiveSkew struct {
	Name        string `json:"name"`
	Index       int    `json:"index"`
	StartTimeNS int64  `json:"start_ns"`      // the earliest start
	StartSkewNS int64  `json:"start_skew_ns"` // latest start − earliest start
	LastRank    int    `json:"last_rank"`     // the rank that started last (the one the others waited for); -1 on a tie
	MaxDurNS    int64  `json:"max_duration_ns"`
	MinDurNS    int64  `json:"min_duration_ns"`
	SlowestRank int    `json:"slowest_rank"`
}

// The late-arrival rule, shared by the cross-rank view here and by
// internal/fleet: the rank that joins a collective last counts as late
// only when the collective's start skew is at least LateSkewMinNS and at
// least LateSkewStepRatio of the median step time. A clock offset between
// hosts or launch jitter of tens of microseconds then never makes a healthy
// rank a straggler, while a rank that holds the others for a share of the
// step still does.
const (
	LateSkewMinNS     = 100_000 // 100 us
	LateSkewStepRatio = 0.02
)

// LateArrival reports whether a collective whose ranks started skewNS
// apart, in steps of medianStepNS (0: unknown), has a late rank.
func LateArrival(skewNS, medianStepNS int64) bool {
	return skewNS >= LateSkewMinNS && float64(skewNS) >= LateSkewStepRatio*float64(medianStepNS)
}

// MedianStepNS is the step time the late-arrival rule compares with: the
// median over the ranks of their average step time (0 when no rank has
// steps).
func MedianStepNS(averages []int64) int64 {
	var v []int64
	for _, a := range averages {
		if a > 0 {
			v = append(v, a)
		}
	}
	if len(v) == 0 {
		return 0
	}
	sort.Slice(v, func(i, j int) bool { return v[i] < v[j] })
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

func crossRank(ranks []Rank) *CrossRank {
	c := &CrossRank{Straggler: -1, Collectives: []CollectiveSkew{}}
	late := map[int]int{}
	for _, r := range ranks {
		var total int64
		for _, st := range r.Steps {
			total += st.DurationNS
		}
		c.Ranks = append(c.Ranks, RankSummary{Rank: r.Rank, Steps: len(r.Steps), AverageStepNS: r.AverageStepNS,
			GPUUtilizationRatio: r.GPUUtilizationRatio, CommunicationNS: r.Comm.KernelNS, WaitsFor: []RankWait{}, StepsNS: total})
	}
	c.Steps = stepSkews(ranks)
	for _, s := range c.Steps {
		c.MaxSkewNS = max(c.MaxSkewNS, s.SkewNS)
	}
	// collectives
	type key struct {
		name, pg string
		n        int64
	}
	groups := map[key][]*CollectiveEvent{}
	var order []key
	var averages []int64
	for _, r := range ranks {
		averages = append(averages, r.AverageStepNS)
	}
	stepNS := MedianStepNS(averages)
	for k := range ranks {
		ranks[k].CollectiveEvents(func(e CollectiveEvent) bool {
			kk := key{name: e.Name, pg: e.Group, n: e.Index}
			g := groups[kk]
			if g == nil {
				g = make([]*CollectiveEvent, len(ranks))
				order = append(order, kk)
			}
			if g[k] == nil {
				g[k] = &e
			}
			groups[kk] = g
			return true
		})
	}
	split := NewWaitSplit(c.Ranks)
	for _, kk := range order {
		g := groups[kk]
		x := CollectiveSkew{Name: kk.name, Index: int(kk.n), MinDurNS: -1}
		var first, last int64 = -1, -1
		seen := 0
		for k, e := range g {
			if e == nil {
				continue
			}
			seen++
			if first < 0 || e.StartNS < first {
				first = e.StartNS
			}
			if e.StartNS > last {
				last = e.StartNS
				x.LastRank = ranks[k].Rank
			}
			d := e.EndNS - e.StartNS
			if d > x.MaxDurNS {
				x.MaxDurNS = d
				x.SlowestRank = ranks[k].Rank
			}
			if x.MinDurNS < 0 || d < x.MinDurNS {
				x.MinDurNS = d
			}
		}
		if seen < 2 {
			continue
		}
		split.Collective(g, func(k int, start, wait, transfer int64) {
			stepWait(c.Steps, ranks, k, start, wait, transfer)
		})
		x.StartTimeNS, x.StartSkewNS = first, last-first
		if x.StartSkewNS == 0 {
			x.LastRank = -1 // a tie has no last rank
		} else if LateArrival(x.StartSkewNS, stepNS) {
			late[x.LastRank]++
		}
		c.Collectives = append(c.Collectives, x)
	}
	sort.SliceStable(c.Collectives, func(i, j int) bool { return c.Collectives[i].StartSkewNS > c.Collectives[j].StartSkewNS })
	for k := range c.Ranks {
		c.Ranks[k].LateArrivals = late[c.Ranks[k].Rank]
	}
	c.Straggler, c.StragglerWaitRatio = split.Finish(len(c.Collectives))
	return c
}

// attributeWaits tells each rank's communication and low-utilisation
// findings how much of its collectives' time is waiting for other ranks,
// and for which: that waiting is the late rank's cost, not communication's,
// so the communication finding's severity counts the transfers only.
// ranks and c.Ranks are in the same order.
func attributeWaits(ranks []Rank, c *CrossRank) {
	for k := range ranks {
		s := c.Ranks[k]
		in := s.CommunicationWaitNS + s.CommunicationTransferNS
		if s.CommunicationWaitNS == 0 || in == 0 || len(s.WaitsFor) == 0 {
			continue
		}
		ws := share(s.CommunicationWaitNS, in)
		top := s.WaitsFor[0]
		who := fmt.Sprintf("rank %d", top.Rank)
		if top.Rank == c.Straggler {
			who += ", the straggler"
		}
		note := fmt.Sprintf(" Of its matched collectives' %s, %s (%s) is waiting for other ranks to join, %s of it for %s (%s with no compute to run); the transfers take %s.",
			units.Duration(in), units.Duration(s.CommunicationWaitNS), pct(ws), units.Duration(top.WaitNS), who, units.Duration(top.ExposedNS),
			units.Duration(s.CommunicationTransferNS))
		for i := range ranks[k].Findings {
			f := &ranks[k].Findings[i]
			switch f.ID {
			case "communication":
				f.Message += note
				f.Numbers["wait_ns"], f.Numbers["transfer_ns"], f.Numbers["waits_for_rank"] = float64(s.CommunicationWaitNS), float64(s.CommunicationTransferNS), float64(top.Rank)
				f.Severity = costSeverity(f.Numbers["communication_ratio"] * (1 - ws))
				if ws >= 0.5 {
					f.Recommendation = fmt.Sprintf("Most of it is waiting for %s: make that rank faster first; then: %s", who, f.Recommendation)
				}
			case "low-gpu-utilization":
				if r := ranks[k]; r.Idle.CommunicationNS > r.Idle.HostWaitNS && ws >= 0.5 {
					f.Message += note
					f.Recommendation = fmt.Sprintf("Compute waits in collectives, mostly for %s: make that rank faster first; then overlap communication (DDP buckets, FSDP prefetch).", who)
				}
			}
		}
		finding.Sort(ranks[k].Findings)
	}
}

// A straggler is the rank the others wait for, however the waiting is
// spread over the collectives: the rank whose lateness the other ranks wait
// for most, when that is more than half of all their exposed waiting (no
// compute running) and, per other rank, at least StragglerMinWaitRatio of
// its steps' time (below that the waiting is launch jitter, not worth
// acting on).
const StragglerMinWaitRatio = 0.02

// straggler returns the straggler's rank (-1: none) and the others' mean
// wait for it over their steps' time.
func straggler(rs []RankSummary) (int, float64) {
	if len(rs) < 2 {
		return -1, 0
	}
	var all int64
	best := 0
	for k, r := range rs {
		all += r.CausedWaitNS
		if r.CausedWaitNS > rs[best].CausedWaitNS {
			best = k
		}
	}
	if all == 0 || 2*rs[best].CausedWaitNS <= all {
		return -1, 0
	}
	var ratio float64
	for k, r := range rs {
		if k == best {
			continue
		}
		for _, w := range r.WaitsFor {
			if w.Rank == rs[best].Rank {
				ratio += share(w.ExposedNS, r.StepsNS)
			}
		}
	}
	ratio /= float64(len(rs) - 1)
	if ratio < StragglerMinWaitRatio {
		return -1, 0
	}
	return rs[best].Rank, ratio
}

// stepSkews lines the ranks' steps up by name.
func stepSkews(ranks []Rank) []StepSkew {
	byName := map[string][]int64{}
	var names []string
	for k, r := range ranks {
		for _, st := range r.Steps {
			d := byName[st.Name]
			if d == nil {
				d = make([]int64, len(ranks))
				for i := range d {
					d[i] = -1
				}
				names = append(names, st.Name)
			}
			d[k] = st.DurationNS
			byName[st.Name] = d
		}
	}
	out := []StepSkew{}
	for _, n := range names {
		d := byName[n]
		s := StepSkew{Name: n, DurationsNS: d, WaitNS: make([]int64, len(d)), TransferNS: make([]int64, len(d))}
		lo, hi := int64(-1), int64(-1)
		for k, v := range d {
			if v < 0 {
				s.WaitNS[k], s.TransferNS[k] = -1, -1
				continue
			}
			if lo < 0 || v < lo {
				lo = v
			}
			if v > hi {
				hi = v
				s.SlowestRank = ranks[k].Rank
			}
		}
		s.SkewNS = hi - lo
		out = append(out, s)
	}
	return out
}

// stepWait adds a matched collective of rank index k starting at start to
// the wait and transfer of its step (the rank's step whose span holds the
// start).
func stepWait(skews []StepSkew, ranks []Rank, k int, start, wait, transfer int64) {
	steps := ranks[k].Steps
	i := sort.Search(len(steps), func(i int) bool { return steps[i].StartTimeNS > start }) - 1
	if i < 0 || start >= steps[i].StartTimeNS+steps[i].DurationNS {
		return
	}
	for j := range skews {
		if skews[j].Name == steps[i].Name {
			skews[j].WaitNS[k] += wait
			skews[j].TransferNS[k] += transfer
			return
		}
	}
}

func crossFindings(c *CrossRank) []finding.Finding {
	out := []finding.Finding{}
	if c.Straggler >= 0 {
		var s RankSummary
		var waiting []string
		var waitNS int64
		for _, r := range c.Ranks {
			if r.Rank == c.Straggler {
				s = r
			}
			for _, w := range r.WaitsFor {
				if w.Rank == c.Straggler {
					waiting = append(waiting, fmt.Sprintf("rank %d %s", r.Rank, units.Duration(w.ExposedNS)))
					waitNS += w.ExposedNS
				}
			}
		}
		msg := fmt.Sprintf("Rank %d is the rank the others wait for: their GPUs wait %s in collectives for it with no compute to run (%s), %s of their steps' time on average; it joins last in %d of the %d matched collectives.",
			c.Straggler, units.Duration(waitNS), strings.Join(waiting, ", "), pct(c.StragglerWaitRatio), s.LateArrivals, len(c.Collectives))
		sev := costSeverity(c.StragglerWaitRatio)
		act := fmt.Sprintf("ake rank %d faster before tuning communication: compare its steps' breakdown (host work, DataLoader, CPU exec) with the others' and look at its host; balance its work.", c.Straggler)
		rec := "M" + act
		if waitNS == 0 {
			// Found by late arrivals alone: no collective kernel ran long
			// waiting for it. An NCCL kernel spins until its peers join, so
			// a rank that is really late shows as waiting on the others;
			// starts apart without any waiting point at the ranks' clocks
			// (traces of different hosts), which no one should act on
			// before checking.
			var skew int64
			for _, x := range c.Collectives {
				skew = max(skew, x.StartSkewNS)
			}
			msg = fmt.Sprintf("Rank %d starts last in %d of the %d matched collectives (up to %s after the first rank, on the traces' clocks), yet no rank's collective kernels wait for it: the ranks' clocks may be offset rather than rank %d slow.",
				c.Straggler, s.LateArrivals, len(c.Collectives), units.Duration(skew), c.Straggler)
			rec = "Check that the ranks' traces share a clock (one host, or hosts kept in sync); if they do, m" + act
			sev = finding.Info
		}
		out = append(out, finding.Finding{ID: "straggler", Severity: sev,
			Numbers: finding.Numbers{"rank": float64(c.Straggler), "wait_ratio": c.StragglerWaitRatio, "caused_wait_ns": float64(s.CausedWaitNS),
				"late_arrivals": float64(s.LateArrivals), "collectives": float64(len(c.Collectives))},
			Message:        msg,
			Recommendation: rec,
			At:             &finding.Ref{View: "comm", Rank: finding.Int(c.Straggler)}})
	}
	var lo, hi int64 = -1, -1
	slow := -1
	for _, r := range c.Ranks {
		if lo < 0 || r.AverageStepNS < lo {
			lo = r.AverageStepNS
		}
		if r.AverageStepNS > hi {
			hi, slow = r.AverageStepNS, r.Rank
		}
	}
	if lo > 0 && float64(hi-lo)/float64(lo) > 0.1 {
		// the cost: the time the fastest rank waits for the slowest
		cost := share(hi-lo, hi)
		out = append(out, finding.Finding{ID: "rank-skew", Severity: costSeverity(cost),
			Numbers: finding.Numbers{"fastest_step_ns": float64(lo), "slowest_step_ns": float64(hi), "skew_ratio": float64(hi-lo) / float64(lo)},
			Message: fmt.Sprintf("Average step time differs by %s between the fastest rank (%s) and the slowest, rank %d (%s).",
				pct(float64(hi-lo)/float64(lo)), units.Duration(lo), slow, units.Duration(hi)),
			Recommendation: "Look at the slowest rank's breakdown; uneven data or hosts make all ranks wait at each collective.",
			At:             &finding.Ref{View: "steps", Rank: finding.Int(slow)}})
	}
	finding.Sort(out)
	return out
}
