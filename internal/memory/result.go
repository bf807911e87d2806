package memory

import (
	"strconv"
	"strings"

	"github.com/ptscope/ptscope/internal/finding"
	"github.com/ptscope/ptscope/internal/snapshot"
)

// Result is the complete analysis of one device of a snapshot, and its JSON
// (docs/json.md): every renderer (text, charts, Markdown, HTML, the web UI,
// diffs) draws from it alone. Groups are complete and sorted, largest
// first; renderers trim. Times are Unix nanoseconds (0 when the snapshot
// recorded none; HasTime says).
type Result struct {
	Device  int  `json:"device"`
	Entries int  `json:"entries"`  // trace entries of the device
	HasTime bool `json:"has_time"` // the entries carry times
	// HasHistory is false for snapshots taken without
	// _record_memory_history: no trace, only the segments at dump time.
	// Then Peak is the state at dump time and every "at the peak" group
	// describes the blocks alive then.
	HasHistory  bool  `json:"has_history"`
	FirstTimeNS int64 `json:"first_time_ns"` // time of the first entry
	LastTimeNS  int64 `json:"last_time_ns"`  // time of the last entry

	Peak  Peak  `json:"peak"`
	Start State `json:"start"` // before the first entry
	End   State `json:"end"`   // after the last entry (the final segments)

	Categories []CategoryGroup `json:"categories_at_peak"`
	Groups     []Group         `json:"groups_at_peak"`  // keyword groups (Options.Rules)
	Sources    []Group         `json:"sources_at_peak"` // first Python frame outside PyTorch
	Modules    []Group         `json:"modules_at_peak"` // module path (ptscope run) or source file
	// ModuleGroups are Modules with the numbers of module paths as "*"
	// ("model.layers.*.mlp"): the layers of a stack together.
	ModuleGroups []Group      `json:"module_groups_at_peak"`
	Stacks       []StackGroup `json:"stacks_at_peak"` // every stack alive at the peak
	// TopAllocations are the largest allocations alive at the peak, at
	// most MaxTopAllocations.
	TopAllocations []TopAlloc `json:"top_allocations"`

	StepSource StepSource `json:"step_source"`
	Steps      []StepRow  `json:"steps"`
	Pattern    Pattern    `json:"pattern"`
	Leak       *Leak      `json:"leak,omitempty"` // Pattern == PatternLeak only
	// PhaseStats are each step's phases with allocated memory before,
	// after and at their peak (phasestats.go).
	PhaseStats []PhaseStat `json:"phase_stats"`

	Fragmentation Fragmentation `json:"fragmentation"`
	OOMs          []OOM         `json:"ooms"`
	// OOMsOutsideView, in a run recorded in windows whose view holds no
	// OOM, is how many out-of-memory errors the OOM observer counted (the
	// program caught them, or the snapshot at the error could not be
	// written or read): findings oom-caught and oom-no-snapshot tell of
	// them. OOMCount counts either.
	OOMsOutsideView int `json:"ooms_outside_view,omitempty"`

	Truncated          bool   `json:"truncated"`
	TruncationEvidence string `json:"truncation_evidence,omitempty"`
	UnmatchedFrees     int    `json:"unmatched_frees"`
	GhostBlocks        int    `json:"blocks_before_recording"`

	Timeline ThinTimeline      `json:"timeline"`
	Findings []finding.Finding `json:"findings"` // most severe first
}

// MaxTopAllocations bounds Result.TopAllocations.
const MaxTopAllocations = 100

// Peak is the highest allocated memory of the trace (with no history: the
// state at dump time).
type Peak struct {
	AllocatedBytes      int64 `json:"allocated_bytes"`
	ReservedBytes       int64 `json:"reserved_bytes"`         // highest reserved over the trace (a run in stack windows: the run's)
	ReservedAtPeakBytes int64 `json:"reserved_at_peak_bytes"` // reserved when allocated peaked
	ActiveBytes         int64 `json:"active_bytes"`
	RequestedBytes      int64 `json:"requested_bytes"`
	TimeNS              int64 `json:"time_ns"`
	EventIndex          int   `json:"event_index"` // -1: before the first entry
	Phase               Phase `json:"phase"`
	Step                int   `json:"step"` // index into Steps; -1 outside any step
	// ProcessMaxAllocatedBytes is torch.cuda.max_memory_allocated as the
	// process read it last before the trace's last entry (a ptscope run
	// bundle records it at every phase boundary); 0 when unknown. The
	// replay's peak equals it when the trace holds the run's peak, and
	// exceeds it when the peak came after that reading (an OOM's forward).
	ProcessMaxAllocatedBytes int64 `json:"process_max_allocated_bytes"`
	// ProcessMaxStep, for a run recorded in stack windows (Run), is the
	// index into Steps of the step in which torch's counters first
	// reached ProcessMaxAllocatedBytes; absent when unknown or reached
	// after the last step.
	ProcessMaxStep *int `json:"process_max_step,omitempty"`
}

