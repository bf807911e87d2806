package memory

import (
	"reflect"
	"testing"

	"github.com/ptscope/ptscope/internal/snapshot"
)

// AnnotationRanges pairs by name, an END closing the latest START of its
// name; an END with no START is dropped; ranges left open come last.
func TestAnnotationRanges(t *testing.T) {
	ann := func(dev int, name, stage string, us int64) snapshot.Annotation {
		return snapshot.Annotation{Device: dev, Name: name, Stage: stage, TimeUS: us}
	}
	s := &snapshot.Snapshot{Traces: make([]snapshot.Trace, 2), Annotations: []snapshot.Annotation{
		ann(0, "step", "START", 1), ann(0, "fwd", "START", 2), ann(0, "fwd", "START", 3), // nested, same name
		ann(0, "fwd", "END", 4), ann(0, "fwd", "END", 5), ann(0, "bwd", "END", 6), // bwd: no START
		ann(1, "other", "START", 7), ann(1, "other", "END", 8), // the other device
		ann(-1, "any", "START", 9), ann(0, "opt", "START", 10), // open at the snapshot
	}}
	want := []AnnotationRange{{Name: "fwd", StartUS: 3, EndUS: 4}, {Name: "fwd", StartUS: 2, EndUS: 5},
		{Name: "any", StartUS: 9, Open: true}, {Name: "opt", StartUS: 10, Open: true}, {Name: "step", StartUS: 1, Open: true}}
	if got := AnnotationRanges(s, 0); !reflect.DeepEqual(got, want) {
		t.Errorf("device 0:\n got %+v\nwant %+v", got, want)
	}
	// one trace: every annotation is its device's
	s.Traces = s.Traces[:1]
	if got := AnnotationRanges(s, 0); len(got) != len(want)+1 || got[2] != (AnnotationRange{Name: "other", StartUS: 7, EndUS: 8}) {
		t.Errorf("one trace: %+v", got)
	}
}
