package diff

import (
	"fmt"
	"sort"

	"github.com/ptscope/ptscope/internal/finding"
	"github.com/ptscope/ptscope/internal/perf"
)

// TraceDiff compares one rank's trace in A with the same rank's in B.
// Operator, kernel, communication and idle times are per step (the trace's
// total divided by its steps), so that traces of different lengths compare.
type TraceDiff struct {
	Key string `json:"key"`
	A   Where  `json:"a"`
	B   Where  `json:"b"`

	Steps       Count    `json:"steps"`
	AverageStep Duration `json:"average_step"`
	MedianStep  Duration `json:"median_step"`
	// Breakdown and Phases are the average step's parts (perf's
	// average_breakdown and average_phases).
	Breakdown []PartRow `json:"breakdown"`
	Phases    []PartRow `json:"phases"`

	GPUUtilization    Ratio `json:"gpu_utilization"`
	SMEfficiency      Ratio `json:"sm_efficiency"`
	AchievedOccupancy Ratio `json:"achieved_occupancy"`
	TensorCore        Ratio `json:"tensor_core"`
	DataLoader        Ratio `json:"dataloader"`

	Idle          IdleDiff `json:"idle"`
	Communication CommDiff `json:"communication"`
	PeakAllocated Bytes    `json:"peak_allocated"` // from the trace's memory events

	// Operators and Kernels are complete: regressions (per-step time
	// growth), largest first, then improvements, largest first, then the
	// unchanged.
	Operators []OpRow     `json:"operators"`
	Kernels   []KernelRow `json:"kernels"`

	FindingsAppeared []finding.Finding `json:"findings_appeared"`
	FindingsResolved []finding.Finding `json:"findings_resolved"`
}

// PartRow is one part of a step's time.
type PartRow struct {
	Name string   `json:"name"`
	Time Duration `json:"time"`
}

// IdleDiff compares the GPU's idle time (per step).
type IdleDiff struct {
	IdleRatio     Ratio    `json:"idle"`
	Idle          Duration `json:"idle_time"`
	HostWait      Duration `json:"host_wait"`
	KernelWait    Duration `json:"kernel_wait"`
	Communication Duration `json:"communication"`
	Copy          Duration `json:"copy"`
}

// CommDiff compares communication (per step).
type CommDiff struct {
	Kernels     Count           `json:"kernels"`
	KernelTime  Duration        `json:"kernel_time"`
	Exposed     Duration        `json:"exposed"`
	Overlap     Ratio           `json:"overlap"`
	Collectives []CollectiveRow `json:"collectives"`
}

// CollectiveRow is one collective kind (per step).
type CollectiveRow struct {
	Name   string   `json:"name"`
	Status Status   `json:"status"`
	Calls  Count    `json:"calls"`
	Time   Duration `json:"time"`
	Bytes  Bytes    `json:"bytes"`
}

// OpRow is one operator (per step).
type OpRow struct {
	Name        string   `json:"name"`
	InputShapes string   `json:"input_shapes,omitempty"`
	Status      Status   `json:"status"`
	Calls       Count    `json:"calls"`
	HostSelf    Duration `json:"host_self"`
	HostTotal   Duration `json:"host_total"`
	DeviceSelf  Duration `json:"device_self"`
	DeviceTotal Duration `json:"device_total"`
}

// KernelRow is one kernel (per step; Mean per call).
type KernelRow struct {
	Name   string   `json:"name"`
	Status Status   `json:"status"`
	Calls  Count    `json:"calls"`
	Time   Duration `json:"time"`
	Mean   Duration `json:"mean"`
}

// pairRanks pairs ranks: one on each side pair up; otherwise by rank.
func pairRanks(a, b *perf.Report) ([][2]*perf.Rank, []Unmatched) {
	if len(a.Ranks) == 1 && len(b.Ranks) == 1 {
		return [][2]*perf.Rank{{&a.Ranks[0], &b.Ranks[0]}}, nil
	}
	var pairs [][2]*perf.Rank
	var un []Unmatched
	byRank := map[int]*perf.Rank{}
	for i := range b.Ranks {
		byRank[b.Ranks[i].Rank] = &b.Ranks[i]
	}
	used := map[int]bool{}
	for i := range a.Ranks {
		x := &a.Ranks[i]
		if y, ok := byRank[x.Rank]; ok && !used[x.Rank] {
			used[x.Rank] = true
			pairs = append(pairs, [2]*perf.Rank{x, y})
			continue
		}
		un = append(un, Unmatched{Side: "a", Kind: "trace", Key: fmt.Sprintf("rank %d", x.Rank), Path: x.Path})
	}
	for i := range b.Ranks {
		if y := &b.Ranks[i]; !used[y.Rank] {
			un = append(un, Unmatched{Side: "b", Kind: "trace", Key: fmt.Sprintf("rank %d", y.Rank), Path: y.Path})
		}
	}
	return pairs, un
}