// State is a point of the timeline.
type State struct {
	AllocatedBytes int64 `json:"allocated_bytes"` // block bytes (memory_allocated)
	RequestedBytes int64 `json:"requested_bytes"` // bytes the program asked for
	ActiveBytes    int64 `json:"active_bytes"`    // allocated plus pending frees
	ReservedBytes  int64 `json:"reserved_bytes"`  // segment bytes (memory_reserved)
}

// Group is bytes alive at the peak under one name.
type Group struct {
	Name  string `json:"name"`
	Bytes int64  `json:"bytes"`
	Count int    `json:"count"`
}

// CategoryGroup is bytes alive at the peak in one category.
type CategoryGroup struct {
	Category Category `json:"category"`
	Bytes    int64    `json:"bytes"`
	Count    int      `json:"count"`
}

// Frame is a recorded stack frame with the kind of code it is.
type Frame struct {
	Filename string    `json:"filename"`
	Line     int       `json:"line"`
	Name     string    `json:"name"`
	Kind     FrameKind `json:"kind"`
}

// Stack is a recorded stack, every frame, innermost first.
type Stack struct {
	Frames []Frame `json:"frames"`
	// UserFrame indexes the first frame outside PyTorch and installed
	// packages (the user's line); -1 when there is none.
	UserFrame int `json:"user_frame"`
	// AutogradNode names the backward node that made the allocation
	// ("NllLossBackward0") when the stack shows autograd's engine.
	AutogradNode string `json:"autograd_node,omitempty"`
	// Caller, for stacks without Python frames (autograd's worker threads
	// record none), is the Python stack of the backward call the
	// allocation ran under: the nearest earlier allocation of the trace
	// made inside .backward(). Absent when none is known.
	Caller []Frame `json:"caller,omitempty"`
}

// StackGroup is bytes alive at the peak allocated from one stack in one
// category: a stack whose blocks fall in several categories (the frameless
// `<no stack recorded>` one often does) is one group per category.
type StackGroup struct {
	Bytes    int64    `json:"bytes"`
	Count    int      `json:"count"`
	Category Category `json:"category"` // of every block of the group
	Source   string   `json:"source"`   // its entry of Sources
	Stack
}

// TopAlloc is one large allocation alive at the peak.
type TopAlloc struct {
	Bytes          int64    `json:"bytes"`
	RequestedBytes int64    `json:"requested_bytes"`
	Category       Category `json:"category"`
	Group          string   `json:"group"`
	Module         string   `json:"module,omitempty"`
	Stream         int64    `json:"stream"`
	Address        uint64   `json:"address"`
	AgeNS          int64    `json:"age_ns"`      // at the peak; -1 if allocated before recording
	AllocIndex     int      `json:"alloc_index"` // -1 before recording
	Origin         Origin   `json:"origin"`
	Stack          int      `json:"stack"` // index into Result.Stacks
}

// StepRow is one step of the trace.
type StepRow struct {
	Index              int    `json:"index"`
	Name               string `json:"name"`
	StartIndex         int    `json:"start_index"` // entries [start_index, end_index)
	EndIndex           int    `json:"end_index"`
	StartNS            int64  `json:"start_ns"`
	EndNS              int64  `json:"end_ns"`
	DurationNS         int64  `json:"duration_ns"`
	PeakAllocatedBytes int64  `json:"peak_allocated_bytes"`
	PeakIndex          int    `json:"peak_index"`
	EndAllocatedBytes  int64  `json:"end_allocated_bytes"`
	Partial            bool   `json:"partial"` // cut by the start or end of the recording
	// Outlier marks a full step whose peak or duration stands out from
	// the median of the full steps.
	Outlier bool `json:"outlier"`
	// PeakLowerBound marks a step of a run whose allocator history was
	// recorded in windows (Run) whose own peak is not known: no window
	// covers it and torch's running max_memory_allocated did not rise in
	// it. Its PeakAllocatedBytes is then the most allocated at its phase
	// boundaries, a lower bound, and it takes no part in the spike pattern
	// or in peak outliers.
	PeakLowerBound bool `json:"peak_lower_bound,omitempty"`
}

// stepName names step n (0-based) of a run or a trace: "step n".
func stepName(n int) string { return "step " + strconv.Itoa(n) }

// RunStep is the 0-based step the row's name gives ("step N", as
// ptscope run's steps and a trace's numbered steps are named); ok is false
// for any other name (a profiler's "ProfilerStep#N").
func (s StepRow) RunStep() (n int, ok bool) {
	v, ok := strings.CutPrefix(s.Name, "step ")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(v)
	return n, err == nil && n >= 0
}

// Analysis is one device's result together with the models it was computed
// from, for views that need more than the result (a server's timeline
// queries, exports of the live set at any entry).
type Analysis struct {
	Result   *Result
	Snapshot *snapshot.Snapshot
	Replay   *Replay
	Phases   *Phases
}
