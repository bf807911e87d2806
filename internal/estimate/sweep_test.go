package estimate

import (
	"reflect"
	"testing"
)

func TestParseSweepAxis(t *testing.T) {
	for _, c := range []struct {
		in   string
		name string
		want []string
	}{
		{"micro-batch=1..64", "micro-batch", []string{"1", "2", "4", "8", "16", "32", "64"}},
		{"micro_batch=1..48", "micro-batch", []string{"1", "2", "4", "8", "16", "32", "48"}},
		{"seq=512,1024, 2048", "seq", []string{"512", "1024", "2048"}},
		{"zero=0..3", "zero", []string{"0", "1", "2", "3"}},
		{"dtype=fp32,bf16,bf16-true", "dtype", []string{"fp32", "bf16", "bf16-true"}},
		{"recompute=none,full", "recompute", []string{"none", "full"}},
		{"model=gpt2,llama3-8b", "model", []string{"gpt2", "llama3-8b"}},
	} {
		ax, err := ParseSweepAxis(c.in)
		if err != nil || ax.Name != c.name || !reflect.DeepEqual(ax.Values, c.want) {
			t.Errorf("%q: %+v, %v; want %s %v", c.in, ax, err, c.name, c.want)
		}
	}
	for _, bad := range []string{"seq", "seq=", "seq=a,b", "seq=8..2", "colour=1", "seq=-1", "seq=1..2000000000",
		"dtype=fp64", "recompute=sometimes", "seq=1,,2"} {
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
	s.Seq = 512
	res, err := Sweep([]Model{m}, s, dev, []SweepAxis{ax})
	if err != nil || len(res.Best) != 1 {
		t.Fatalf("best %v, %v", res, err)
	}
	rows, best := res.Rows, res.Best[0]
	if !rows[best].Verdict.Fit() || (best+1 < len(rows) && rows[best+1].Verdict.Fit()) {
		t.Errorf("best row %d (%+v) is not the last fitting one", best, rows[best])
	}
	for i := 1; i < len(rows); i++ {
		if rows[i].PeakAllocatedBytes < rows[i-1].PeakAllocatedBytes {
			t.Errorf("peak falls from micro-batch %v to %v", rows[i-1].Values["micro-batch"], rows[i].Values["micro-batch"])
		}
	}
}

// A seed-style sweep: models x contexts x precisions in one call, rows in
// odometer order, invalid points reported in place.
func TestSweepModelsContextsPrecisions(t *testing.T) {
	var models []Model
	for _, n := range []string{"gpt2", "llama3-8b", "lm-2.7B"} {
		m, err := Preset(n)
		if err != nil {
			t.Fatal(err)
		}
		models = append(models, m)
	}
	dev, _ := GPU("h100-80gb")
	var axes []SweepAxis
	for _, spec := range []string{"model=gpt2,llama3-8b,lm-2.7B", "seq=1024,2048,4096", "dtype=fp32,bf16"} {
		ax, err := ParseSweepAxis(spec)
		if err != nil {
			t.Fatal(err)
		}
		axes = append(axes, ax)
	}
	res, err := Sweep(models, DefaultSetup(), dev, axes)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 18 {
		t.Fatalf("%d rows, want 18", len(res.Rows))
	}
	r0, r1 := res.Rows[0], res.Rows[1]
	if r0.Model != "gpt2" || r0.Values["seq"] != 1024 || r0.Values["dtype"] != "fp32" || r1.Values["dtype"] != "bf16" {
		t.Errorf("row order: %+v %+v", r0.Values, r1.Values)
	}
	// gpt2 has 1024 learned positions: seq 2048 is not a valid setup
	if res.Rows[2].Error == "" || res.Rows[2].PeakAllocatedBytes != 0 {
		t.Errorf("gpt2 at seq 2048: %+v", res.Rows[2])
	}
	// llama3-8b: bf16 autocast below fp32 at every context, and peaks grow with the context
	var prev int64
	for i := 6; i < 12; i += 2 {
		fp32, bf16 := res.Rows[i], res.Rows[i+1]
		if fp32.Error != "" || bf16.PeakAllocatedBytes >= fp32.PeakAllocatedBytes || fp32.PeakAllocatedBytes <= prev {
			t.Errorf("llama3-8b %v: fp32 %d, bf16 %d, previous %d", fp32.Values, fp32.PeakAllocatedBytes, bf16.PeakAllocatedBytes, prev)
		}
		prev = fp32.PeakAllocatedBytes
		if fp32.Verdict != DoesNotFit { // 8B params x 16 B of fp32 AdamW states alone exceed 80 GB
			t.Errorf("llama3-8b fp32 %v: verdict %v", fp32.Values, fp32.Verdict)
		}
	}
}

// Sweep specs come from the command line: any text gives an axis or an error, never a panic or
// an unbounded list.
func FuzzParseSweepAxis(f *testing.F) {
	for _, s := range []string{"micro-batch=1..64", "seq=512,1024", "dtype=fp32,bf16", "model=gpt2", "zero=0..3", "seq=0..1073741824", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		ax, err := ParseSweepAxis(spec)
		if err != nil {
			return
		}
		if len(ax.Values) == 0 || len(ax.Values) > 4096 {
			t.Fatalf("%q: %d values", spec, len(ax.Values))
		}
		if _, ok := sweepFields[ax.Name]; !ok {
			t.Fatalf("%q: unknown axis %q accepted", spec, ax.Name)
		}
	})
}
