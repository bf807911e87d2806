package bundle

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"encoding/json"
)

// Manifest is a bundle's manifest.json (schema_version 1, see docs/bundle.md).
type Manifest struct {
	SchemaVersion          int             `json:"schema_version"`
	Tool                   string          `json:"tool"`
	Name                   string          `json:"name"`
	Command                []string        `json:"command"`
	Cwd                    string          `json:"cwd"`
	Host                   string          `json:"host"`
	StartTime              time.Time       `json:"start_time"`
	EndTime                *time.Time      `json:"end_time,omitempty"`
	DurationNs             int64           `json:"duration_ns"`
	Status                 string          `json:"status"` // StatusRunning, StatusFinished or StatusFailedToStart
	ExitCode               int             `json:"exit_code"`
	Signal                 string          `json:"signal,omitempty"`
	Signals                []SignalRecord  `json:"signals"` // what ptscope received while the command ran
	Simulated              bool            `json:"simulated"`
	Mode                   string          `json:"mode,omitempty"`       // capture | simulate-world | fake
	Simulation             *Simulation     `json:"simulation,omitempty"` // how a simulated run was made and what it leaves out
	DeviceName             string          `json:"device_name"`
	DeviceTotalMemoryBytes int64           `json:"device_total_memory_bytes"`
	TorchVersion           string          `json:"torch_version"`
	CUDAVersion            string          `json:"cuda_version"`
	WorldSize              int             `json:"world_size"`
	PyTorchCUDAAllocConf   string          `json:"pytorch_cuda_alloc_conf"`
	AllocatorSettings      json.RawMessage `json:"allocator_settings,omitempty"`
	Options                json.RawMessage `json:"options"`
	Ranks                  []RankInfo      `json:"ranks"`
	Files                  []string        `json:"files"`
	Warnings               []string        `json:"warnings"`
}

// Simulation modes (Manifest.Mode, Simulation.Mode).
const (
	ModeCapture       = "capture"        // a real run: every rank on its own GPU
	ModeSimulateWorld = "simulate-world" // one rank of a larger world on one GPU, collectives fake (--simulate-world-size)
	ModeFake          = "fake"           // no GPU: fake tensors and a memory tracker (--no-gpu)
)

// Simulation is the manifest's "simulation" object: how the run was
// simulated and what its numbers do not count.
type Simulation struct {
	Mode      string `json:"mode"`
	WorldSize int    `json:"world_size"`
	Rank      int    `json:"rank"`            // the (first) simulated rank
	Ranks     []int  `json:"ranks,omitempty"` // every simulated rank, when several ran one after another
	Backend   string `json:"backend,omitempty"`
	// Imbalance is --simulate-imbalance (0 = none): the hottest expert
	// receives that factor times the mean tokens per expert.
	Imbalance   float64           `json:"imbalance,omitempty"`
	NotCounted  []string          `json:"not_counted"`
	Collectives map[string]int    `json:"collectives,omitempty"`     // calls per torch.distributed function, all ranks
	Faked       map[string]string `json:"faked,omitempty"`           // how each called collective's outputs were made
	Unsupported []string          `json:"unsupported_ops,omitempty"` // ops the fake mode could not run (fake)
	Problems    []string          `json:"problems,omitempty"`
}

// SignalRecord is a signal ptscope received while the command ran
// (manifest.json "signals").
type SignalRecord struct {
	Signal    string    `json:"signal"`    // as the manifest's "signal": "terminated", "interrupt", ...
	Time      time.Time `json:"time"`      // when ptscope received it
	ToGroup   bool      `json:"to_group"`  // it reached the command's process group or whole job too
	Forwarded bool      `json:"forwarded"` // ptscope passed it on to the command
}

