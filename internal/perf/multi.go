package perf

import (
	"fmt"
	"sort"

	"github.com/ptscope/ptscope/internal/finding"
	"github.com/ptscope/ptscope/internal/units"
)

// CrossRank compares the ranks of a distributed run.
type CrossRank struct {
	Ranks       []RankSummary    `json:"ranks"`
	Steps       []StepSkew       `json:"steps"`
	Collectives []CollectiveSkew `json:"collectives"`    // every collective seen on two or more ranks, most skewed first
	Straggler   int              `json:"straggler_rank"` // -1 if none stands out
	MaxSkewNS   int64            `json:"max_step_skew_ns"`
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
}

// StepSkew is one step across ranks.
type StepSkew struct {
	Name        string  `json:"name"`
	DurationsNS []int64 `json:"durations_ns"` // by rank order of Ranks
	SkewNS      int64   `json:"skew_ns"`
	SlowestRank int     `json:"slowest_rank"`
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
		c.Ranks = append(c.Ranks, RankSummary{Rank: r.Rank, Steps: len(r.Steps), AverageStepNS: r.AverageStepNS,
			GPUUtilizationRatio: r.GPUUtilizationRatio, CommunicationNS: r.Comm.KernelNS})
	}
	// steps by name
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
	for _, n := range names {
		d := byName[n]
		s := StepSkew{Name: n, DurationsNS: d}
		lo, hi := int64(-1), int64(-1)
		for k, v := range d {
			if v < 0 {
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
		c.MaxSkewNS = max(c.MaxSkewNS, s.SkewNS)
		c.Steps = append(c.Steps, s)
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
		x.StartTimeNS, x.StartSkewNS = first, last-first
		if x.StartSkewNS == 0 {
			x.LastRank = -1 // a tie has no last rank
		} else if LateArrival(x.StartSkewNS, stepNS) {
			late[x.LastRank]++
		}
		c.Collectives = append(c.Collectives, x)
	}
	total := len(c.Collectives)
	sort.SliceStable(c.Collectives, func(i, j int) bool { return c.Collectives[i].StartSkewNS > c.Collectives[j].StartSkewNS })
	// a straggler is the rank that arrives late (LateArrival) in more
	// than half of the collectives
	for i := range c.Ranks {
		n := late[c.Ranks[i].Rank]
		c.Ranks[i].LateArrivals = n
		if total > 0 && 2*n > total && len(ranks) > 1 {
			c.Straggler = c.Ranks[i].Rank
		}
	}
	return c
}

func crossFindings(c *CrossRank) []finding.Finding {
	out := []finding.Finding{}
	if c.Straggler >= 0 {
		var n int
		for _, r := range c.Ranks {
			if r.Rank == c.Straggler {
				n = r.LateArrivals
			}
		}
		out = append(out, finding.Finding{ID: "straggler", Severity: finding.Warning,
			Numbers:        finding.Numbers{"rank": float64(c.Straggler), "late_arrivals": float64(n), "collectives": float64(len(c.Collectives))},
			Message:        fmt.Sprintf("Rank %d is the last to join %d of the %d matched collectives; the other ranks wait for it.", c.Straggler, n, len(c.Collectives)),
			Recommendation: "Compare that rank's step breakdown (data loading, CPU work) and its host; balance its input.",
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
