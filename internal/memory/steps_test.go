package memory

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ptscope/ptscope/internal/snapshot"
)

// annotate adds a START or END annotation at the time of the trace's next
// entry (entry times are 1, 2, 3, ... in traceBuilder).
func (b *traceBuilder) annotate(name, stage string) *traceBuilder {
	b.s.Annotations = append(b.s.Annotations, snapshot.Annotation{Device: 0, Name: name, Stage: stage,
		TimeUS: int64(b.tr.Len() + 1)})
	return b
}

// work allocates and frees a small block (two entries... three: alloc,
// free_requested, free_completed).
func (b *traceBuilder) work() *traceBuilder {
	a := base + uint64(b.tr.Len())*4096
	return b.alloc(a, 1024).free(a, 1024)
}

// phase wraps one ptscope phase with a block allocated and freed in it.
func (b *traceBuilder) phase(name string) *traceBuilder {
	return b.annotate("ptscope:"+name, "START").work().annotate("ptscope:"+name, "END")
}

func (b *traceBuilder) step(k int, body func(*traceBuilder)) *traceBuilder {
	b.annotate(fmt.Sprintf("ptscope:step#%d", k), "START")
	body(b)
	return b.annotate(fmt.Sprintf("ptscope:step#%d", k), "END")
}

func stepNames(b *traceBuilder) string {
	b.tr.HasTime = true
	ph := tracePhases(b.s, 0)
	var out []string
	for _, s := range ph.Steps {
		n := s.Name
		if s.Partial {
			n += "*"
		}
		out = append(out, n)
	}
	return ph.Source.String() + ": " + strings.Join(out, ", ")
}

// ptscope run's step ranges are the steps: one per optimizer step,
// whatever runs inside it.
func TestPtscopeSteps(t *testing.T) {
	accum := func(b *traceBuilder) {
		b.phase("forward").phase("backward").phase("forward").phase("backward").phase("optimizer")
	}
	plain := func(b *traceBuilder) { b.phase("forward").phase("backward").phase("optimizer") }
	cases := []struct {
		name string
		b    *traceBuilder
		want string
	}{
		{"accumulation, set-up and end", newTraceBuilder().work().step(0, accum).work().step(1, accum).work(),
			"ptscope_step: before step 0*, step 0, step 1, after step 1*"},
		{"an optimizer phase without entries", newTraceBuilder().step(0, plain).step(1, func(b *traceBuilder) {
			b.phase("forward").phase("backward").annotate("ptscope:optimizer", "START").annotate("ptscope:optimizer", "END")
		}).work(), "ptscope_step: step 0, step 1, after step 1*"},
		{"out of memory in step 2's forward", newTraceBuilder().step(0, plain).step(1, plain).annotate("ptscope:step#2", "START").
			annotate("ptscope:forward", "START").work(), "ptscope_step: step 0, step 1, step 2*"},
		{"a step closed at exit without its optimizer step", newTraceBuilder().step(0, plain).step(1, func(b *traceBuilder) {
			b.phase("forward")
		}), "ptscope_step: step 0, step 1*"},
		{"inference: no optimizer at all", newTraceBuilder().step(0, func(b *traceBuilder) { b.phase("forward") }).
			step(1, func(b *traceBuilder) { b.phase("forward") }), "ptscope_step: step 0, step 1"},
		{"the first step's start dropped from the ring", newTraceBuilder().work().phase("optimizer").annotate("ptscope:step#4", "END").
			step(5, plain), "ptscope_step: step 4*, step 5"},
	}
	for _, c := range cases {
		if got := stepNames(c.b); got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.want)
		}
	}
}

// RunStep reads back the step number stepName writes, and nothing else.
func TestRunStep(t *testing.T) {
	for _, c := range []struct {
		name string
		n    int
		ok   bool
	}{{stepName(0), 0, true}, {stepName(23), 23, true}, {"ProfilerStep#3", 0, false}, {"step x", 0, false}, {"step -1", 0, false}, {"step 1 ", 0, false}} {
		if n, ok := (StepRow{Name: c.name}).RunStep(); n != c.n && c.ok || ok != c.ok {
			t.Errorf("%q: %d %v, want %d %v", c.name, n, ok, c.n, c.ok)
		}
	}
}