func steps(r *perf.Rank) int64 { return int64(max(len(r.Steps), 1)) }

func compareRanks(a, b *perf.Rank) TraceDiff {
	na, nb := steps(a), steps(b)
	per := func(x, y int64) Duration { return durationOf(x/na, y/nb) }
	key := fmt.Sprintf("rank %d", b.Rank)
	if a.Rank != b.Rank {
		key = fmt.Sprintf("rank %d vs rank %d", a.Rank, b.Rank)
	}
	d := TraceDiff{Key: key, A: Where{Path: a.Path, Rank: a.Rank}, B: Where{Path: b.Path, Rank: b.Rank},
		Steps:             countOf(float64(len(a.Steps)), float64(len(b.Steps))),
		AverageStep:       durationOf(a.AverageStepNS, b.AverageStepNS),
		MedianStep:        durationOf(a.MedianStepNS, b.MedianStepNS),
		GPUUtilization:    ratioOf(a.GPUUtilizationRatio, b.GPUUtilizationRatio),
		SMEfficiency:      ratioOf(a.SMEfficiencyRatio, b.SMEfficiencyRatio),
		AchievedOccupancy: ratioOf(a.AchievedOccupancyRatio, b.AchievedOccupancyRatio),
		TensorCore:        ratioOf(a.TensorCoreRatio, b.TensorCoreRatio),
		DataLoader:        ratioOf(a.DataLoaderRatio, b.DataLoaderRatio),
		Idle: IdleDiff{IdleRatio: ratioOf(a.Idle.IdleRatio, b.Idle.IdleRatio), Idle: per(a.Idle.IdleNS, b.Idle.IdleNS),
			HostWait: per(a.Idle.HostWaitNS, b.Idle.HostWaitNS), KernelWait: per(a.Idle.KernelWaitNS, b.Idle.KernelWaitNS),
			Communication: per(a.Idle.CommunicationNS, b.Idle.CommunicationNS), Copy: per(a.Idle.CopyNS, b.Idle.CopyNS)},
		Communication: CommDiff{Kernels: countOf(float64(a.Comm.Kernels)/float64(na), float64(b.Comm.Kernels)/float64(nb)),
			KernelTime: per(a.Comm.KernelNS, b.Comm.KernelNS), Exposed: per(a.Comm.ExposedNS, b.Comm.ExposedNS),
			Overlap: ratioOf(a.Comm.OverlapRatio, b.Comm.OverlapRatio)},
		PeakAllocated: bytesOf(a.Memory.PeakAllocatedBytes, b.Memory.PeakAllocatedBytes),
	}
	pa, pb := a.AverageBreakdown.Parts(), b.AverageBreakdown.Parts()
	for i := range pa {
		d.Breakdown = append(d.Breakdown, PartRow{Name: pa[i].Name, Time: durationOf(pa[i].NS, pb[i].NS)})
	}
	ph := func(p perf.Phases) []int64 {
		return []int64{p.ForwardNS, p.BackwardNS, p.OptimizerNS, p.DataLoadingNS, p.OtherNS}
	}
	xa, xb := ph(a.AveragePhases), ph(b.AveragePhases)
	for i, name := range []string{"forward", "backward", "optimizer", "data loading", "other"} {
		d.Phases = append(d.Phases, PartRow{Name: name, Time: durationOf(xa[i], xb[i])})
	}
	d.Communication.Collectives = collectives(a.Comm.Collectives, b.Comm.Collectives, na, nb)
	d.Operators = operators(a.Operators, b.Operators, na, nb)
	d.Kernels = kernels(a.Kernels, b.Kernels, na, nb)
	d.FindingsAppeared, d.FindingsResolved = changedFindings(a.Findings, b.Findings)
	return d
}

// matchByName pairs items of two lists by key, in order of first sight.
func matchByName[T any](a, b []T, key func(*T) string) (order []string, ia, ib map[string]*T) {
	ia, ib = map[string]*T{}, map[string]*T{}
	for i := range a {
		k := key(&a[i])
		if _, ok := ia[k]; !ok {
			ia[k] = &a[i]
			order = append(order, k)
		}
	}
	for i := range b {
		k := key(&b[i])
		if _, ok := ib[k]; !ok {
			ib[k] = &b[i]
			if ia[k] == nil {
				order = append(order, k)
			}
		}
	}
	return order, ia, ib
}

