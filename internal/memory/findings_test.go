package memory

import (
	"testing"

	"github.com/ptscope/ptscope/internal/finding"
)

func findingByID(r *Result, id string) *finding.Finding {
	for i := range r.Findings {
		if r.Findings[i].ID == id {
			return &r.Findings[i]
		}
	}
	return nil
}

// Severities follow the cost: a peak reserved above the device is critical
// (it does not fit), above 90% of it a warning; the fixture's 94.9%
// efficiency at the peak is no finding (TestLowEfficiencyThreshold).
func TestFindingSeverities(t *testing.T) {
	t.Parallel()
	s := fixture(t, "gpt2s_train_fp32_b4_ctx512.pickle")
	r := Analyze(s, 0, Options{}).Result
	if f := findingByID(r, "low-efficiency"); f != nil {
		t.Errorf("low-efficiency at %.1f%%: %+v", 100*r.Fragmentation.EfficiencyAtPeak, f)
	}
	reserved := r.Peak.ReservedBytes // 5.44 GiB
	for _, c := range []struct {
		device int64
		id     string
		sev    finding.Severity
	}{
		{reserved * 9 / 10, "does-not-fit", finding.Critical},
		{reserved * 21 / 20, "near-capacity", finding.Warning},
		{reserved * 2, "", 0},
	} {
		r := Analyze(s, 0, Options{DeviceMemory: c.device}).Result
		fit, near := findingByID(r, "does-not-fit"), findingByID(r, "near-capacity")
		switch {
		case c.id == "" && (fit != nil || near != nil):
			t.Errorf("device %d: %+v %+v", c.device, fit, near)
		case c.id == "does-not-fit" && (fit == nil || fit.Severity != c.sev || near != nil):
			t.Errorf("device %d: does-not-fit %+v, near-capacity %+v", c.device, fit, near)
		case c.id == "near-capacity" && (near == nil || near.Severity != c.sev || fit != nil):
			t.Errorf("device %d: near-capacity %+v, does-not-fit %+v", c.device, near, fit)
		}
	}
}

// The ranks of one run whose peaks differ by more than 10% get a
// rank-imbalance finding on the highest rank's result, once.
func TestRankImbalance(t *testing.T) {
	t.Parallel()
	mk := func(dir string, rank int, peaks ...int64) *Input {
		in := &Input{Path: dir + "/rank" + string(rune('0'+rank)) + "/snapshot_end.pickle", Bundle: &BundleInfo{Dir: dir, Rank: rank}}
		for _, p := range peaks {
			in.Devices = append(in.Devices, &Result{Peak: Peak{AllocatedBytes: p, EventIndex: 7}, Findings: []finding.Finding{}})
		}
		return in
	}
	const gib = 1 << 30
	rep := NewReport()
	rep.Inputs = []*Input{mk("run", 0, 30*gib), mk("run", 1, 42*gib), mk("run", 2, 31*gib, 33*gib),
		mk("even", 0, 40*gib), mk("even", 1, 38*gib)}
	rep.Compare()
	rep.Compare()
	for i, in := range rep.Inputs {
		for _, d := range in.Devices {
			n := 0
			for _, f := range d.Findings {
				if f.ID == "rank-imbalance" {
					n++
					if f.Severity != finding.Warning || f.Numbers["min_peak_bytes"] != 30*gib || f.Numbers["max_peak_bytes"] != 42*gib ||
						f.Numbers["ranks"] != 3 || *f.At.Rank != 1 {
						t.Errorf("finding %+v", f)
					}
				}
			}
			if want := map[bool]int{true: 1, false: 0}[i == 1]; n != want {
				t.Errorf("input %d: %d rank-imbalance findings, want %d", i, n, want)
			}
		}
	}
}

// A snapshot whose history lost the run's peak (the ring kept only the
// last entries) says so when the process's own reading is known.
func TestPeakNotInTrace(t *testing.T) {
	t.Parallel()
	s := fixture(t, "gpt2s_train_fp32_b4_ctx512.pickle")
	base := Analyze(s, 0, Options{}).Result
	last := base.LastTimeNS
	for _, c := range []struct {
		marks []PeakMark
		want  bool
	}{
		{[]PeakMark{{last - 1000, base.Peak.AllocatedBytes}}, false},
		{[]PeakMark{{last - 1000, base.Peak.AllocatedBytes * 11 / 10}}, true},
		// a reading after the trace's last entry says nothing about it
		{[]PeakMark{{last - 1000, base.Peak.AllocatedBytes}, {last + 1000, base.Peak.AllocatedBytes * 2}}, false},
	} {
		r := Analyze(s, 0, Options{PeakMarks: c.marks}).Result
		f := findingByID(r, "peak-not-in-trace")
		if (f != nil) != c.want || r.Peak.ProcessMaxAllocatedBytes == 0 {
			t.Errorf("marks %v: finding %+v, process peak %d", c.marks, f, r.Peak.ProcessMaxAllocatedBytes)
		}
	}
}

// OOMCount counts the OOM rows, else the errors the observer recorded
// that the view does not hold.
func TestOOMCount(t *testing.T) {
	for _, c := range []struct {
		r    Result
		want int
	}{
		{Result{}, 0},
		{Result{OOMs: []OOM{{}, {}}}, 2},
		{Result{OOMsOutsideView: 3}, 3},
		{Result{OOMsOutsideView: 1}, 1},
		{Result{OOMs: []OOM{{}}, OOMsOutsideView: 3}, 1},
	} {
		if got := c.r.OOMCount(); got != c.want {
			t.Errorf("%d OOMs, %d outside the view: %d, want %d", len(c.r.OOMs), c.r.OOMsOutsideView, got, c.want)
		}
	}
}
