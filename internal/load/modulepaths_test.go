package load

import (
	"testing"

	"github.com/ptscope/ptscope/internal/memory"
)

// ptscope run records module paths only in the steps where its global
// module hooks run (the first step and the stacked ones). The leak
// trainer's bundle was recorded with paths in every step; without them in
// its unstacked steps (as the companion records now) the leak's stacks
// must be the same: the logits allocated without stacks join the stacked
// site of their size and category.
func TestTrainerLeakWithoutModulePathsOutsideStacks(t *testing.T) {
	tr := analyzeTrainer(t, "leak")
	var in *SnapshotInput
	for _, x := range tr.set.Inputs {
		if x.Rank != nil && x.Snapshot != nil && len(x.Devices) == 1 && x.Path != "" && x.Devices[0].Result.Leak != nil {
			in = x
		}
	}
	if in == nil {
		t.Fatal("no analysed leak snapshot")
	}
	want := in.Devices[0].Result.Leak
	s := *in.Snapshot
	s.Traces = append(s.Traces[:0:0], s.Traces...)
	stripped := 0
	for d := range s.Traces {
		tc := &s.Traces[d]
		meta := append([]uint32(nil), tc.UserMetadata...)
		for i := range meta {
			if meta[i] != 0 && len(s.Stacks[tc.Stack[i]]) == 0 {
				meta[i] = 0
				stripped++
			}
		}
		tc.UserMetadata = meta
	}
	if stripped == 0 {
		t.Fatal("no allocation without stack carries a module path: the fixture does not test this")
	}
	mo := memory.Options{DeviceMemory: in.Rank.Info.DeviceTotalMemoryBytes, Roles: rankRoles(in.Rank),
		PeakMarks: peakMarks(in.Rank), StackWindows: stackWindows(in.Rank)}
	got := memory.Analyze(&s, s.Devices()[0], mo).Result.Leak
	if got == nil || len(got.Stacks) == 0 || len(want.Stacks) == 0 {
		t.Fatalf("leak %+v, with paths %+v", got, want)
	}
	g, w := got.Stacks[0], want.Stacks[0]
	if g.Bytes != w.Bytes || g.Count != w.Count || g.Source != w.Source || g.Count != tr.facts.OptimizerSteps {
		t.Errorf("first leaking stack without paths: %d bytes in %d allocations (%s); with paths %d in %d (%s); %d steps",
			g.Bytes, g.Count, g.Source, w.Bytes, w.Count, w.Source, tr.facts.OptimizerSteps)
	}
}
