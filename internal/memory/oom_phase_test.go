package memory

import "testing"

// phaseStartAt takes the innermost phase holding the time (a backward
// inside an optimizer's closure), its end included; none: 0.
func TestPhaseStartAt(t *testing.T) {
	phases := []PhaseStart{{StartNS: 100, EndNS: 200, AllocatedBytes: 10}, {StartNS: 120, EndNS: 150, AllocatedBytes: 20},
		{StartNS: 300, EndNS: 400, AllocatedBytes: 30}}
	for _, c := range []struct {
		t    int64
		want int64
	}{{99, 0}, {100, 10}, {130, 20}, {150, 20}, {151, 10}, {250, 0}, {400, 30}} {
		if got := phaseStartAt(phases, c.t); got != c.want {
			t.Errorf("at %d: %d, want %d", c.t, got, c.want)
		}
	}
	x := OOM{AllocatedBytes: 3 << 30, PhaseStartAllocatedBytes: 1 << 30, Phase: PhaseBackward, Step: 1}
	steps := []StepRow{{Name: "step 0"}, {Name: "step 7"}}
	if got, want := OOMPhaseGrowth(&x, steps), "The backward of step 7 allocated 2.00 GiB of the 3.00 GiB, from 1.00 GiB as it began"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
	x.PhaseStartAllocatedBytes = 4 << 30 // the phase freed more than it allocated: nothing to say
	if got := OOMPhaseGrowth(&x, steps); got != "" {
		t.Errorf("%q", got)
	}
}
