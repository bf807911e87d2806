// Package kineto reads PyTorch profiler (Kineto) Chrome-trace JSON files into
// a columnar, interned model without holding the whole file in memory.
//
// The reader splits the traceEvents array into events with its own scanner,
// decodes them in parallel workers (a one-pass scanner per event, with
// encoding/json for the events it leaves: see scanEvent),
// interns names and categories, and stores complete ("X") events in columns.
// Memory instants, flows and metadata events go to their own tables.
// Timestamps are parsed from their decimal text into int64 nanoseconds.
package kineto

import "strings"

// Kind classifies an event category.
type Kind uint8

// Event kinds. Legacy capitalised categories map to the same kinds.
const (
	KindOther             Kind = iota
	KindCPUOp                  // cpu_op (also legacy "Operator")
	KindUserAnnotation         // user_annotation
	KindGPUUserAnnotation      // gpu_user_annotation
	KindKernel                 // kernel
	KindMemcpy                 // gpu_memcpy
	KindMemset                 // gpu_memset
	KindRuntime                // cuda_runtime and other *_runtime
	KindDriver                 // cuda_driver and other *_driver
	KindPythonFunction         // python_function
	KindTrace                  // the "Trace" span
	KindSync                   // cuda_sync (not GPU work)
	KindOverhead               // CUPTI overhead
	KindCudaEvent              // cuda_event
)

var kindNames = [...]string{"other", "cpu_op", "user_annotation", "gpu_user_annotation", "kernel",
	"gpu_memcpy", "gpu_memset", "cuda_runtime", "cuda_driver", "python_function", "trace", "cuda_sync",
	"overhead", "cuda_event"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "other"
}

// IsGPU reports whether events of this kind are work on a GPU stream.
func (k Kind) IsGPU() bool { return k == KindKernel || k == KindMemcpy || k == KindMemset }

// HasGPUInfo reports whether events of this kind carry a GPUInfo (their
// Aux indexes Trace.GPU): GPU work and cuda_sync events.
func (k Kind) HasGPUInfo() bool { return k.IsGPU() || k == KindSync }

// IsLaunch reports whether events of this kind are host-side runtime or driver calls.
func (k Kind) IsLaunch() bool { return k == KindRuntime || k == KindDriver }

// KindOf maps a category string to its kind, case-insensitively.
func KindOf(cat string) Kind {
	switch cat {
	case "cpu_op":
		return KindCPUOp
	case "kernel":
		return KindKernel
	case "cuda_runtime":
		return KindRuntime
	case "python_function":
		return KindPythonFunction
	case "user_annotation":
		return KindUserAnnotation
	case "gpu_user_annotation":
		return KindGPUUserAnnotation
	case "cuda_driver":
		return KindDriver
	case "gpu_memcpy":
		return KindMemcpy
	case "gpu_memset":
		return KindMemset
	}
	c := strings.ToLower(cat)
	switch c {
	case "cpu_op", "operator":
		return KindCPUOp
	case "kernel":
		return KindKernel
	case "gpu_memcpy", "memcpy":
		return KindMemcpy
	case "gpu_memset", "memset":
		return KindMemset
	case "cuda_runtime", "runtime", "mtia_runtime", "glow_runtime", "xpu_runtime", "privateuse1_runtime":
		return KindRuntime
	case "cuda_driver", "xpu_driver", "privateuse1_driver":
		return KindDriver
	case "python_function", "python":
		return KindPythonFunction
	case "user_annotation":
		return KindUserAnnotation
	case "gpu_user_annotation":
		return KindGPUUserAnnotation
	case "trace":
		return KindTrace
	case "cuda_sync", "xpu_sync":
		return KindSync
	case "overhead":
		return KindOverhead
	case "cuda_event":
		return KindCudaEvent
	}
	return KindOther
}

// None marks an absent integer argument (External id, correlation, ...).
const None = int64(-1)

