package perf

import (
	"fmt"

	"github.com/ptscope/ptscope/internal/envelope"
	"github.com/ptscope/ptscope/internal/finding"
)

// Report is the complete analysis of one or more traces (one per rank): the
// document `ptscope trace --json` prints, and what every trace renderer,
// the web UI and diff read. It holds every step, operator and kernel;
// renderers trim.
//
// Times: every duration is integer nanoseconds (`_ns`); every instant
// (start_ns, time_ns, *_time_ns) is baseTimeNanoseconds + ts, which is Unix ns for every
// Kineto trace (before 2024 `ts` itself is absolute); Rank.TimeOrigin says
// when a trace's clock is not the Unix epoch.
type Report struct {
	envelope.Header
	Ranks     []Rank            `json:"ranks"`
	CrossRank *CrossRank        `json:"cross_rank,omitempty"` // two or more ranks of one job
	Findings  []finding.Finding `json:"findings"`             // across ranks (rank findings are in each rank)
	// Jobs: with traces of several runs (two profiles of one process,
	// unrelated runs), each run's traces and their comparison; CrossRank
	// and Findings are then empty, and Warnings says why.
	Jobs     []Job    `json:"jobs,omitempty"`
	Warnings []string `json:"warnings,omitempty"`
}

// TimeOrigin says what the zero of a rank's instants is.
type TimeOrigin uint8

// Time origins.
const (
	// OriginUnix: instants are Unix ns (baseTimeNanoseconds + ts, or an
	// absolute ts in traces written before baseTimeNanoseconds existed).
	OriginUnix TimeOrigin = iota
	// OriginTrace: the trace's own clock (the legacy profiler's bare-array
	// traces count from the profiler's start).
	OriginTrace
)

var originNames = []string{"unix", "trace"}

func (o TimeOrigin) String() string { return enumString(originNames, int(o)) }

// MarshalText writes "unix" or "trace".
func (o TimeOrigin) MarshalText() ([]byte, error) { return enumMarshal(originNames, int(o)) }

// UnmarshalText reads "unix" or "trace".
func (o *TimeOrigin) UnmarshalText(b []byte) error { return enumUnmarshal(originNames, b, (*uint8)(o)) }

// StepSource says how a rank's steps were found (docs/trace.md, "Steps").
type StepSource uint8

// Step sources, in the order they are tried.
const (
	// StepsProfiler: ProfilerStep#N annotations (torch.profiler's
	// prof.step(), with or without a schedule).
	StepsProfiler StepSource = iota
	// StepsOptimizer: one step per outermost Optimizer.step annotation
	// (a trace recorded without prof.step()).
	StepsOptimizer
	// StepsBundle: the steps ptscope run recorded in the bundle's
	// phases.jsonl (forward start to optimizer end).
	StepsBundle
	// StepsWholeTrace: no step marker at all; one pseudo-step "trace"
	// over every host event.
	StepsWholeTrace
)

var stepSourceNames = []string{"profiler_step", "optimizer_step", "bundle_phases", "whole_trace"}

func (s StepSource) String() string { return enumString(stepSourceNames, int(s)) }

// MarshalText writes the source's name.
func (s StepSource) MarshalText() ([]byte, error) { return enumMarshal(stepSourceNames, int(s)) }

// UnmarshalText reads the source's name.
func (s *StepSource) UnmarshalText(b []byte) error {
	return enumUnmarshal(stepSourceNames, b, (*uint8)(s))
}

func enumString(names []string, v int) string {
	if v >= 0 && v < len(names) {
		return names[v]
	}
	return fmt.Sprintf("invalid(%d)", v)
}

func enumMarshal(names []string, v int) ([]byte, error) {
	if v < 0 || v >= len(names) {
		return nil, fmt.Errorf("perf: invalid enum value %d", v)
	}
	return []byte(names[v]), nil
}

func enumUnmarshal(names []string, b []byte, v *uint8) error {
	for i, n := range names {
		if n == string(b) {
			*v = uint8(i)
			return nil
		}
	}
	return fmt.Errorf("perf: unknown value %q (one of %v)", b, names)
}

