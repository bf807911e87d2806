package perf

import (
	"cmp"
	"regexp"
	"slices"
	"strings"

	"github.com/ptscope/ptscope/internal/kineto"
)

// CriticalPath is Holistic Trace Analysis's lightweight critical path
// (hta/analyzers/critical_path_analysis.py), computed for every step: the
// longest chain of CPU operators, kernel launches, kernels and
// synchronisations through the step, where each link waits for the one
// before. Shortening work off the path does not shorten the step;
// shortening work on it does, until another chain becomes the longest.
//
// The graph is HTA's (docs/trace.md, "Critical path"): a start and an end
// node for each CPU operator, runtime/driver call and launched GPU event of
// the step (host calls that start within the step's host span; GPU events
// whose launch does); edges for an operator's duration and the gaps between
// nested calls, zero-weight edges between consecutive top-level operators
// of a thread and along the CUDA runtime lock, launch → kernel edges when
// the kernel's stream queue was empty, kernel → kernel edges on a stream,
// and zero-weight synchronisation edges (stream, context and event syncs,
// cudaStreamWaitEvent) from the cuda_sync events.
type CriticalPath struct {
	// SyncEvents: the trace has cuda_sync events (PyTorch's
	// enable_cuda_sync_events); without them the GPU→CPU waits are not
	// edges and the path may run through the host's waiting calls' ends
	// instead (HTA warns the same).
	SyncEvents bool `json:"sync_events"`
	// Windowed: the trace was analysed in windows of steps (larger than
	// memory); a window does not see the launches queued in the window
	// before it, so a step at a window's edge may take a kernel gap for a
	// launch delay and come out longer or shorter than the whole trace's.
	Windowed bool          `json:"windowed,omitempty"`
	LengthNS int64         `json:"length_ns"` // summed over the steps
	BoundBy  CriticalBound `json:"bound_by"`  // summed over the steps
	// Items are the work on the paths by name, summed over the steps, the
	// most critical time first.
	Items []CriticalItem     `json:"items"`
	Steps []StepCriticalPath `json:"steps"`
	// LongestStep is the step with the longest critical path; Path its
	// chain in time order (one step's: a chain is as long as the step's
	// events).
	LongestStep string            `json:"longest_step"`
	Path        []CriticalSegment `json:"path"`
}

// CriticalBound splits a critical path's length by what bounds it (HTA's
// bound_by; data loading is ptscope's: host work inside a DataLoader
// annotation, which HTA counts as cpu_bound unless given data_load_events).
type CriticalBound struct {
	CPUNS              int64 `json:"cpu_bound_ns"`
	DataLoadingNS      int64 `json:"data_loading_ns"`
	GPUComputeNS       int64 `json:"gpu_compute_bound_ns"`
	GPUCommunicationNS int64 `json:"gpu_communication_bound_ns"`
	KernelKernelNS     int64 `json:"gpu_kernel_kernel_overhead_ns"` // gaps between kernels of a stream
	LaunchNS           int64 `json:"gpu_kernel_launch_overhead_ns"` // launch start to kernel start, queue empty
}

func (b *CriticalBound) add(o CriticalBound) {
	b.CPUNS += o.CPUNS
	b.DataLoadingNS += o.DataLoadingNS
	b.GPUComputeNS += o.GPUComputeNS
	b.GPUCommunicationNS += o.GPUCommunicationNS
	b.KernelKernelNS += o.KernelKernelNS
	b.LaunchNS += o.LaunchNS
}

// Bound kinds (CriticalItem.BoundBy), HTA's names.
const (
	BoundCPU           = "cpu_bound"
	BoundDataLoading   = "data_loading"
	BoundGPUCompute    = "gpu_compute_bound"
	BoundGPUComm       = "gpu_communication_bound"
	BoundKernelKernel  = "gpu_kernel_kernel_overhead"
	BoundKernelLaunch  = "gpu_kernel_launch_overhead"
	itemKernelGaps     = "gaps between kernels"
	itemLaunchDelays   = "kernel launch delays"
	criticalStepItems  = 8 // items per step whose saving is measured
	criticalRankItems  = 20
	criticalKKMaxGapNS = 1_500_000 // HTA's KERNEL_KERNEL_DELAY_THRESHOLD_US
)

// CriticalItem is work of one name on a critical path: an operator,
// runtime call or kernel (time on the path attributed to events of that
// name), or the launch delays or kernel gaps of the path.
type CriticalItem struct {
	Name       string `json:"name"`
	BoundBy    string `json:"bound_by"`
	Events     int    `json:"events"`      // events of the name with time on the path
	CriticalNS int64  `json:"critical_ns"` // their time on the path
	// SavingNS is what the step would gain if this work took no time: the
	// path's length minus the longest path with its edges at zero (other
	// chains may then bound the step). Measured for each step's
	// criticalStepItems largest items; on the rank, summed over the steps
	// that measured it.
	SavingNS int64  `json:"saving_ns"`
	code     uint64 // its edges' itemCode (a step's)
}

// StepCriticalPath is one step's critical path.
type StepCriticalPath struct {
	Step     string         `json:"step"`
	LengthNS int64          `json:"length_ns"`
	BoundBy  CriticalBound  `json:"bound_by"`
	Items    []CriticalItem `json:"items"`
	// Path is the chain in time order: consecutive edges of one event
	// merged, with synchronisation edges (duration 0) kept as links; the
	// rank keeps the longest step's (CriticalPath.Path).
	Path []CriticalSegment `json:"-"`
	// Nodes and Edges size the step's graph; Failed says why no path was
	// found (a cycle, as HTA reports).
	Nodes  int    `json:"nodes"`
	Edges  int    `json:"edges"`
	Failed string `json:"failed,omitempty"`
}

