//go:build !windows

package capture

import (
	"path/filepath"
	"testing"
)

// TestFakeTorchStatsBinding: the companion reads the allocator's counters
// through torch._C._accelerator_getDeviceStats where it exists, and falls
// back to _cuda_memoryStats for good when that binding raises or answers in
// another shape; the phases and peaks it records are the same either way.
func TestFakeTorchStatsBinding(t *testing.T) {
	py := needPython(t)
	t.Parallel()
	type rec struct {
		peak   int64
		phases []int64
	}
	got := map[string]rec{}
	for _, mode := range []string{"", "refuse", "shape"} {
		o := testOptions(t, fakeTorchEnv(t), "FAKETORCH_ACCEL_STATS="+mode)
		rk := trainRank(t, o, py, 4, "train")
		var x rec
		x.peak = rk.Info.MaxAllocatedBytes
		for _, p := range rk.Phases {
			x.phases = append(x.phases, p.AllocatedBeforeBytes, p.AllocatedAfterBytes, p.MaxAllocatedAfterBytes)
		}
		if x.peak != 38<<20 || len(x.phases) != 3*3*4 {
			t.Errorf("%q: peak %d, %d phase values", mode, x.peak, len(x.phases))
		}
		got[mode] = x
		// the end snapshot says how often the accelerator binding answered
		var n int
		snapshotFacts(t, py, filepath.Join(rk.Dir, "snapshot_end.pickle"), `print(s["fake_accel_calls"])`, &n)
		if (n > 0) != (mode == "") {
			t.Errorf("%q: the accelerator binding answered %d times", mode, n)
		}
	}
	for _, mode := range []string{"refuse", "shape"} {
		a, b := got[""].phases, got[mode].phases
		if len(a) != len(b) {
			t.Fatalf("%q: %d phase values, want %d", mode, len(b), len(a))
		}
		for i := range a {
			if a[i] != b[i] {
				t.Errorf("%q: phase value %d is %d, the accelerator binding's %d", mode, i, b[i], a[i])
				break
			}
		}
	}
}
