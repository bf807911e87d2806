// Package fleet summarises many ranks at once with memory that does not grow
// with their number: it recognises the ranks of a job's artifacts
// (bundles' rankN folders, traces' distributedInfo, "rankN" in file and
// folder names), reads and analyses them in parallel, keeps only one small
// summary per rank, and computes the distributions (min, median, p99, max),
// outlier ranks, imbalance, stragglers and collective skew across them.
// The analyses themselves are memory's and perf's; fleet only aggregates
// their results.
package fleet

import (
	"github.com/ptscope/ptscope/internal/envelope"
	"github.com/ptscope/ptscope/internal/finding"
	"github.com/ptscope/ptscope/internal/memory"
)

// Report is the fleet summary: the document `ptscope analyze`, `trace`
// and `check` print (--json) for inputs of many ranks (docs/fleet.md). It
// is complete: every rank's summary row, every matched collective; the
// renderer trims.
type Report struct {
	envelope.Header
	Fleet bool `json:"fleet"` // always true: tells a fleet document from a per-input one
	// Ranks is the number of distinct ranks; Inputs the files (and bundle
	// rank folders) read for them.
	Ranks  int `json:"ranks"`
	Inputs int `json:"inputs"`
	// Memory summarises the ranks' allocator snapshots; nil without any.
	Memory *MemoryFleet `json:"memory,omitempty"`
	// Time summarises the ranks' profiler traces; nil without any.
	Time *TimeFleet `json:"time,omitempty"`
	// Findings are about the fleet as a whole (imbalance, outliers, ranks
	// that ran out of memory, stragglers), most severe first.
	Findings []finding.Finding `json:"findings"`
	// RankFindings group the findings of the ranks' own analyses by id.
	RankFindings []RankFinding `json:"rank_findings"`
	// Errors are the inputs that could not be read, in rank order.
	Errors []InputError `json:"errors"`
	// Skipped are inputs found but not made into ranks.
	Skipped []Skipped `json:"skipped"`
}

// InputError is an input that could not be read (or only in part).
type InputError struct {
	Rank  int    `json:"rank"`
	Path  string `json:"path"`
	Error string `json:"error"`
}

// RankFinding is one finding id of the ranks' own analyses, over the fleet.
type RankFinding struct {
	ID       string           `json:"id"`
	Source   string           `json:"source"`   // memory (snapshots) or trace
	Severity finding.Severity `json:"severity"` // the highest on any rank
	Ranks    int              `json:"ranks"`    // ranks that have it
	// Example is the finding as the first rank with the highest severity
	// has it (its At.Rank names the rank).
	Example finding.Finding `json:"example"`
}

// MemoryFleet summarises the allocator snapshots of the ranks.
type MemoryFleet struct {
	// Ranks are one row per rank with a snapshot, by rank.
	Ranks []RankMemory `json:"ranks"`
	// The distributions over the ranks that could be read (with at least
	// one analysed device).
	PeakAllocated    BytesStats `json:"peak_allocated"`
	PeakReserved     BytesStats `json:"peak_reserved"`
	EfficiencyAtPeak RatioStats `json:"efficiency_at_peak"`
	// ImbalanceRatio is the largest rank's peak allocated memory over the
	// mean of the ranks, minus one: how much more the job must provision
	// than an even split would need.
	ImbalanceRatio float64 `json:"imbalance_ratio"`
	// OOMRanks, LeakRanks and TruncatedRanks list the ranks whose snapshots
	// hold out-of-memory events, whose memory grows step after step, and
	// whose trace lost its start to the ring buffer (max_entries).
	OOMRanks       []int `json:"oom_ranks"`
	LeakRanks      []int `json:"leak_ranks"`
	TruncatedRanks []int `json:"truncated_ranks"`
}