// CriticalSegment is a piece of a critical path: a run of host work, a
// kernel, a launch delay, a gap between kernels, or a synchronisation link
// (duration 0). Consecutive pieces of one kind that follow each other
// without a gap are one segment, named after the event with the most
// time in it.
type CriticalSegment struct {
	Kind       string `json:"kind"` // cpu, kernel, launch_delay, kernel_gap, sync
	Name       string `json:"name"`
	Event      int64  `json:"event"`  // that event's index in the trace file's complete events (-1: none)
	Events     int    `json:"events"` // events with time in the segment
	StartNS    int64  `json:"start_ns"`
	DurationNS int64  `json:"duration_ns"`
	BoundBy    string `json:"bound_by,omitempty"`
	most       int64  // the named event's time in it
}

// cpName classes a string id for the critical path (and the queue).
type cpName uint16

const (
	cpKnown      cpName = 1 << iota
	cpLock              // takes the CUDA runtime lock (HTA's CUDA_RUNTIME_EVENTS)
	cpLaunch            // a runtime launch of GPU work (HTA's runtime launch events)
	cpBlocking          // a blocking synchronisation call
	cpRecord            // cudaEventRecord
	cpForward           // contains "forward"
	cpAutograd          // contains "autograd"
	cpHTAComm           // HTA's communication kernel pattern
	cpStreamWait        // the "Stream Wait Event" sync
	cpEventSync         // "Event Sync" / "Context Sync" (stream -1 syncs)
	cpContextSync
	cpStreamSync
)

var htaCommKernel = regexp.MustCompile(`(^nccl.*)|(^hip)|(^hccl)|(.*ncclKernel.*)`)

func classifyCP(name string) cpName {
	c := cpKnown
	switch name {
	case "cudaHostAlloc", "cudaLaunchKernel", "cudaMemcpyAsync":
		c |= cpLock
	}
	switch name {
	case "cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx", "cudaMemcpyAsync",
		"cudaMemsetAsync", "runFunction - job_prep_and_submit_for_execution", "hipLaunchKernel",
		"hipExtModuleLaunchKernel", "hipMemsetAsync", "hipMemcpyAsync", "hipMemcpyWithStream":
		c |= cpLaunch
	}
	switch name {
	case "cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventQuery", "cudaEventSynchronize", "cudaMemcpy",
		"cudaMemcpyAsync":
		c |= cpBlocking
	case "cudaEventRecord":
		c |= cpRecord
	case "Stream Wait Event":
		c |= cpStreamWait
	case "Event Sync":
		c |= cpEventSync
	case "Context Sync":
		c |= cpContextSync
	case "Stream Sync":
		c |= cpStreamSync
	}
	if strings.Contains(name, "forward") {
		c |= cpForward
	}
	if strings.Contains(name, "autograd") {
		c |= cpAutograd
	}
	if htaCommKernel.MatchString(name) {
		c |= cpHTAComm
	}
	return c
}

// cpNames classifies the string ids an analysis asks about, once each.
type cpNames struct {
	t *kineto.Trace
	c []cpName
}

// fill classifies every string at once, so that of only reads: the
// critical path's steps are solved in parallel and share their cpNames.
func (n *cpNames) fill() {
	n.c = make([]cpName, len(n.t.Strings))
	for id, s := range n.t.Strings {
		n.c[id] = classifyCP(s)
	}
}

func (n *cpNames) of(id uint32) cpName {
	if n.c == nil {
		n.c = make([]cpName, len(n.t.Strings))
	}
	if n.c[id] == 0 {
		n.c[id] = classifyCP(n.t.Strings[id])
	}
	return n.c[id]
}

// finishCriticalPath sums the steps' paths.
func finishCriticalPath(steps []StepCriticalPath, longest StepCriticalPath, sync, windowed bool) CriticalPath {
	cp := CriticalPath{SyncEvents: sync, Windowed: windowed, Steps: steps, Items: []CriticalItem{},
		LongestStep: longest.Step, Path: longest.Path}
	if cp.Steps == nil {
		cp.Steps = []StepCriticalPath{}
	}
	if cp.Path == nil {
		cp.Path = []CriticalSegment{}
	}
	type key struct{ name, bound string }
	items := map[key]*CriticalItem{}
	for _, s := range steps {
		cp.LengthNS += s.LengthNS
		cp.BoundBy.add(s.BoundBy)
		for _, it := range s.Items {
			x := items[key{it.Name, it.BoundBy}]
			if x == nil {
				x = &CriticalItem{Name: it.Name, BoundBy: it.BoundBy}
				items[key{it.Name, it.BoundBy}] = x
			}
			x.Events += it.Events
			x.CriticalNS += it.CriticalNS
			x.SavingNS += it.SavingNS
		}
	}
	for _, it := range items {
		cp.Items = append(cp.Items, *it)
	}
	sortItems(cp.Items)
	cp.Items = cp.Items[:min(len(cp.Items), criticalRankItems)]
	return cp
}

func sortItems(items []CriticalItem) {
	slices.SortFunc(items, func(a, b CriticalItem) int {
		return cmp.Or(cmp.Compare(b.CriticalNS, a.CriticalNS), cmp.Compare(a.Name, b.Name), cmp.Compare(a.BoundBy, b.BoundBy))
	})
}