// Profiler holds the profiler options the trace was recorded with, as its
// metadata says. They cost step time (docs/trace.md, "Profiling overhead").
type Profiler struct {
	WithStack     bool `json:"with_stack"`
	RecordShapes  bool `json:"record_shapes"`
	ProfileMemory bool `json:"profile_memory"`
	// Schedule: ProfilerStep#N annotations are present (prof.step() was
	// called); without them the profiler ran over the whole span, warm-up
	// included.
	Schedule bool `json:"schedule"`
	// PythonFunctionEvents counts python_function events (with_stack's
	// Python tracer), the biggest part of a with_stack trace.
	PythonFunctionEvents int `json:"python_function_events"`
}

// Overhead compares the trace's steps with the same run's unprofiled steps,
// from a ptscope run bundle's phases.jsonl.
type Overhead struct {
	ProfiledStepNS   int64   `json:"profiled_step_ns"`   // the trace's average step
	UnprofiledStepNS int64   `json:"unprofiled_step_ns"` // median of the bundle's unprofiled steps
	UnprofiledSteps  []int   `json:"unprofiled_steps"`   // their step numbers
	SlowdownRatio    float64 `json:"slowdown_ratio"`     // profiled / unprofiled - 1
}

// Step is one training step.
type Step struct {
	Name   string `json:"name"`   // "ProfilerStep#4", "step 2" (optimizer or bundle steps), "trace"
	Number int    `json:"number"` // N of ProfilerStep#N or the bundle's step; 0.. for optimizer steps, as analyze numbers them
	// StartTimeNS and DurationNS are the device-aware bounds: from the
	// later of the host start and the end of earlier GPU work, to the later
	// of the host end and the end of the GPU work the step launched.
	StartTimeNS     int64 `json:"start_ns"`
	DurationNS      int64 `json:"duration_ns"`
	HostStartTimeNS int64 `json:"host_start_ns"`
	HostDurationNS  int64 `json:"host_duration_ns"` // the step's host span (ProfilerStep#N itself)
	GPUEvents       int   `json:"gpu_events"`       // GPU events launched inside the host span
	// HostDataLoaderNS is the DataLoader time inside the host span.
	HostDataLoaderNS int64     `json:"host_dataloader_ns"`
	Breakdown        Breakdown `json:"breakdown"`
	Phases           Phases    `json:"phases"`
	// Overlap splits the step into compute, communication, their overlap
	// and other time (the plugin's distributed view).
	Overlap StepOverlap `json:"communication_overlap"`
	// UtilizationRatio is the union of compute kernels (not communication)
	// on the rank's primary device over the step.
	UtilizationRatio float64 `json:"gpu_utilization_ratio"`
	// StartAllocatedBytes is the GPU memory allocated when the step's host
	// span started (the last [memory] event before it, summed over GPUs);
	// -1 without memory events.
	StartAllocatedBytes int64 `json:"start_allocated_bytes"`
}