// RankInfo is one captured process: its rankN/process.json as the companion
// wrote it, plus Dir (relative to the bundle).
type RankInfo struct {
	Dir                    string          `json:"dir"`
	Rank                   int             `json:"rank"`
	LocalRank              *int            `json:"local_rank"`
	WorldSize              *int            `json:"world_size"`
	Pid                    int             `json:"pid"`
	Argv                   []string        `json:"argv"`
	DeviceIndex            int             `json:"device_index"`
	DeviceName             string          `json:"device_name"`
	DeviceTotalMemoryBytes int64           `json:"device_total_memory_bytes"`
	DeviceCapability       string          `json:"device_capability"`
	TorchVersion           string          `json:"torch_version"`
	CUDAVersion            string          `json:"cuda_version"`
	PythonVersion          string          `json:"python_version"`
	PyTorchCUDAAllocConf   string          `json:"pytorch_cuda_alloc_conf"`
	AllocatorSettings      json.RawMessage `json:"allocator_settings,omitempty"`
	StartTimeUs            int64           `json:"start_time_us"`
	EndTimeUs              int64           `json:"end_time_us"`
	Steps                  int             `json:"steps"`
	AllocatedBytes         int64           `json:"allocated_bytes"`
	ReservedBytes          int64           `json:"reserved_bytes"`
	MaxAllocatedBytes      int64           `json:"max_allocated_bytes"`
	MaxReservedBytes       int64           `json:"max_reserved_bytes"`
	MaxDeviceUsedBytes     int64           `json:"max_device_used_bytes"`
	MaxHostRSSBytes        int64           `json:"max_host_rss_bytes"`
	Snapshots              []string        `json:"snapshots"`
	Traces                 []string        `json:"traces"`
	OOM                    *OOM            `json:"oom"`
	Features               map[string]bool `json:"features"`
	Precision              *Precision      `json:"precision"` // nil if no forward ran (or before this field existed)
	// Model is what the companion saw of the model at the first forward
	// (a Hugging Face config, the token ids' shape); internal/estimate reads
	// it for `estimate --from`. Absent before this field existed.
	Model json.RawMessage `json:"model,omitempty"`
	// MemoryLimitBytes is the process's set_per_process_memory_fraction
	// limit, when it set one.
	MemoryLimitBytes int64         `json:"memory_limit_bytes,omitempty"`
	History          *History      `json:"history"` // how allocation stacks were recorded (nil before this field existed)
	StackWindows     []StackWindow `json:"stack_windows"`
}

// History says how allocator history was recorded: Context is the
// history's stack context in stacked steps ("alloc": a stack per
// allocation; "all": per free too; "" none), RecordSteps the policy
// (auto | all | steps), Switchable whether this PyTorch could switch stacks
// per step without clearing the history (else they were on throughout).
// Mode is HistoryWindows when the history was on only inside the stack
// windows, each saved as a snapshot of its own (StackWindow.Snapshot), and
// HistoryRun ("run", or absent in older bundles) when it covered the whole
// run.
type History struct {
	Context     string `json:"context"`
	RecordSteps string `json:"record_steps"`
	Switchable  bool   `json:"switchable"`
	Mode        string `json:"mode,omitempty"`
}

// History modes (History.Mode).
const (
	HistoryRun     = "run"
	HistoryWindows = "windows"
)

// Manifest.Status: the command runs, it ended, or it never started.
const (
	StatusRunning       = "running"
	StatusFinished      = "finished"
	StatusFailedToStart = "failed_to_start"
)

// Unfinished reports whether the rank's process had not finished when its
// process.json was read: it started and wrote no end (it was killed, or
// still runs). Its end snapshot is missing, and what it did after its last
// record (the last saved stack window) is unknown.
func (r *RankInfo) Unfinished() bool { return r.StartTimeUs != 0 && r.EndTimeUs == 0 }

// Windowed reports whether the rank recorded its allocator history only
// inside stack windows, a snapshot per window.
func (r *RankInfo) Windowed() bool { return r.History != nil && r.History.Mode == HistoryWindows }

