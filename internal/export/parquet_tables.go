package export

// The rows of the Parquet tables (docs/parquet.md). Every table has a rank
// column (-1 when the input named no rank); sizes are int64 bytes, times
// and durations int64 nanoseconds (instants Unix ns), ratios double in
// 0..1; strings are dictionary-encoded. Optional columns are null where
// the value does not exist (a rank without a trace has no step time).

// PQRank is one row of ranks.parquet: one rank, its memory and its time.
type PQRank struct {
	Rank                   int32    `parquet:"rank"`
	SnapshotPath           *string  `parquet:"snapshot_path,optional,dict"`
	TracePath              *string  `parquet:"trace_path,optional,dict"`
	Snapshots              int32    `parquet:"snapshots"`
	Traces                 int32    `parquet:"traces"`
	PeakAllocatedBytes     *int64   `parquet:"peak_allocated_bytes,optional"`
	PeakReservedBytes      *int64   `parquet:"peak_reserved_bytes,optional"`
	EndAllocatedBytes      *int64   `parquet:"end_allocated_bytes,optional"`
	EfficiencyAtPeakRatio  *float64 `parquet:"efficiency_at_peak_ratio,optional"`
	DeviceTotalBytes       *int64   `parquet:"device_total_bytes,optional"`
	TopCategory            *string  `parquet:"top_category,optional,dict"`
	Pattern                *string  `parquet:"pattern,optional,dict"`
	LeakPerStepBytes       *int64   `parquet:"leak_per_step_bytes,optional"`
	OOMs                   *int32   `parquet:"ooms,optional"`
	Truncated              *bool    `parquet:"truncated,optional"`
	MemorySteps            *int32   `parquet:"memory_steps,optional"`
	TraceSteps             *int32   `parquet:"trace_steps,optional"`
	AverageStepNS          *int64   `parquet:"average_step_ns,optional"`
	MedianStepNS           *int64   `parquet:"median_step_ns,optional"`
	GPUUtilizationRatio    *float64 `parquet:"gpu_utilization_ratio,optional"`
	DataLoaderRatio        *float64 `parquet:"dataloader_ratio,optional"`
	CommunicationNS        *int64   `parquet:"communication_ns,optional"`
	ExposedCommunicationNS *int64   `parquet:"exposed_communication_ns,optional"`
	Collectives            *int32   `parquet:"collectives,optional"`
	LateArrivals           *int32   `parquet:"late_arrivals,optional"`
	WorldSize              *int32   `parquet:"world_size,optional"`
	Error                  *string  `parquet:"error,optional"`
}

// PQSnapshot is one row of snapshots.parquet: one device of one snapshot.
type PQSnapshot struct {
	Rank                  int32   `parquet:"rank"`
	Path                  string  `parquet:"path,dict"`
	Format                string  `parquet:"format,dict"`
	Device                int32   `parquet:"device"`
	Entries               int64   `parquet:"entries"`
	HasHistory            bool    `parquet:"has_history"`
	FirstTimeNS           int64   `parquet:"first_time_ns"`
	LastTimeNS            int64   `parquet:"last_time_ns"`
	PeakAllocatedBytes    int64   `parquet:"peak_allocated_bytes"`
	PeakReservedBytes     int64   `parquet:"peak_reserved_bytes"`
	ReservedAtPeakBytes   int64   `parquet:"reserved_at_peak_bytes"`
	PeakTimeNS            int64   `parquet:"peak_time_ns"`
	PeakPhase             string  `parquet:"peak_phase,dict"`
	PeakStep              int32   `parquet:"peak_step"` // index into the steps; -1 outside any step
	EndAllocatedBytes     int64   `parquet:"end_allocated_bytes"`
	EndReservedBytes      int64   `parquet:"end_reserved_bytes"`
	EfficiencyAtPeakRatio float64 `parquet:"efficiency_at_peak_ratio"`
	Pattern               string  `parquet:"pattern,dict"`
	LeakPerStepBytes      int64   `parquet:"leak_per_step_bytes"`
	Steps                 int32   `parquet:"steps"`
	OOMs                  int32   `parquet:"ooms"`
	Truncated             bool    `parquet:"truncated"`
	DeviceTotalBytes      int64   `parquet:"device_total_bytes"` // 0 when unknown
}

// PQMemoryStep is one row of memory_steps.parquet.
type PQMemoryStep struct {
	Rank               int32  `parquet:"rank"`
	Path               string `parquet:"path,dict"`
	Device             int32  `parquet:"device"`
	Step               int32  `parquet:"step"` // index as analyze numbers steps
	Name               string `parquet:"name,dict"`
	StartNS            int64  `parquet:"start_ns"`
	EndNS              int64  `parquet:"end_ns"`
	DurationNS         int64  `parquet:"duration_ns"`
	PeakAllocatedBytes int64  `parquet:"peak_allocated_bytes"`
	EndAllocatedBytes  int64  `parquet:"end_allocated_bytes"`
	Partial            bool   `parquet:"partial"`
	Outlier            bool   `parquet:"outlier"`
}

