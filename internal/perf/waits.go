package perf

import "sort"

// WaitSplit splits the ranks' time in matched collectives into transfer and
// waiting, finds whom each rank waits for and names the straggler: the rule
// of the cross-rank comparison (crossRank), shared with internal/fleet,
// which feeds it one collective at a time.
//
// In a collective seen on two or more ranks, the rank that joined last
// spent the least time in it: that shortest time is every rank's transfer,
// and each rank's extra time is waiting for that rank (by durations, which
// no clock offset between hosts moves). The part of the waiting in which
// the rank runs no compute kernel is exposed: what the waiting costs it.
type WaitSplit struct {
	// Ranks are the ranks' summaries, by rank index; Collective fills
	// their CommunicationTransferNS, CommunicationWaitNS and ExposedWaitNS,
	// Finish their WaitsFor and CausedWaitNS. Rank and StepsNS are the
	// caller's.
	Ranks []RankSummary
	waits []map[int]*RankWait // by rank index: the rank index waited for -> its wait
}

// NewWaitSplit starts a split over ranks (by rank index).
func NewWaitSplit(ranks []RankSummary) *WaitSplit {
	w := &WaitSplit{Ranks: ranks, waits: make([]map[int]*RankWait, len(ranks))}
	for k := range w.waits {
		w.waits[k] = map[int]*RankWait{}
	}
	return w
}

// Collective adds one collective: its event on each rank (by rank index;
// nil where the rank has none). With fewer than two events it does
// nothing; else each, if given, sees every rank's start, wait and
// transfer.
func (w *WaitSplit) Collective(events []*CollectiveEvent, each func(k int, start, wait, transfer int64)) {
	minDur, shortest, seen := int64(-1), -1, 0
	for k, e := range events {
		if e == nil {
			continue
		}
		seen++
		if d := e.EndNS - e.StartNS; minDur < 0 || d < minDur {
			minDur, shortest = d, k
		}
	}
	if seen < 2 {
		return
	}
	for k, e := range events {
		if e == nil {
			continue
		}
		// the rank waits at the collective's start, until the last rank
		// joins
		wait := e.EndNS - e.StartNS - minDur
		exposed := e.exposed(wait)
		r := &w.Ranks[k]
		r.CommunicationTransferNS += minDur
		r.CommunicationWaitNS += wait
		r.ExposedWaitNS += exposed
		x := w.waits[k][shortest]
		if x == nil {
			x = &RankWait{}
			w.waits[k][shortest] = x
		}
		x.WaitNS += wait
		x.ExposedNS += exposed
		if each != nil {
			each(k, e.StartNS, wait, minDur)
		}
	}
}

// exposed is the part of the first wait ns of the collective in which no
// compute kernel runs.
func (e *CollectiveEvent) exposed(wait int64) int64 {
	var n int64
	for _, s := range e.idle {
		n += max(0, min(s.E, wait)-s.S)
	}
	return n
}

// Detach returns the event with its own copy of what it holds of its
// rank's analysis, for a caller that keeps events after the rank's result
// is gone.
func (e CollectiveEvent) Detach() CollectiveEvent {
	e.idle = append([]span(nil), e.idle...)
	return e
}

// Finish fills each rank's WaitsFor (most exposed first) and CausedWaitNS,
// and returns the straggler's rank (-1: none) and the others' mean exposed
// wait for it over their steps' time (straggler). Where the collectives
// show no waiting (a trace whose collectives end apart), the straggler is
// the rank that joined late (LateArrival; the caller's LateArrivals) in
// more than half of the matched collectives, at a wait ratio of 0: what
// that costs the others is not known.
func (w *WaitSplit) Finish(matched int) (int, float64) {
	for k := range w.Ranks {
		r := &w.Ranks[k]
		if r.WaitsFor == nil {
			r.WaitsFor = []RankWait{}
		}
		for j, x := range w.waits[k] {
			if x.WaitNS > 0 && j != k {
				x.Rank = w.Ranks[j].Rank
				r.WaitsFor = append(r.WaitsFor, *x)
				w.Ranks[j].CausedWaitNS += x.ExposedNS
			}
		}
		sort.SliceStable(r.WaitsFor, func(a, b int) bool {
			x, y := r.WaitsFor[a], r.WaitsFor[b]
			if x.ExposedNS != y.ExposedNS {
				return x.ExposedNS > y.ExposedNS
			}
			if x.WaitNS != y.WaitNS {
				return x.WaitNS > y.WaitNS
			}
			return x.Rank < y.Rank
		})
	}
	if s, ratio := straggler(w.Ranks); s >= 0 {
		return s, ratio
	}
	for _, r := range w.Ranks {
		if matched > 0 && 2*r.LateArrivals > matched {
			return r.Rank, 0
		}
	}
	return -1, 0
}
