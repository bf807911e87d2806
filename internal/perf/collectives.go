package perf

// CollectiveEvent is one communication kernel of a rank, keyed as the
// cross-rank comparison matches collectives between ranks: by process group
// and sequence number when the trace records them, else by the kernel's
// order among the rank's collectives of the same name and group.
type CollectiveEvent struct {
	Name  string
	Group string // process group name ("" when the trace names none)
	// Index is the sequence number, or the order per (Name, Group).
	Index   int64
	StartNS int64 // absolute ns (baseTimeNanoseconds + ts)
	EndNS   int64
	idle    []span // where no compute runs, relative to StartNS
}

// CollectiveEvents calls yield with the rank's communication kernels in
// time order, keyed for matching across ranks (Compare and many-rank
// summaries use the same keys). It stops when yield returns false.
func (r *Rank) CollectiveEvents(yield func(CollectiveEvent) bool) {
	count := map[[2]string]int64{}
	for i := range r.comm {
		e := &r.comm[i]
		n := e.seq
		if n < 0 {
			id := [2]string{e.name, e.pg}
			n = count[id]
			count[id]++
		}
		if !yield(CollectiveEvent{Name: e.name, Group: e.pg, Index: n, StartNS: e.start, EndNS: e.end, idle: e.idle}) {
			return
		}
	}
}