// StackWindow is a span of steps whose allocations were recorded with a
// Python stack (steps FirstStep..LastStep, 0-based; -1 is the set-up before
// the first step). Reason: setup, warmup, periodic (so that the history ring
// holds a stacked step, or a sparse steady-state step), peak (after a step
// raised the peak), capacity (after a step reserved over 90% of the
// device), requested (--record-steps N-M) or all. Snapshot, in history mode
// "windows", names the file of the rank folder that holds the window's
// trace (snapshot_window<K>.pickle, or the end or OOM snapshot when it was
// taken while the window was open); "" when it could not be written.
type StackWindow struct {
	FirstStep   int    `json:"first_step"`
	LastStep    int    `json:"last_step"`
	Reason      string `json:"reason"`
	StartTimeUs int64  `json:"start_time_us"`
	EndTimeUs   int64  `json:"end_time_us"`
	Snapshot    string `json:"snapshot,omitempty"`
}

// Precision is what the companion saw at the first forward: the model's
// parameter bytes by dtype ("float32", "bfloat16", ...), whether CUDA
// autocast was on (and its dtype), and whether FSDP wraps the model.
type Precision struct {
	ParameterBytesByDtype map[string]int64 `json:"parameter_bytes_by_dtype"`
	AutocastCUDA          bool             `json:"autocast_cuda"`
	AutocastDtype         string           `json:"autocast_dtype,omitempty"`
	FSDP                  bool             `json:"fsdp"`
}

// OOM is what the allocator's out-of-memory observer reported.
type OOM struct {
	Device         int   `json:"device"`
	RequestedBytes int64 `json:"requested_bytes"`
	// DeviceAllocatedBytes is what the allocator's OOM observer reports as
	// its third argument: the most the process may use (its
	// set_per_process_memory_fraction limit) when it set one, else the
	// device's total memory.
	DeviceAllocatedBytes int64  `json:"device_allocated_bytes"`
	DeviceFreeBytes      int64  `json:"device_free_bytes"`
	TimeUs               int64  `json:"time_us"`
	Step                 int    `json:"step"`
	Phase                string `json:"phase"`
	// Snapshot is the file name of the snapshot taken at the error, ""
	// when it could not be written.
	Snapshot string `json:"snapshot"`
	// Count is how many times the process ran out of memory (0: once,
	// from a bundle that predates it). The record describes the first;
	// the program caught those before its last (a batch-size finder, a
	// loop that skips the batch).
	Count int `json:"count,omitempty"`
}

// warning is the manifest's line for the OOM of rank n, in rank folder dir.
func (o *OOM) warning(n int, dir string) string {
	s := fmt.Sprintf("rank %d ran out of GPU memory at step %d (requested %d bytes)", n, o.Step, o.RequestedBytes)
	if o.Count > 1 {
		s = fmt.Sprintf("rank %d ran out of GPU memory %d times, first at step %d (requested %d bytes)", n, o.Count, o.Step, o.RequestedBytes)
	}
	if o.Snapshot == "" {
		return s + "; its snapshot could not be written"
	}
	return s + "; see " + filepath.Join(dir, o.Snapshot)
}

// Phase is one line of phases.jsonl: a forward, backward or optimizer phase
// of one step, with allocator counters before and after. Times are Unix
// microseconds, the clock of snapshots' time_us.
type Phase struct {
	Name                    string `json:"phase"`
	Rank                    int    `json:"rank"`
	Step                    int    `json:"step"`
	StartTimeUs             int64  `json:"start_time_us"`
	EndTimeUs               int64  `json:"end_time_us"`
	AllocatedBeforeBytes    int64  `json:"allocated_before_bytes"`
	AllocatedAfterBytes     int64  `json:"allocated_after_bytes"`
	ReservedBeforeBytes     int64  `json:"reserved_before_bytes"`
	ReservedAfterBytes      int64  `json:"reserved_after_bytes"`
	MaxAllocatedBeforeBytes int64  `json:"max_allocated_before_bytes"`
	MaxAllocatedAfterBytes  int64  `json:"max_allocated_after_bytes"`
	MaxReservedBeforeBytes  int64  `json:"max_reserved_before_bytes"`
	MaxReservedAfterBytes   int64  `json:"max_reserved_after_bytes"`
	Aborted                 bool   `json:"aborted,omitempty"`
	Parent                  string `json:"parent,omitempty"`  // the phase this one ran inside, if any
	Closure                 bool   `json:"closure,omitempty"` // ran inside optimizer.step(closure) (Lightning)
	Roots                   int    `json:"roots,omitempty"`   // forward: root module calls it joined, when more than one
	Stacks                  bool   `json:"stacks,omitempty"`  // allocations recorded Python stacks during it
}