// RankMemory is one rank's memory, over its snapshots and devices: the
// highest peak and the device and snapshot it comes from.
type RankMemory struct {
	Rank   int    `json:"rank"`
	Path   string `json:"path"`   // the snapshot with the highest peak (the first one without any)
	Inputs int    `json:"inputs"` // snapshots read
	Device int    `json:"device"` // device of the highest peak; -1 when none was analysed
	// Devices counts the analysed devices, over the snapshots.
	Devices               int             `json:"devices"`
	PeakAllocatedBytes    int64           `json:"peak_allocated_bytes"`
	PeakReservedBytes     int64           `json:"peak_reserved_bytes"`
	EndAllocatedBytes     int64           `json:"end_allocated_bytes"`
	EfficiencyAtPeakRatio float64         `json:"efficiency_at_peak_ratio"`
	DeviceTotalBytes      int64           `json:"device_total_bytes,omitempty"` // the device's capacity when known (bundles, --device-memory)
	TopCategory           memory.Category `json:"top_category"`                 // the largest category at the peak
	Pattern               memory.Pattern  `json:"pattern"`
	LeakPerStepBytes      int64           `json:"leak_per_step_bytes,omitempty"` // leak pattern only
	Steps                 int             `json:"steps"`
	OOMs                  int             `json:"ooms"`
	Truncated             bool            `json:"truncated"`
	// Findings are the ids of the rank's own findings (RankFindings
	// gathers them).
	Findings []string `json:"findings"`
	Error    string   `json:"error,omitempty"` // a snapshot could not be read
	// PhasesOnly is set for a bundle rank recorded without allocator
	// snapshots (ptscope run --memory=false, --no-gpu): Device is -1, the
	// peaks are from its phases' counters (memory.PhasePeaks), and it has
	// no efficiency, pattern or OOM count.
	PhasesOnly bool `json:"phases_only,omitempty"`
}

// Measured reports whether the rank's peaks are known: from a snapshot
// device, or from the phases of a rank without snapshots.
func (r *RankMemory) Measured() bool { return r.Device >= 0 || r.PhasesOnly }

// TimeFleet summarises the profiler traces of the ranks.
type TimeFleet struct {
	// Ranks are one row per rank with a trace, by rank.
	Ranks []RankTime `json:"ranks"`
	// StepTime is the distribution of the ranks' average step.
	StepTime       DurationStats `json:"step_time"`
	GPUUtilization RatioStats    `json:"gpu_utilization"`
	DataLoader     RatioStats    `json:"dataloader"`
	// ExposedCommunication is the distribution of the communication time
	// per step not hidden by compute.
	ExposedCommunication DurationStats `json:"exposed_communication_per_step"`
	// Stragglers holds the rank the others wait for, if one stands out
	// (perf's rule, as the cross-rank comparison of trace: the rank whose
	// lateness causes more than half of the others' exposed waiting in
	// collectives, at least perf.StragglerMinWaitRatio of their steps; else
	// the rank that joins more than half of the matched collectives late).
	// At most one.
	Stragglers []Straggler `json:"stragglers"`
	// Steps are the steps found on two or more ranks, by name, in the
	// order first seen: how long each took across the ranks.
	Steps []StepSpread `json:"steps"`
	// Collectives summarises the collectives matched across ranks.
	Collectives CollectiveSummary `json:"collectives"`
}

