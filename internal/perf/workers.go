package perf

// WorkerOverlap is one rank's bar of the TensorBoard plugin's distributed
// view ("Computation/Communication Overview"): its average step split into
// computation only, computation overlapped with communication,
// communication only and other time (each step's StepOverlap, averaged as
// the plugin's "all" bar does), with the straggler marked.
type WorkerOverlap struct {
	Rank                int   `json:"rank"`
	ComputeOnlyNS       int64 `json:"compute_only_ns"`
	OverlapNS           int64 `json:"overlap_ns"`
	CommunicationOnlyNS int64 `json:"communication_only_ns"`
	OtherNS             int64 `json:"other_ns"`
	// Straggler: the rank the others wait for (CrossRank.Straggler);
	// LateArrivals the collectives it joined last, late enough to count.
	Straggler    bool `json:"straggler"`
	LateArrivals int  `json:"late_arrivals"`
}

// workerBars fills c.Workers from the ranks' steps.
func workerBars(ranks []Rank, c *CrossRank) {
	c.Workers = make([]WorkerOverlap, 0, len(ranks))
	late := map[int]int{}
	for _, s := range c.Ranks {
		late[s.Rank] = s.LateArrivals
	}
	for _, r := range ranks {
		w := WorkerOverlap{Rank: r.Rank, Straggler: c.Straggler == r.Rank, LateArrivals: late[r.Rank]}
		if n := int64(len(r.Steps)); n > 0 {
			for _, s := range r.Steps {
				o := s.Overlap
				w.ComputeOnlyNS += o.ComputeOnlyNS
				w.OverlapNS += o.OverlapNS
				w.CommunicationOnlyNS += o.CommunicationOnlyNS
				w.OtherNS += o.OtherNS
			}
			w.ComputeOnlyNS /= n
			w.OverlapNS /= n
			w.CommunicationOnlyNS /= n
			w.OtherNS /= n
		}
		c.Workers = append(c.Workers, w)
	}
}
