package memory

import "fmt"

// The result's enums marshal as their names (JSON text), and callers compare
// the typed values, never the strings.

// enumText marshals v, an index into names.
func enumText(kind string, v int, names []string) ([]byte, error) {
	if v < 0 || v >= len(names) {
		return nil, fmt.Errorf("memory: invalid %s %d", kind, v)
	}
	return []byte(names[v]), nil
}

// enumParse finds text among names.
func enumParse(kind string, text []byte, names []string) (int, error) {
	for i, n := range names {
		if n == string(text) {
			return i, nil
		}
	}
	return 0, fmt.Errorf("memory: unknown %s %q", kind, text)
}

func enumString(v int, names []string) string {
	if v >= 0 && v < len(names) {
		return names[v]
	}
	return fmt.Sprintf("invalid(%d)", v)
}

// MarshalText writes the category's name, e.g. "optimizer_state".
func (c Category) MarshalText() ([]byte, error) {
	return enumText("category", int(c), categoryNames[:])
}

// UnmarshalText reads a category's name.
func (c *Category) UnmarshalText(b []byte) error {
	v, err := enumParse("category", b, categoryNames[:])
	*c = Category(v)
	return err
}

// MarshalText writes the phase's name, e.g. "backward".
func (p Phase) MarshalText() ([]byte, error) { return enumText("phase", int(p), phaseNames[:]) }

// UnmarshalText reads a phase's name.
func (p *Phase) UnmarshalText(b []byte) error {
	v, err := enumParse("phase", b, phaseNames[:])
	*p = Phase(v)
	return err
}

var originNames = [...]string{"trace", "before_recording_freed_in_trace", "before_recording"}

func (o Origin) String() string { return enumString(int(o), originNames[:]) }

// MarshalText writes the origin's name.
func (o Origin) MarshalText() ([]byte, error) { return enumText("origin", int(o), originNames[:]) }

// UnmarshalText reads an origin's name.
func (o *Origin) UnmarshalText(b []byte) error {
	v, err := enumParse("origin", b, originNames[:])
	*o = Origin(v)
	return err
}

// Pattern is how memory behaves over the steps.
type Pattern uint8

// Patterns.
const (
	PatternUnknown Pattern = iota // fewer than 3 full steps
	PatternStable
	PatternLeak  // end-of-step memory grows step after step
	PatternSpike // one step peaks well above the others
)

var patternNames = [...]string{"unknown", "stable", "leak", "spike"}

func (p Pattern) String() string { return enumString(int(p), patternNames[:]) }

// MarshalText writes the pattern's name.
func (p Pattern) MarshalText() ([]byte, error) { return enumText("pattern", int(p), patternNames[:]) }

// UnmarshalText reads a pattern's name.
func (p *Pattern) UnmarshalText(b []byte) error {
	v, err := enumParse("pattern", b, patternNames[:])
	*p = Pattern(v)
	return err
}

// Verdict says why an allocation went out of memory.
type Verdict uint8

// Verdicts.
const (
	// VerdictCapacity: the request exceeds device-free plus cached-free
	// memory; it does not fit.
	VerdictCapacity Verdict = iota
	// VerdictFragmentation: enough was free in total, not in one piece.
	VerdictFragmentation
)

var verdictNames = [...]string{"capacity", "fragmentation"}

func (v Verdict) String() string { return enumString(int(v), verdictNames[:]) }

// MarshalText writes the verdict's name.
func (v Verdict) MarshalText() ([]byte, error) { return enumText("verdict", int(v), verdictNames[:]) }

// UnmarshalText reads a verdict's name.
func (v *Verdict) UnmarshalText(b []byte) error {
	x, err := enumParse("verdict", b, verdictNames[:])
	*v = Verdict(x)
	return err
}

// StepSource says how the steps of a trace were found.
type StepSource uint8

// Step sources, in the order they are tried.
const (
	StepsNone            StepSource = iota // no steps found
	StepsPtscopeStep                       // ptscope run's step ranges (optimizer steps)
	StepsProfilerStep                      // ProfilerStep#N annotations
	StepsPtscopeRun                        // ptscope run's forward ranges (bundles of older versions)
	StepsOptimizerStep                     // Optimizer.step annotations
	StepsOptimizerFrames                   // runs of torch.optim allocations
	StepsRepeating                         // the most regular repeating allocation
)

var stepSourceNames = [...]string{"none", "ptscope_step", "profiler_step", "ptscope_run", "optimizer_step", "optimizer_frames", "repeating_pattern"}

var stepSourceText = [...]string{"none", "ptscope run's optimizer steps", "ProfilerStep annotations", "ptscope run's forward annotations",
	"Optimizer.step annotations", "optimizer frames", "a repeating allocation pattern"}

func (s StepSource) String() string { return enumString(int(s), stepSourceNames[:]) }

// Describe says in words how the steps were found.
func (s StepSource) Describe() string { return enumString(int(s), stepSourceText[:]) }

// MarshalText writes the source's name.
func (s StepSource) MarshalText() ([]byte, error) {
	return enumText("step source", int(s), stepSourceNames[:])
}

// UnmarshalText reads a source's name.
func (s *StepSource) UnmarshalText(b []byte) error {
	v, err := enumParse("step source", b, stepSourceNames[:])
	*s = StepSource(v)
	return err
}

// FrameKind says whose code a frame is, so that a renderer can show the
// user's code and hide the machinery without knowing PyTorch's layout.
type FrameKind uint8

// Frame kinds.
const (
	// FrameUser is Python outside PyTorch and installed packages: the
	// user's own code.
	FrameUser FrameKind = iota
	// FrameLibrary is Python of an installed package other than PyTorch
	// (site-packages, dist-packages), of the standard library or frozen.
	FrameLibrary
	// FrameTorch is PyTorch's own Python.
	FrameTorch
	// FrameCpp is a C++ frame (recorded with stacks="all").
	FrameCpp
	// FramePlumbing is machinery every stack has that says nothing about
	// the program: the interpreter, the unwinder, the allocator and
	// dispatcher, nn.Module's call wrappers. Short views hide it.
	FramePlumbing
)

var frameKindNames = [...]string{"user", "library", "torch", "cpp", "plumbing"}

func (k FrameKind) String() string { return enumString(int(k), frameKindNames[:]) }

// MarshalText writes the kind's name.
func (k FrameKind) MarshalText() ([]byte, error) {
	return enumText("frame kind", int(k), frameKindNames[:])
}

// UnmarshalText reads a kind's name.
func (k *FrameKind) UnmarshalText(b []byte) error {
	v, err := enumParse("frame kind", b, frameKindNames[:])
	*k = FrameKind(v)
	return err
}

// IsPython reports whether frames of this kind are Python.
func (k FrameKind) IsPython() bool { return k <= FrameTorch }