// Sample is one line of live.jsonl.
type Sample struct {
	TimeUs            int64  `json:"time_us"`
	Rank              int    `json:"rank"`
	Step              int    `json:"step"`
	Phase             string `json:"phase"`
	AllocatedBytes    int64  `json:"allocated_bytes"`
	ReservedBytes     int64  `json:"reserved_bytes"`
	MaxAllocatedBytes int64  `json:"max_allocated_bytes"`
	MaxReservedBytes  int64  `json:"max_reserved_bytes"`
	DeviceUsedBytes   int64  `json:"device_used_bytes"`
	DeviceTotalBytes  int64  `json:"device_total_bytes"`
	HostRSSBytes      int64  `json:"host_rss_bytes"`
}

// Bundle is a run bundle read back from disk.
type Bundle struct {
	Dir      string // the bundle folder
	Manifest Manifest
	Ranks    []Rank // sorted by rank, then folder name
}

// Rank holds one rank's files; paths are absolute or relative to the
// working directory (Bundle.Dir joined with the name).
type Rank struct {
	Rank      int
	Dir       string
	Info      RankInfo // process.json (zero if the process died before writing it)
	Snapshots []string // snapshot_*.pickle, in the order written (step snapshots by step, then windows, signal, oom, end)
	Traces    []string // *.pt.trace.json[.gz], by step
	Phases    []Phase
	Live      []Sample
	OOM       *OOM

	Inventories []Inventory // tensors.jsonl, by time
	Regions     []Region    // tensors.jsonl: spans whose allocations have one role
}

// IsBundle reports whether dir holds a manifest.json.
func IsBundle(dir string) bool {
	st, err := os.Stat(filepath.Join(dir, "manifest.json"))
	return err == nil && st.Mode().IsRegular()
}

// ReadBundle reads the bundle in dir. dir may also be an --out folder, in
// which case its "latest" bundle is read. A torn last line of a .jsonl file
// (the process was killed while writing) is ignored; any other bad line is
// an error naming the file and byte offset.
func ReadBundle(dir string) (*Bundle, error) {
	b, err := ListBundle(dir)
	if err != nil {
		return nil, err
	}
	for i, r := range b.Ranks {
		full, err := ReadRank(r.Dir, r.Rank)
		if err != nil {
			return nil, err
		}
		b.Ranks[i] = *full
	}
	return b, nil
}

// IsBundleRank reports whether dir is a rank folder of a bundle (its name
// rankN or rankN_pidM, a manifest.json beside it and none inside).
func IsBundleRank(dir string) bool {
	_, ok := rankDirNumber(filepath.Base(filepath.Clean(dir)))
	return ok && !IsBundle(dir) && IsBundle(filepath.Dir(filepath.Clean(dir)))
}