// PQPeakGroup is one row of peak_groups.parquet: bytes alive at the peak
// under one name, by category, keyword group, source line or module.
type PQPeakGroup struct {
	Rank   int32  `parquet:"rank"`
	Path   string `parquet:"path,dict"`
	Device int32  `parquet:"device"`
	Kind   string `parquet:"kind,dict"` // category | group | source | module
	Name   string `parquet:"name,dict"`
	Bytes  int64  `parquet:"bytes"`
	Count  int64  `parquet:"count"`
}

// PQPeakStack is one row of peak_stacks.parquet: one of the stacks holding
// the most bytes at the peak.
type PQPeakStack struct {
	Rank      int32  `parquet:"rank"`
	Path      string `parquet:"path,dict"`
	Device    int32  `parquet:"device"`
	Position  int32  `parquet:"position"` // 0: the largest
	Bytes     int64  `parquet:"bytes"`
	Count     int64  `parquet:"count"`
	Category  string `parquet:"category,dict"`
	Source    string `parquet:"source,dict"`
	UserFrame string `parquet:"user_frame,dict"` // "file:line function", "" when none
	// Frames are every frame, innermost first, "file:line function" joined
	// by newlines: equal stacks on different ranks have equal text.
	Frames string `parquet:"frames,dict"`
}

// PQTraceStep is one row of trace_steps.parquet.
type PQTraceStep struct {
	Rank                int32   `parquet:"rank"`
	Path                string  `parquet:"path,dict"`
	Name                string  `parquet:"name,dict"`
	Number              int32   `parquet:"number"`
	StartNS             int64   `parquet:"start_ns"`
	DurationNS          int64   `parquet:"duration_ns"`
	HostDurationNS      int64   `parquet:"host_duration_ns"`
	GPUUtilizationRatio float64 `parquet:"gpu_utilization_ratio"`
	KernelNS            int64   `parquet:"kernel_ns"`
	MemcpyNS            int64   `parquet:"memcpy_ns"`
	MemsetNS            int64   `parquet:"memset_ns"`
	CommunicationNS     int64   `parquet:"communication_ns"`
	RuntimeNS           int64   `parquet:"runtime_ns"`
	DataLoaderNS        int64   `parquet:"dataloader_ns"`
	CPUExecNS           int64   `parquet:"cpu_exec_ns"`
	OtherNS             int64   `parquet:"other_ns"`
	ForwardNS           int64   `parquet:"forward_ns"`
	BackwardNS          int64   `parquet:"backward_ns"`
	OptimizerNS         int64   `parquet:"optimizer_ns"`
}

// PQOperator is one row of operators.parquet.
type PQOperator struct {
	Rank               int32  `parquet:"rank"`
	Path               string `parquet:"path,dict"`
	Name               string `parquet:"name,dict"`
	InputShapes        string `parquet:"input_shapes,dict"` // "" unless grouped by shape
	Calls              int64  `parquet:"calls"`
	HostSelfNS         int64  `parquet:"host_self_ns"`
	HostTotalNS        int64  `parquet:"host_total_ns"`
	DeviceSelfNS       int64  `parquet:"device_self_ns"`
	DeviceTotalNS      int64  `parquet:"device_total_ns"`
	TensorCoreEligible bool   `parquet:"tensor_core_eligible"`
	TensorCoreSelfNS   int64  `parquet:"tensor_core_self_ns"`
}

// PQKernel is one row of kernels.parquet.
type PQKernel struct {
	Rank               int32   `parquet:"rank"`
	Path               string  `parquet:"path,dict"`
	Name               string  `parquet:"name,dict"`
	Calls              int64   `parquet:"calls"`
	TotalNS            int64   `parquet:"total_ns"`
	MeanNS             int64   `parquet:"mean_ns"`
	MinNS              int64   `parquet:"min_ns"`
	MaxNS              int64   `parquet:"max_ns"`
	MeanBlocksPerSM    float64 `parquet:"mean_blocks_per_sm"`
	MeanOccupancyRatio float64 `parquet:"mean_occupancy_ratio"`
	TensorCore         bool    `parquet:"tensor_core"`
	Communication      bool    `parquet:"communication"`
	TopOperator        string  `parquet:"top_operator,dict"`
}

// PQCollective is one row of collectives.parquet: one collective kind on
// one rank.
type PQCollective struct {
	Rank    int32  `parquet:"rank"`
	Path    string `parquet:"path,dict"`
	Name    string `parquet:"name,dict"`
	Calls   int64  `parquet:"calls"`
	TotalNS int64  `parquet:"total_ns"`
	Bytes   int64  `parquet:"bytes"`
}

// PQFinding is one row of findings.parquet: a finding of a rank's snapshot
// or trace, or of the fleet (rank from its at.rank, -1 when it names none).
type PQFinding struct {
	Rank           int32              `parquet:"rank"`
	Source         string             `parquet:"source,dict"` // memory | trace | fleet
	Path           string             `parquet:"path,dict"`   // "" for the fleet's
	Device         *int32             `parquet:"device,optional"`
	ID             string             `parquet:"id,dict"`
	Severity       string             `parquet:"severity,dict"`
	Message        string             `parquet:"message"`
	Recommendation string             `parquet:"recommendation"`
	Numbers        map[string]float64 `parquet:"numbers"`
}