// StringPIDBase is where string pids/tids ("Spans", "Traces", "") start: the
// string with id i is stored as StringPIDBase - i.
const StringPIDBase = int32(-1 << 24)

// Events holds the complete ("X") events in columns. Index i of every column
// is the same event.
type Events struct {
	TS   []int64  // start, ns relative to the trace's time base
	Dur  []int64  // duration, ns (0 when missing)
	Name []uint32 // index into Trace.Strings
	Cat  []uint32 // index into Trace.Strings (the category as written)
	Kind []Kind
	PID  []int32 // see StringPIDBase for string pids
	TID  []int32
	Ext  []int64 // args "External id", None if absent
	Corr []int64 // args "correlation", None if absent
	Aux  []int32 // index into Trace.GPU (GPU kinds) or Trace.Ops (cpu_op, user_annotation); -1 if none
}

// Len is the number of events.
func (e *Events) Len() int { return len(e.TS) }

// End is the end time of event i.
func (e *Events) End(i int) int64 { return e.TS[i] + e.Dur[i] }

// GPUInfo holds the arguments of a kernel, memcpy or memset event, and of
// a cuda_sync event (Device, Stream, WaitStream, WaitCorr; the rest zero).
type GPUInfo struct {
	Device      int32
	Stream      int32
	BlocksPerSM float32 // -1 if absent
	Occupancy   float32 // est. achieved occupancy in percent, -1 if absent
	Bytes       int64   // memcpy/memset bytes, -1 if absent
	Grid        [3]int32
	Block       [3]int32
	Registers   int32
	SharedMem   int32
	Comm        int32 // index into Trace.Comms, -1 if none
	// cuda_sync: "wait_on_stream", the stream the awaited CUDA event was
	// recorded on (-1 if absent), and "wait_on_cuda_event_record_corr_id",
	// the correlation id of its cudaEventRecord (None if absent)
	WaitStream int32
	WaitCorr   int64
	// Bandwidth is a memcpy's or memset's "memory bandwidth (GB/s)"
	// (bytes per ns of its exact duration), -1 if absent.
	Bandwidth float32
}

// OpInfo holds the arguments of a cpu_op or user_annotation event.
type OpInfo struct {
	Seq       int64  // "Sequence number", None if absent
	FwdThread int32  // "Fwd thread id", -1 if absent
	Shape     uint32 // "Input Dims" as compact JSON text, index into Trace.Strings (0: none)
	Types     uint32 // "Input type" as compact JSON text (0: none)
	Comm      int32  // index into Trace.Comms, -1 if none
}

// CommInfo holds the collective arguments of record_param_comms ops and NCCL kernels.
type CommInfo struct {
	Collective uint32 // "Collective name" (index into Strings)
	Dtype      uint32
	PGName     uint32 // "Process Group Name"
	InNelems   int64
	OutNelems  int64
	GroupSize  int32
	Seq        int64 // "Seq", None if absent
}

// MemoryEvent is a [memory] or [OutOfMemory] instant.
type MemoryEvent struct {
	TS             int64
	DeviceType     int8 // 0 CPU, 1 CUDA
	OOM            bool
	DeviceID       int32
	Addr           int64
	Bytes          int64 // >0 alloc, <0 free
	TotalAllocated int64
	TotalReserved  int64
	PID, TID       int32
}

// FlowKind says what a flow event links.
type FlowKind uint8

// Flow kinds.
const (
	FlowOther  FlowKind = iota
	FlowAsync           // ac2g / async_cpu_to_gpu: runtime -> GPU event
	FlowFwdBwd          // fwdbwd: forward op -> backward op
)

// Flow is an "s" (start) or "f" (finish) flow event.
type Flow struct {
	ID       int64
	TS       int64
	PID, TID int32
	Kind     FlowKind
	Finish   bool
}

// Thread names a host thread or GPU stream row.
type Thread struct {
	PID, TID int32
	Name     string
}

