// Package capture implements `ptscope run`: it launches an unmodified
// PyTorch command with an embedded Python companion on PYTHONPATH, which
// records allocator history and snapshots, profiler traces, training phases
// and live memory samples into a run bundle; and it reads such bundles back
// for the analyzers (ReadBundle).
package capture

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Schedule is torch.profiler.schedule: after SkipFirst steps, cycles of
// Wait idle steps, Warmup steps (profiler on, results dropped) and Active
// recorded steps, Repeat times (0 = until the end).
type Schedule struct {
	SkipFirst int `json:"skip_first"`
	Wait      int `json:"wait"`
	Warmup    int `json:"warmup"`
	Active    int `json:"active"`
	Repeat    int `json:"repeat"`
}

// DefaultSchedule is the --schedule default: wait=1,warmup=2,active=3,repeat=1.
func DefaultSchedule() Schedule { return Schedule{Wait: 1, Warmup: 2, Active: 3, Repeat: 1} }

// String formats s the way ParseSchedule reads it.
func (s Schedule) String() string {
	out := fmt.Sprintf("wait=%d,warmup=%d,active=%d,repeat=%d", s.Wait, s.Warmup, s.Active, s.Repeat)
	if s.SkipFirst > 0 {
		out = fmt.Sprintf("skip_first=%d,", s.SkipFirst) + out
	}
	return out
}

// ParseSchedule reads "wait=1,warmup=2,active=3,repeat=2[,skip_first=0]".
// Keys left out keep DefaultSchedule's values.
func ParseSchedule(text string) (Schedule, error) {
	s := DefaultSchedule()
	for _, part := range strings.Split(text, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			return s, fmt.Errorf("schedule %q: want key=value, got %q", text, part)
		}
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 0 {
			return s, fmt.Errorf("schedule %q: %s must be a non-negative integer", text, k)
		}
		switch strings.TrimSpace(k) {
		case "wait":
			s.Wait = n
		case "warmup":
			s.Warmup = n
		case "active":
			s.Active = n
		case "repeat":
			s.Repeat = n
		case "skip_first", "skip-first":
			s.SkipFirst = n
		default:
			return s, fmt.Errorf("schedule %q: unknown key %q (wait, warmup, active, repeat, skip_first)", text, k)
		}
	}
	if s.Active < 1 {
		return s, fmt.Errorf("schedule %q: active must be at least 1", text)
	}
	return s, nil
}

// SnapshotAt says when snapshots are taken besides OOM (always) and SIGUSR1.
type SnapshotAt struct {
	End   bool  // at process exit
	Steps []int // right after the N-th completed step (1-based)
}

// ParseSnapshotAt reads "end,step:20,step:100" ("none" or "" for neither).
func ParseSnapshotAt(text string) (SnapshotAt, error) {
	var at SnapshotAt
	for _, part := range strings.Split(text, ",") {
		part = strings.TrimSpace(part)
		switch {
		case part == "" || part == "none":
		case part == "end":
			at.End = true
		case strings.HasPrefix(part, "step:") || strings.HasPrefix(part, "step="):
			n, err := strconv.Atoi(part[5:])
			if err != nil || n < 1 {
				return at, fmt.Errorf("snapshot-at %q: %q needs a step number >= 1", text, part)
			}
			at.Steps = append(at.Steps, n)
		default:
			return at, fmt.Errorf("snapshot-at %q: unknown %q (end, step:N, none)", text, part)
		}
	}
	sort.Ints(at.Steps)
	return at, nil
}

// RecordSteps says which steps record a Python stack with every
// allocation (the rest of the history is recorded for every step).
type RecordSteps struct {
	Mode   string   // auto | all | steps
	Ranges [][2]int // Mode "steps": 0-based inclusive step ranges
}

// DefaultRecordSteps is "auto": the set-up and the first 3 steps, one step
// whenever the last stacked one is about to leave the history ring, and
// the step after one that raised the peak or came close to the device's
// capacity (docs/bundle.md).
func DefaultRecordSteps() RecordSteps { return RecordSteps{Mode: "auto"} }

// String formats r the way ParseRecordSteps reads it.
func (r RecordSteps) String() string {
	if r.Mode != "steps" {
		return r.Mode
	}
	parts := make([]string, len(r.Ranges))
	for i, rg := range r.Ranges {
		parts[i] = strconv.Itoa(rg[0])
		if rg[1] != rg[0] {
			parts[i] += "-" + strconv.Itoa(rg[1])
		}
	}
	return strings.Join(parts, ",")
}