func operators(a, b []perf.Operator, na, nb int64) []OpRow {
	key := func(o *perf.Operator) string { return o.Name + "\x00" + o.InputShapes }
	order, ia, ib := matchByName(a, b, key)
	out := make([]OpRow, 0, len(order))
	for _, k := range order {
		x, y := ia[k], ib[k]
		var zx, zy perf.Operator
		if x == nil {
			x = &zx
		}
		if y == nil {
			y = &zy
		}
		o := ia[k]
		if o == nil {
			o = ib[k]
		}
		row := OpRow{Name: o.Name, InputShapes: o.InputShapes,
			Calls:      countOf(float64(x.Calls)/float64(na), float64(y.Calls)/float64(nb)),
			HostSelf:   durationOf(x.HostSelfNS/na, y.HostSelfNS/nb),
			HostTotal:  durationOf(x.HostTotalNS/na, y.HostTotalNS/nb),
			DeviceSelf: durationOf(x.DeviceSelfNS/na, y.DeviceSelfNS/nb), DeviceTotal: durationOf(x.DeviceTotalNS/na, y.DeviceTotalNS/nb)}
		row.Status = statusOf(ia[k] != nil, ib[k] != nil, float64(opTime(&row).A), float64(opTime(&row).B))
		out = append(out, row)
	}
	sort.SliceStable(out, func(i, j int) bool {
		return regressionFirst(opTime(&out[i]).Delta, opTime(&out[j]).Delta, out[i].Name, out[j].Name)
	})
	return out
}

// regressionFirst orders time changes: regressions, largest first, then
// improvements, largest first, then unchanged rows; ties by name.
func regressionFirst(di, dj int64, ni, nj string) bool {
	rank := func(d int64) int {
		switch {
		case d > 0:
			return 0
		case d < 0:
			return 1
		}
		return 2
	}
	if ri, rj := rank(di), rank(dj); ri != rj {
		return ri < rj
	}
	if di != dj {
		return abs(di) > abs(dj)
	}
	return ni < nj
}

// opTime is the time an operator's regression is measured by: its GPU
// time where it launched kernels on either side, else its host time.
func opTime(r *OpRow) Duration {
	if r.DeviceTotal.A > 0 || r.DeviceTotal.B > 0 {
		return r.DeviceTotal
	}
	return r.HostTotal
}

func kernels(a, b []perf.Kernel, na, nb int64) []KernelRow {
	order, ia, ib := matchByName(a, b, func(k *perf.Kernel) string { return k.Name })
	out := make([]KernelRow, 0, len(order))
	for _, k := range order {
		x, y := ia[k], ib[k]
		var zx, zy perf.Kernel
		if x == nil {
			x = &zx
		}
		if y == nil {
			y = &zy
		}
		row := KernelRow{Name: k, Calls: countOf(float64(x.Calls)/float64(na), float64(y.Calls)/float64(nb)),
			Time: durationOf(x.TotalNS/na, y.TotalNS/nb), Mean: durationOf(x.MeanNS, y.MeanNS)}
		row.Status = statusOf(ia[k] != nil, ib[k] != nil, float64(row.Time.A), float64(row.Time.B))
		out = append(out, row)
	}
	sort.SliceStable(out, func(i, j int) bool {
		return regressionFirst(out[i].Time.Delta, out[j].Time.Delta, out[i].Name, out[j].Name)
	})
	return out
}

func collectives(a, b []perf.Collective, na, nb int64) []CollectiveRow {
	order, ia, ib := matchByName(a, b, func(c *perf.Collective) string { return c.Name })
	out := make([]CollectiveRow, 0, len(order))
	for _, k := range order {
		x, y := ia[k], ib[k]
		var zx, zy perf.Collective
		if x == nil {
			x = &zx
		}
		if y == nil {
			y = &zy
		}
		row := CollectiveRow{Name: k, Calls: countOf(float64(x.Calls)/float64(na), float64(y.Calls)/float64(nb)),
			Time: durationOf(x.TotalNS/na, y.TotalNS/nb), Bytes: bytesOf(x.Bytes/na, y.Bytes/nb)}
		row.Status = statusOf(ia[k] != nil, ib[k] != nil, float64(row.Time.A), float64(row.Time.B))
		out = append(out, row)
	}
	sort.SliceStable(out, func(i, j int) bool {
		return regressionFirst(out[i].Time.Delta, out[j].Time.Delta, out[i].Name, out[j].Name)
	})
	return out
}
