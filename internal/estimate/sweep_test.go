package estimate

import (
	"reflect"
	"testing"
)

func TestParseSweepAxis(t *testing.T) {
	for _, c := range []struct {
		in   string
		name string
		want []int
	}{
		{"micro-batch=1..64", "micro-batch", []int{1, 2, 4, 8, 16, 32, 64}},
		{"micro_batch=1..48", "micro-batch", []int{1, 2, 4, 8, 16, 32, 48}},
		{"seq=512,1024, 2048", "seq", []int{512, 1024, 2048}},
		{"zero=0..3", "zero", []int{0, 1, 2, 3}},
	} {
		ax, err := ParseSweepAxis(c.in)
		if err != nil || ax.Name != c.name || !reflect.DeepEqual(ax.Values, c.want) {
			t.Errorf("%q: %+v, %v; want %s %v", c.in, ax, err, c.name, c.want)
		}
	}
	for _, bad := range []string{"seq", "seq=", "seq=a,b", "seq=8..2", "colour=1", "seq=-1", "seq=1..2000000000"} {
		if _, err := ParseSweepAxis(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// The largest fitting row of a micro-batch sweep is the one just below the device size.
func TestSweepBest(t *testing.T) {
	m, _ := Preset("lm-large")
	dev, _ := GPU("4090")
	ax, _ := ParseSweepAxis("micro-batch=1..64")
	s := DefaultSetup()
	s.Seq, s.DType, s.AMP = 512, "bf16", true
	rows, best, err := Sweep(m, s, dev, []SweepAxis{ax})
	if err != nil || best < 0 {
		t.Fatalf("best %d, %v", best, err)
	}
	if !rows[best].Fits || (best+1 < len(rows) && rows[best+1].Fits) {
		t.Errorf("best row %d (%+v) is not the last fitting one", best, rows[best])
	}
	for i := 1; i < len(rows); i++ {
		if rows[i].PeakAllocatedBytes < rows[i-1].PeakAllocatedBytes {
			t.Errorf("peak falls from micro-batch %d to %d", rows[i-1].ValueMap["micro-batch"], rows[i].ValueMap["micro-batch"])
		}
	}
}