// ListBundle reads a bundle's manifest and lists its rank folders without
// reading them: each of Ranks holds only Rank and Dir. A reader of many
// ranks reads them one at a time with ReadRank, so that its memory does not
// grow with the number of ranks. dir may also be an --out folder (its
// "latest" bundle is listed) or one rank folder of a bundle (the bundle is
// listed with that rank alone).
func ListBundle(dir string) (*Bundle, error) {
	if IsBundleRank(dir) {
		name := filepath.Base(filepath.Clean(dir))
		b, err := ListBundle(filepath.Dir(filepath.Clean(dir)))
		if err != nil {
			return nil, err
		}
		ranks := b.Ranks[:0]
		for _, r := range b.Ranks {
			if filepath.Base(r.Dir) == name {
				ranks = append(ranks, r)
			}
		}
		b.Ranks = ranks
		return b, nil
	}
	if !IsBundle(dir) && IsBundle(filepath.Join(dir, "latest")) {
		dir = filepath.Join(dir, "latest")
	}
	b := &Bundle{Dir: dir}
	mpath := filepath.Join(dir, "manifest.json")
	data, err := ReadSideFile(mpath, MaxJSONSideFileBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("bundle %s: %w", dir, err)
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(data, &b.Manifest); err != nil {
		return nil, fmt.Errorf("%s: %w", mpath, err)
	}
	if b.Manifest.SchemaVersion > 1 {
		return nil, fmt.Errorf("%s: schema_version %d is newer than this ptscope understands (1)", mpath, b.Manifest.SchemaVersion)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("bundle %s: %w", dir, err)
	}
	for _, e := range entries {
		n, ok := rankDirNumber(e.Name())
		if !ok || !e.IsDir() {
			continue
		}
		b.Ranks = append(b.Ranks, Rank{Rank: n, Dir: filepath.Join(dir, e.Name())})
	}
	sort.SliceStable(b.Ranks, func(i, j int) bool {
		if b.Ranks[i].Rank != b.Ranks[j].Rank {
			return b.Ranks[i].Rank < b.Ranks[j].Rank
		}
		return b.Ranks[i].Dir < b.Ranks[j].Dir
	})
	return b, nil
}

// ReadRank reads one rank folder of a bundle (dir, rank n): its files,
// phases, live samples and tensor inventories.
func ReadRank(dir string, n int) (*Rank, error) { return readRank(dir, n) }

var rankDirRE = regexp.MustCompile(`^rank(\d+)(_pid\d+)?$`)

// RankDirNumber returns the rank of a bundle's rank folder name ("rank3",
// "rank3_pid1234"); false for any other name.
func RankDirNumber(name string) (int, bool) { return rankDirNumber(name) }

func rankDirNumber(name string) (int, bool) {
	m := rankDirRE.FindStringSubmatch(name)
	if m == nil {
		return 0, false
	}
	n, err := strconv.Atoi(m[1])
	return n, err == nil
}

func readRank(dir string, n int) (*Rank, error) {
	r := &Rank{Rank: n, Dir: dir}
	ppath := filepath.Join(dir, "process.json")
	if data, err := ReadSideFile(ppath, MaxJSONSideFileBytes); err == nil {
		if err := json.Unmarshal(data, &r.Info); err != nil {
			return nil, fmt.Errorf("%s: %w", ppath, err)
		}
		r.OOM = r.Info.OOM
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if r.OOM == nil || r.OOM.Snapshot == "" {
		// oom.json is written at the first OOM, with its snapshot: process.json
		// may lack it (the process was killed), or, from a companion before
		// OOM.Count, describe a later OOM the program caught, without the
		// snapshot, which the first's record describes
		opath := filepath.Join(dir, "oom.json")
		if data, err := ReadSideFile(opath, MaxJSONSideFileBytes); err == nil {
			var o OOM
			if err := json.Unmarshal(data, &o); err != nil {
				return nil, fmt.Errorf("%s: %w", opath, err)
			}
			if r.OOM == nil || o.Snapshot != "" {
				r.OOM = &o
			}
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") || !e.Type().IsRegular() {
			continue
		}
		switch {
		case strings.HasPrefix(name, "snapshot_") && strings.HasSuffix(name, ".pickle"):
			r.Snapshots = append(r.Snapshots, filepath.Join(dir, name))
		case strings.Contains(name, ".pt.trace.json"):
			r.Traces = append(r.Traces, filepath.Join(dir, name))
		}
	}
	sort.SliceStable(r.Snapshots, func(i, j int) bool { return snapshotOrder(r.Snapshots[i]) < snapshotOrder(r.Snapshots[j]) })
	sort.SliceStable(r.Traces, func(i, j int) bool { return stepOf(r.Traces[i]) < stepOf(r.Traces[j]) })
	if err := readJSONL(filepath.Join(dir, "phases.jsonl"), func(line []byte) error {
		var p Phase
		if err := json.Unmarshal(line, &p); err != nil {
			return err
		}
		r.Phases = append(r.Phases, p)
		return nil
	}); err != nil {
		return nil, err
	}
	if r.Inventories, r.Regions, err = readRoles(dir); err != nil {
		return nil, err
	}
	if err := readJSONL(filepath.Join(dir, "live.jsonl"), func(line []byte) error {
		var s Sample
		if err := json.Unmarshal(line, &s); err != nil {
			return err
		}
		r.Live = append(r.Live, s)
		return nil
	}); err != nil {
		return nil, err
	}
	return r, nil
}

var stepRE = regexp.MustCompile(`step(\d+)`)

func stepOf(path string) int {
	m := stepRE.FindStringSubmatch(filepath.Base(path))
	if m == nil {
		return 1 << 30
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

var windowRE = regexp.MustCompile(`^snapshot_window(\d+)\.pickle$`)

// snapshotOrder sorts step snapshots by step, then windows by number,
// signal, oom and end.
func snapshotOrder(path string) int64 {
	base := filepath.Base(path)
	switch {
	case strings.HasPrefix(base, "snapshot_step"):
		return int64(stepOf(base))
	case windowRE.MatchString(base):
		n, _ := strconv.Atoi(windowRE.FindStringSubmatch(base)[1])
		return 1<<35 + int64(n)
	case strings.HasPrefix(base, "snapshot_signal"):
		return 1<<40 + int64(stepOf(base))
	case base == "snapshot_oom.pickle":
		return 1 << 50
	case base == "snapshot_end.pickle":
		return 1 << 51
	}
	return 1 << 45
}

// SimulationSummary is one line describing a simulated bundle for reports
// ("" for a real capture).
func (m *Manifest) SimulationSummary() string {
	if !m.Simulated || m.Simulation == nil {
		return ""
	}
	s := m.Simulation
	switch s.Mode {
	case ModeSimulateWorld:
		return fmt.Sprintf("simulated: %s of %d on one GPU, %s collectives (not counted: %s)", s.rankWords(), s.WorldSize, orDefault(s.Backend, "fake"), strings.Join(shortNotCounted(s.Mode), ", "))
	case ModeFake:
		if s.WorldSize > 1 {
			return fmt.Sprintf("simulated without a GPU: %s of %d (fake tensors, fake collectives; not counted: %s)", s.rankWords(), s.WorldSize, strings.Join(shortNotCounted(s.Mode), ", "))
		}
		return fmt.Sprintf("simulated without a GPU (fake tensors; not counted: %s)", strings.Join(shortNotCounted(s.Mode), ", "))
	}
	return "simulated (" + s.Mode + ")"
}

// rankWords names the simulated ranks: "rank 5", "ranks 0-3 one after another".
func (s *Simulation) rankWords() string {
	if len(s.Ranks) > 1 {
		return "ranks " + RankList(s.Ranks) + " one after another"
	}
	return fmt.Sprintf("rank %d", s.Rank)
}

// RankList is 0-3,5 for [0 1 2 3 5] (sorted input).
func RankList(rs []int) string {
	var parts []string
	for i := 0; i < len(rs); {
		j := i
		for j+1 < len(rs) && rs[j+1] == rs[j]+1 {
			j++
		}
		if j > i {
			parts = append(parts, fmt.Sprintf("%d-%d", rs[i], rs[j]))
		} else {
			parts = append(parts, strconv.Itoa(rs[i]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

// FakedLines says, one line per collective the program called, how the
// simulation made its outputs ("all_to_all_single x12: every source ...").
func (m *Manifest) FakedLines() []string {
	if m.Simulation == nil {
		return nil
	}
	s := m.Simulation
	names := make([]string, 0, len(s.Faked))
	for k := range s.Faked {
		names = append(names, k)
	}
	sort.Strings(names)
	out := make([]string, 0, len(names))
	for _, k := range names {
		out = append(out, fmt.Sprintf("%s x%d: %s", k, s.Collectives[k], s.Faked[k]))
	}
	return out
}

func shortNotCounted(mode string) []string {
	if mode == ModeFake {
		return []string{"CUDA context", "cuBLAS workspace", "allocator cache"}
	}
	return []string{"NCCL buffers", "communication time", "data-dependent imbalance"}
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}
