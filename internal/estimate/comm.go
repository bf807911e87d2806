package estimate

import "fmt"

// ncclBytes is NCCL's device memory outside the allocator: per communicator this rank joins,
// about 544 MB for 2 ranks and 688 MB for more (NCCL issue 964, A100 NVLink).
func ncclBytes(s Setup) int64 {
	var n int64
	for _, g := range commGroups(s) {
		if g == 2 {
			n += 544e6
		} else {
			n += 688e6
		}
	}
	return n
}

func commGroups(s Setup) []int {
	var gs []int
	for _, g := range []int{s.DP * s.CP, s.TP, s.PP, s.CP, s.EP} {
		if g > 1 {
			gs = append(gs, g)
		}
	}
	return gs
}

func ncclFormula(s Setup) string {
	gs := commGroups(s)
	if len(gs) == 0 {
		return "single process: no NCCL communicators"
	}
	return fmt.Sprintf("%d communicators (group sizes %v) · 544 MB (2 ranks) or 688 MB (more), NCCL issue 964", len(gs), gs)
}