// ParseRecordSteps reads "auto", "all" or a list of 0-based steps and
// ranges such as "0-2,50,100-101".
func ParseRecordSteps(text string) (RecordSteps, error) {
	text = strings.TrimSpace(text)
	switch text {
	case "", "auto":
		return DefaultRecordSteps(), nil
	case "all":
		return RecordSteps{Mode: "all"}, nil
	}
	r := RecordSteps{Mode: "steps"}
	for _, part := range strings.Split(text, ",") {
		part = strings.TrimSpace(part)
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(strings.TrimSpace(lo))
		if err != nil || a < 0 {
			return r, fmt.Errorf("record-steps %q: %q is not a step number (0-based), a range N-M, auto or all", text, part)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(strings.TrimSpace(hi)); err != nil || b < a {
				return r, fmt.Errorf("record-steps %q: bad range %q", text, part)
			}
		}
		r.Ranges = append(r.Ranges, [2]int{a, b})
	}
	sort.Slice(r.Ranges, func(i, j int) bool { return r.Ranges[i][0] < r.Ranges[j][0] })
	return r, nil
}

// ParseRanks reads "all" (nil: every rank) or a list such as "0" or "0,2-3".
func ParseRanks(text string) ([]int, error) {
	text = strings.TrimSpace(text)
	if text == "" || text == "all" {
		return nil, nil
	}
	seen := map[int]bool{}
	var out []int
	for _, part := range strings.Split(text, ",") {
		part = strings.TrimSpace(part)
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return nil, fmt.Errorf("ranks %q: %q is not a rank number", text, part)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return nil, fmt.Errorf("ranks %q: bad range %q", text, part)
			}
		}
		if b-a > 1<<16 {
			return nil, fmt.Errorf("ranks %q: range %q too large", text, part)
		}
		for r := a; r <= b; r++ {
			if !seen[r] {
				seen[r] = true
				out = append(out, r)
			}
		}
	}
	sort.Ints(out)
	return out, nil
}

// Options configure one `ptscope run`.
type Options struct {
	OutDir string // bundles go to OutDir/<timestamp>_<Name>
	Name   string // "" = derived from the command
	// KeepArgv keeps the command line in the bundle as it was; without it,
	// what looks like a secret is masked (MaskArgv).
	KeepArgv bool

	Ranks []int // nil = every rank

	Memory  bool   // allocator history (needed for snapshots)
	History string // windows (only inside stack windows, each its own snapshot) | run
	// WindowBudget is the share of the run's time that periodic windows
	// may cost in history mode "windows" (0 = the companion's 1%); tests
	// raise it to make periodic windows independent of timing.
	WindowBudget     float64
	Stacks           string // python | all | none
	RecordSteps      RecordSteps
	FreeStacks       bool // a stack with every free too (context "all")
	MaxEntries       int  // history ring size
	SnapshotAt       SnapshotAt
	OOM              bool  // OOM observer snapshot
	MaxSnapshotBytes int64 // per-rank snapshot disk budget (0 = none)

	Trace         bool
	Schedule      Schedule
	ProfileMemory bool
	RecordShapes  bool
	WithStack     bool

	Phases  bool // forward/backward/optimizer phases
	Modules bool // module-path attribution of allocations

	Interval time.Duration // live sample period

	Simulate Simulate // --simulate-world-size/--simulate-rank, --no-gpu

	// Status is where the live status line and the summary go (usually
	// stderr); StatusTTY says it is a terminal (live line shown).
	Status    io.Writer
	StatusTTY bool
	Quiet     bool // no summary

	// Child's streams; *os.File values are inherited directly.
	Stdin          io.Reader
	Stdout, Stderr io.Writer

	CacheDir string   // where the companion is unpacked ("" = user cache dir)
	Env      []string // child's base environment (nil = os.Environ())
	Version  string   // ptscope version for the manifest
}