// RankTime is one rank's time, over its traces.
type RankTime struct {
	Rank      int    `json:"rank"`
	Path      string `json:"path"`   // the first trace
	Traces    int    `json:"traces"` // traces read
	WorldSize int    `json:"world_size,omitempty"`
	Steps     int    `json:"steps"`
	// AverageStepNS is the mean step over every step of the rank's traces.
	AverageStepNS       int64   `json:"average_step_ns"`
	MedianStepNS        int64   `json:"median_step_ns"` // the first trace's median step
	GPUUtilizationRatio float64 `json:"gpu_utilization_ratio"`
	DataLoaderRatio     float64 `json:"dataloader_ratio"`
	// CommunicationNS is the communication kernels' time, summed;
	// ExposedCommunicationNS the part not hidden by compute (both over
	// every trace of the rank).
	CommunicationNS        int64 `json:"communication_total_ns"`
	ExposedCommunicationNS int64 `json:"exposed_communication_ns"`
	// Collectives counts the rank's communication kernels; LateArrivals
	// those of them the rank was the last to start among the ranks that
	// ran them.
	Collectives  int `json:"collectives"`
	LateArrivals int `json:"late_arrivals"`
	// Of its matched collectives' time (perf.RankSummary's split): the
	// transfer, the waiting for the rank that joined last, the part of
	// that waiting with no compute running, the rank it waits for most
	// (-1: none), and the other ranks' exposed waiting for this one.
	CommunicationTransferNS int64    `json:"communication_transfer_ns"`
	CommunicationWaitNS     int64    `json:"communication_wait_ns"`
	ExposedWaitNS           int64    `json:"exposed_wait_ns"`
	WaitsForRank            int      `json:"waits_for_rank"`
	CausedWaitNS            int64    `json:"caused_wait_ns"`
	Findings                []string `json:"findings"`
	Warnings                []string `json:"warnings"`
	Error                   string   `json:"error,omitempty"`
}

// Straggler is a rank the others wait for.
type Straggler struct {
	Rank          int     `json:"rank"`
	AverageStepNS int64   `json:"average_step_ns"`
	StepRatio     float64 `json:"step_deviation_ratio"` // average step / the median rank's - 1
	LateArrivals  int     `json:"late_arrivals"`
	// LateRatio is the share of the collectives the rank ran that it
	// joined last.
	LateRatio float64 `json:"late_ratio"`
	// WaitRatio is the other ranks' mean exposed wait for it over their
	// steps' time (0 when found by late arrivals alone); CausedWaitNS
	// their exposed waiting for it, summed.
	WaitRatio    float64 `json:"wait_ratio"`
	CausedWaitNS int64   `json:"caused_wait_ns"`
}

// StepSpread is one step (by name) across the ranks.
type StepSpread struct {
	Name        string `json:"name"`
	Ranks       int    `json:"ranks"`
	MinNS       int64  `json:"min_ns"`
	MaxNS       int64  `json:"max_ns"`
	SkewNS      int64  `json:"skew_ns"` // max - min
	SlowestRank int    `json:"slowest_rank"`
}

// CollectiveSummary describes the collectives matched across ranks (as
// perf's cross-rank comparison matches them: by process group and sequence
// number, else by order per name).
type CollectiveSummary struct {
	// Matched counts the collectives seen on two or more ranks.
	Matched int `json:"matched"`
	// StartSkew is the distribution, over the matched collectives, of the
	// latest start minus the earliest: how long the first rank waited.
	// Its min_rank/max_rank and outliers are not used.
	StartSkew DurationStats `json:"start_skew"`
	// MostSkewed are the matched collectives with the largest start skew,
	// at most MaxSkewedCollectives, most skewed first.
	MostSkewed []Collective `json:"most_skewed"`
}

// MaxSkewedCollectives bounds CollectiveSummary.MostSkewed.
const MaxSkewedCollectives = 100

// Collective is one collective matched across ranks.
type Collective struct {
	Name        string `json:"name"`
	Group       string `json:"group,omitempty"`
	Index       int64  `json:"index"`
	Ranks       int    `json:"ranks"`    // ranks that ran it
	StartNS     int64  `json:"start_ns"` // the earliest start
	StartSkewNS int64  `json:"start_skew_ns"`
	LastRank    int    `json:"last_rank"` // the rank that started last; -1 on a tie
	MaxDurNS    int64  `json:"max_duration_ns"`
	MinDurNS    int64  `json:"min_duration_ns"`
	SlowestRank int    `json:"slowest_rank"`
}
