package fleet

import (
	"context"
	"testing"

	"github.com/ptscope/ptscope/internal/fleet/fleetgen"
	"github.com/ptscope/ptscope/internal/input"
	"github.com/ptscope/ptscope/internal/load"
	"github.com/ptscope/ptscope/internal/perf"
)

// TestNoStragglerInUniformFleet: in a fleet whose ranks all load their
// data at the same speed, launch jitter makes some rank the last to join
// most collectives, by tens of microseconds in steps of milliseconds. That
// is no straggler, to fleet and perf alike, while the fleet of genFleet
// (rank 7 loading 3x slower) still has one (TestSummarizeTime).
func TestNoStragglerInUniformFleet(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if _, err := fleetgen.Write(dir, fleetgen.Options{Ranks: 40, Traces: true, TraceSteps: 3, SlowData: []int{}, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	in, err := Find(nil, []string{dir}, input.Trace)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Summarize(context.Background(), "trace", in, Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tf := rep.Time
	// the case the rule is for: some rank is last in most collectives,
	// but by less than the threshold
	lastBy := map[int]int{}
	for _, c := range tf.Collectives.MostSkewed {
		lastBy[c.LastRank]++
	}
	most := 0
	for _, n := range lastBy {
		most = max(most, n)
	}
	top := tf.Collectives.MostSkewed[0].StartSkewNS
	if 2*most <= len(tf.Collectives.MostSkewed) || top >= 100_000 || top*50 >= tf.StepTime.MedianNS {
		t.Fatalf("not the case under test: one rank last in %d of %d collectives, largest skew %d ns in %d ns steps",
			most, len(tf.Collectives.MostSkewed), top, tf.StepTime.MedianNS)
	}
	if len(tf.Stragglers) != 0 {
		t.Errorf("stragglers %+v", tf.Stragglers)
	}
	all, err := load.Traces(context.Background(), []string{dir}, load.TraceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cr := all.Report.CrossRank; cr == nil || cr.Straggler != -1 {
		t.Errorf("perf's straggler: rank %d", cr.Straggler)
	}
}

func TestLateArrival(t *testing.T) {
	for _, c := range []struct {
		skew, step int64
		want       bool
	}{
		{68_800, 13_200_000, false},     // jitter in 13 ms steps
		{99_000, 0, false},              // under the floor, step unknown
		{100_000, 0, true},              // at the floor, step unknown
		{200_000, 13_200_000, false},    // 1.5% of the step
		{300_000, 13_200_000, true},     // 2.3% of the step
		{1_000_000, 100_000_000, false}, // 1% of a long step
	} {
		if got := perf.LateArrival(c.skew, c.step); got != c.want {
			t.Errorf("LateArrival(%d, %d) = %v", c.skew, c.step, got)
		}
	}
}