// DefaultOptions returns the defaults of `ptscope run`.
func DefaultOptions() Options {
	return Options{
		OutDir:           "ptscope-runs",
		Memory:           true,
		History:          "windows",
		Stacks:           "python",
		RecordSteps:      DefaultRecordSteps(),
		MaxEntries:       100000,
		SnapshotAt:       SnapshotAt{End: true},
		OOM:              true,
		MaxSnapshotBytes: 4 << 30,
		Schedule:         DefaultSchedule(),
		// --trace records kernels and operators without shapes or memory
		// events: both slow the profiled steps, host time most (docs/bundle.md),
		// a bundle's snapshots already hold the memory, and the trace's own
		// profiling-overhead finding advises them off for step timings.
		ProfileMemory: false,
		RecordShapes:  false,
		Phases:        true,
		Modules:       true,
		Interval:      time.Second,
	}
}

// companionConfig is the JSON handed to the companion in PTSCOPE_CONFIG
// (and recorded in the manifest as "options").
type companionConfig struct {
	Ranks            []int           `json:"ranks"`
	Memory           bool            `json:"memory"`
	History          string          `json:"history"`
	WindowBudget     float64         `json:"window_budget,omitempty"`
	Stacks           string          `json:"stacks"`
	RecordSteps      recordStepsJSON `json:"record_steps"`
	FreeStacks       bool            `json:"free_stacks"`
	MaxEntries       int             `json:"max_entries"`
	SnapshotAt       []string        `json:"snapshot_at"`
	SnapshotSteps    []int           `json:"snapshot_steps"`
	OOM              bool            `json:"oom"`
	MaxSnapshotBytes int64           `json:"max_snapshot_bytes"`
	Trace            bool            `json:"trace"`
	Schedule         Schedule        `json:"schedule"`
	ProfileMemory    bool            `json:"profile_memory"`
	RecordShapes     bool            `json:"record_shapes"`
	WithStack        bool            `json:"with_stack"`
	Phases           bool            `json:"phases"`
	Modules          bool            `json:"modules"`
	IntervalS        float64         `json:"interval_s"`
	Simulate         *simulateConfig `json:"simulate"`
}

type recordStepsJSON struct {
	Mode   string   `json:"mode"`
	Ranges [][2]int `json:"ranges"`
	Warmup int      `json:"warmup"`
}

func (o *Options) validate() error {
	switch o.Stacks {
	case "python", "all", "none":
	default:
		return fmt.Errorf("stacks %q: want python, all or none", o.Stacks)
	}
	switch o.History {
	case "windows", "run":
	default:
		return fmt.Errorf("history %q: want windows or run", o.History)
	}
	switch o.RecordSteps.Mode {
	case "auto", "all", "steps":
	default:
		return fmt.Errorf("record-steps %q: want auto, all or steps", o.RecordSteps.Mode)
	}
	if o.MaxEntries < 1 {
		return fmt.Errorf("max-entries must be at least 1")
	}
	if o.Interval < 10*time.Millisecond {
		return fmt.Errorf("interval %v: must be at least 10ms", o.Interval)
	}
	if o.MaxSnapshotBytes < 0 {
		return fmt.Errorf("max-snapshot-size must not be negative")
	}
	return o.Simulate.validate()
}

func (o *Options) config() companionConfig {
	c := companionConfig{
		Ranks: o.Ranks, Memory: o.Memory, History: o.History, WindowBudget: o.WindowBudget, Stacks: o.Stacks, MaxEntries: o.MaxEntries, FreeStacks: o.FreeStacks,
		RecordSteps:   recordStepsJSON{Mode: o.RecordSteps.Mode, Ranges: o.RecordSteps.Ranges, Warmup: 3},
		SnapshotSteps: o.SnapshotAt.Steps, OOM: o.OOM, MaxSnapshotBytes: o.MaxSnapshotBytes,
		Trace: o.Trace, Schedule: o.Schedule, ProfileMemory: o.ProfileMemory,
		RecordShapes: o.RecordShapes, WithStack: o.WithStack, Phases: o.Phases, Modules: o.Modules,
		IntervalS: o.Interval.Seconds(), Simulate: o.Simulate.config(),
	}
	c.SnapshotAt = []string{}
	if o.SnapshotAt.End {
		c.SnapshotAt = append(c.SnapshotAt, "end")
	}
	if c.SnapshotSteps == nil {
		c.SnapshotSteps = []int{}
	}
	if c.Ranks == nil {
		c.Ranks = []int{}
	}
	if c.RecordSteps.Ranges == nil {
		c.RecordSteps.Ranges = [][2]int{}
	}
	return c
}

// manifestArgv is the command line as the bundle keeps it.
func (o Options) manifestArgv(argv []string) []string {
	if o.KeepArgv {
		return argv
	}
	return MaskArgv(argv)
}