// Rank is the complete analysis of one trace file.
type Rank struct {
	Rank       int        `json:"rank"`
	WorldSize  int        `json:"world_size,omitempty"` // distributedInfo.world_size
	Backend    string     `json:"backend,omitempty"`    // distributedInfo.backend
	Path       string     `json:"path"`
	Bytes      int64      `json:"bytes"`
	Events     int        `json:"events"`
	TimeOrigin TimeOrigin `json:"time_origin"`
	// StartTimeNS is the trace's first event, the profiler's start (the
	// plugin's origin for its curves).
	StartTimeNS int64    `json:"start_ns"`
	Profiler    Profiler `json:"profiler"`

	StepSource StepSource `json:"step_source"`
	Steps      []Step     `json:"steps"`
	// SlowestStep is the index in Steps of the longest step (-1: none);
	// OutlierSteps the indices of steps over 1.5x the median duration.
	SlowestStep   int   `json:"slowest_step"`
	OutlierSteps  []int `json:"outlier_steps"`
	AverageStepNS int64 `json:"average_step_ns"`
	// AverageHostStepNS is the steps' average host span (ProfilerStep#N
	// itself, without the GPU work that runs past it).
	AverageHostStepNS      int64     `json:"average_host_step_ns"`
	MedianStepNS           int64     `json:"median_step_ns"`
	AverageBreakdown       Breakdown `json:"average_breakdown"`
	AveragePhases          Phases    `json:"average_phases"`
	StepTimeVariationRatio float64   `json:"step_time_variation_ratio"` // stddev / mean

	// DataLoaderRatio is THE DataLoader share: DataLoader time not hidden
	// by GPU work or launches (the breakdown's DataLoader part, which the
	// phases' data loading equals), over the steps' time.
	DataLoaderRatio float64 `json:"dataloader_ratio"`
	// HostDataLoaderRatio is the DataLoader share of the host steps' time,
	// hidden or not: what the loader costs once GPU work gets faster.
	HostDataLoaderRatio float64 `json:"host_dataloader_ratio"`

	// The headline GPU numbers are those of PrimaryDevice, the device with
	// the most compute-kernel time (-1: no kernels); every device is in GPUs.
	PrimaryDevice           int     `json:"primary_device"`
	GPUUtilizationRatio     float64 `json:"gpu_utilization_ratio"`
	SMEfficiencyRatio       float64 `json:"sm_efficiency_ratio"`
	AchievedOccupancyRatio  float64 `json:"achieved_occupancy_ratio"`
	TensorCoreRatio         float64 `json:"tensor_core_ratio"`
	TensorCoreEligibleRatio float64 `json:"tensor_core_eligible_ratio"` // kernel time of TC-eligible ops
	Idle                    Idle    `json:"idle"`                       // PrimaryDevice's
	GPUs                    []GPU   `json:"gpus"`

	Operators  []Operator `json:"operators"`
	UserRanges []Operator `json:"user_ranges"` // user annotations (record_function), ProfilerStep excluded
	Kernels    []Kernel   `json:"kernels"`
	KernelOps  []KernelOp `json:"kernels_by_operator"`
	Launch     Launch     `json:"launch"`
	Copies     []Copy     `json:"copies"`
	Syncs      []Sync     `json:"syncs"`
	Comm       Comm       `json:"communication"`
	// HTA: the numbers HTA defines differently, computed its way (hta.go)
	HTA          HTA         `json:"hta"`
	Memory       Memory      `json:"memory"`
	UtilTimeline []UtilPoint `json:"gpu_utilization_timeline"`
	FwdBwdLinks  int         `json:"fwd_bwd_links"` // backward ops linked to their forward op

	// HTA's and the TensorBoard plugin's deeper analyses (deep.go,
	// docs/trace.md "Deeper analyses")
	CriticalPath    CriticalPath     `json:"critical_path"`
	KernelSequences []KernelSequence `json:"kernel_sequences"`
	Streams         []StreamStats    `json:"streams"`
	CopyBandwidth   []CopyBandwidth  `json:"copy_bandwidth"`
	GPUAnnotations  []GPUAnnotation  `json:"gpu_annotations"`
	Modules         []Module         `json:"modules"`
	// OperatorsByShape is the operator table by (name, input shapes),
	// whatever Options.GroupByShape says (empty without record_shapes).
	OperatorsByShape []Operator `json:"operators_by_shape"`
	CommOps          []CommOp   `json:"communication_ops"`
	MemoryOps        []MemoryOp `json:"memory_by_operator"`
	// Skipped names the analyses a trace analysed in windows (larger than
	// memory) leaves out, with the reason: they need the whole trace at once.
	Skipped []string `json:"skipped_analyses,omitempty"`

	Overhead *Overhead         `json:"profiling_overhead,omitempty"` // with bundle phases
	Findings []finding.Finding `json:"findings"`
	Warnings []string          `json:"warnings"`

	comm      []commEvent
	commCalls []commOpCall // communication ops in start order, for their transfer time
	hasRank   bool         // the rank came from distributedInfo
	id        jobIdent     // what tells the ranks of one job apart from other runs
}
