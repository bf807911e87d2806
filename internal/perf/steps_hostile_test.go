package perf

import (
	"math"
	"testing"
	"time"
)

// TestUnlaunchedGPUEventsLinear: GPU events of no step whose ends may
// all still matter (no step has GPU work yet) are kept in linear time; a
// fixed compaction threshold rescanned them at every event once 65,536
// stayed (240k such events: over 60 s). 2M events here take well under a
// second; quadratic, they would take hours.
func TestUnlaunchedGPUEventsLinear(t *testing.T) {
	const n = 2_000_000
	p := newStepPlanner([]stepSpan{{name: "s", hostS: 0, hostE: 10, deviceS: math.MaxInt64, deviceE: math.MinInt64}}, StepsProfiler)
	start := time.Now()
	for i := int64(0); i < n; i++ {
		p.gpu(false, 0, 0, 100+i, 101+i)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Fatalf("%d unlaunched GPU events took %v", n, d)
	}
	if len(p.unmatched) != n {
		t.Fatalf("%d ends kept, want %d", len(p.unmatched), n)
	}
	// Once the first step has GPU work (from 50), the ends after it go at
	// the next compaction; the ends before it stay.
	p.gpu(true, 1, 2, 50, 60)
	added := 0
	for len(p.unmatched) >= added && added < 3*n {
		p.gpu(false, 0, 0, 30, 40)
		added++
	}
	if len(p.unmatched) != added {
		t.Errorf("%d ends kept, want the %d before 50", len(p.unmatched), added)
	}
}