// Process names a process row.
type Process struct {
	PID    int32
	Name   string
	Labels string
}

// Device holds one entry of deviceProperties.
type Device struct {
	ID                          int    `json:"id"`
	Name                        string `json:"name"`
	TotalGlobalMem              int64  `json:"totalGlobalMem"`
	ComputeMajor                int    `json:"computeMajor"`
	ComputeMinor                int    `json:"computeMinor"`
	MaxThreadsPerBlock          int    `json:"maxThreadsPerBlock"`
	MaxThreadsPerMultiprocessor int    `json:"maxThreadsPerMultiprocessor"`
	WarpSize                    int    `json:"warpSize"`
	NumSMs                      int    `json:"numSms"`
}

// Distributed is distributedInfo.
type Distributed struct {
	Backend   string `json:"backend"`
	Rank      int    `json:"rank"`
	WorldSize int    `json:"world_size"`
}

// Meta holds the top-level keys of the trace.
type Meta struct {
	SchemaVersion   int
	Devices         []Device
	Distributed     *Distributed // nil if absent
	TraceName       string
	BaseTimeNS      int64 // baseTimeNanoseconds, 0 if absent
	DisplayTimeUnit string
	WithStack       bool
	RecordShapes    bool
	ProfileMemory   bool
	BareArray       bool // the file was a bare JSON array (legacy profiler)
}

// Damage counts what the reader had to repair or skip.
type Damage struct {
	Repaired  int      // events decoded after a repair (N/A, control characters, quotes)
	Dropped   int      // events that could not be decoded
	Garbage   int      // stray bytes between events that were skipped
	Truncated bool     // the input ended before the event array was closed
	Warnings  []string // first few messages, with byte offsets
	// Invalid counts the complete and memory events kept with a field of
	// the wrong type or an impossible value (a ts that is not a number, a
	// negative dur, Bytes that are not a number), read as 0; InvalidFirst
	// says where the first is and what was wrong.
	Invalid      int
	InvalidFirst string
}

// Trace is one Kineto trace file.
type Trace struct {
	Path      string
	Meta      Meta
	Strings   []string // interned names, categories and shapes; Strings[0] == ""
	Events    Events
	GPU       []GPUInfo
	Ops       []OpInfo
	Comms     []CommInfo
	Memory    []MemoryEvent
	Flows     []Flow
	Threads   []Thread
	Processes []Process
	PIDNames  []string // string pids/tids: value StringPIDBase-i is PIDNames[i]
	Bytes     int64    // decompressed bytes read
	Damage    Damage
}

// Name is the name of event i.
func (t *Trace) Name(i int) string { return t.Strings[t.Events.Name[i]] }

// PIDString renders a pid or tid value, string pids included.
func (t *Trace) PIDString(p int32) string {
	if p <= StringPIDBase {
		i := int(StringPIDBase - p)
		if i < len(t.PIDNames) {
			return t.PIDNames[i]
		}
	}
	return itoa(int64(p))
}

// ThreadName returns the last thread_name given to (pid, tid), or "".
func (t *Trace) ThreadName(pid, tid int32) string {
	name := ""
	for _, th := range t.Threads {
		if th.PID == pid && th.TID == tid {
			name = th.Name
		}
	}
	return name
}

// Rank is distributedInfo.rank, or -1 if absent.
func (t *Trace) Rank() int {
	if t.Meta.Distributed == nil {
		return -1
	}
	return t.Meta.Distributed.Rank
}

func itoa(v int64) string {
	var b [24]byte
	i := len(b)
	neg := v < 0
	u := uint64(v)
	if neg {
		u = uint64(-v)
	}
	for {
		i--
		b[i] = byte('0' + u%10)
		u /= 10
		if u == 0 {
			break
		}
	}
	if neg {
		i--
		b[i] = '-'
	}
	return string(b[i:])
}
