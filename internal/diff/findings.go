package diff

import (
	"fmt"
	"strings"

	"github.com/ptscope/ptscope/internal/finding"
	"github.com/ptscope/ptscope/internal/memory"
	"github.com/ptscope/ptscope/internal/units"
)

// Thresholds of the diff's findings (changes of B against A).
const (
	noticeChange   = 0.01 // a peak change worth an info finding
	warnChange     = 0.05 // a peak or step time change worth a warning
	criticalChange = 0.20
	utilDrop       = 0.05 // GPU utilisation points lost worth a warning
)

func severityOf(change float64) finding.Severity {
	switch {
	case change >= criticalChange:
		return finding.Critical
	case change >= warnChange:
		return finding.Warning
	}
	return finding.Info
}

func pct(c *float64) string {
	if c == nil {
		return "new"
	}
	return fmt.Sprintf("%+.1f%%", *c*100)
}

func signedBytes(n int64) string {
	if n >= 0 {
		return "+" + units.Bytes(n)
	}
	return units.Bytes(n)
}

func signedDuration(n int64) string {
	if n >= 0 {
		return "+" + units.Duration(n)
	}
	return units.Duration(n)
}

// findings says what changed between A and B, most severe first.
func findings(rep *Report) []finding.Finding {
	out := []finding.Finding{}
	for i := range rep.Memory {
		out = append(out, memoryFindings(&rep.Memory[i])...)
	}
	for i := range rep.Trace {
		out = append(out, traceFindings(&rep.Trace[i])...)
	}
	finding.Sort(out)
	return out
}

func memRef(d *MemoryDiff) *finding.Ref {
	return &finding.Ref{View: "diff", Device: finding.Int(d.B.Device), Rank: rankRef(d.B.Rank), Name: d.Key}
}

func rankRef(r int) *int {
	if r < 0 {
		return nil
	}
	return finding.Int(r)
}

// stackLabel names a stack by the user's frame, else its source.
func stackLabel(s *StackRow) string {
	if s.UserFrame >= 0 && s.UserFrame < len(s.Frames) {
		f := s.Frames[s.UserFrame]
		return memory.TrimPath(f.Filename) + ":" + fmt.Sprint(f.Line) + " " + f.Name
	}
	if s.Source != "" {
		return s.Source
	}
	return "<no stack recorded>"
}

func memoryFindings(d *MemoryDiff) []finding.Finding {
	var out []finding.Finding
	p := d.PeakAllocated
	nums := finding.Numbers{"a_bytes": float64(p.A), "b_bytes": float64(p.B), "delta_bytes": float64(p.Delta)}
	if p.Change != nil {
		nums["change_ratio"] = *p.Change
	}
	switch c := p.Change; {
	case c != nil && *c >= noticeChange:
		msg := fmt.Sprintf("Peak allocated memory grew from %s to %s (%s, %s) on %s.", units.Bytes(p.A), units.Bytes(p.B),
			signedBytes(p.Delta), pct(c), d.Key)
		var grew []string
		for i := range d.Stacks {
			s := &d.Stacks[i]
			if s.Bytes.Delta <= 0 || len(grew) == 3 {
				continue
			}
			grew = append(grew, fmt.Sprintf("%s %s (%s)", stackLabel(s), signedBytes(s.Bytes.Delta), s.Status))
		}
		if len(grew) > 0 {
			msg += " Largest growth at the peak: " + strings.Join(grew, "; ") + "."
		}
		f := finding.New("peak-increase", severityOf(*c), nums, msg,
			"Compare the categories and stacks that grew; `ptscope export pprof` of both runs and `go tool pprof -diff_base A.pb.gz B.pb.gz` show the change by frame.")
		f.At = memRef(d)
		out = append(out, f)
	case c != nil && *c <= -noticeChange:
		f := finding.New("peak-decrease", finding.Info, nums, fmt.Sprintf("Peak allocated memory fell from %s to %s (%s, %s) on %s.",
			units.Bytes(p.A), units.Bytes(p.B), signedBytes(p.Delta), pct(c), d.Key), "")
		f.At = memRef(d)
		out = append(out, f)
	}
	switch {
	case d.Pattern.B == memory.PatternLeak && d.Pattern.A != memory.PatternLeak:
		f := finding.New("leak-appeared", finding.Critical, finding.Numbers{"per_step_bytes": float64(d.LeakPerStep.B)},
			fmt.Sprintf("B leaks %s per step on %s; A's steps were %s.", units.Bytes(d.LeakPerStep.B), d.Key, d.Pattern.A),
			"See B's leak finding (ptscope analyze) for the stacks whose allocations outlive their step.")
		f.At = memRef(d)
		out = append(out, f)
	case d.Pattern.A == memory.PatternLeak && d.Pattern.B != memory.PatternLeak:
		f := finding.New("leak-resolved", finding.Info, finding.Numbers{"per_step_bytes": float64(d.LeakPerStep.A)},
			fmt.Sprintf("A leaked %s per step on %s; B's steps are %s.", units.Bytes(d.LeakPerStep.A), d.Key, d.Pattern.B), "")
		f.At = memRef(d)
		out = append(out, f)
	}
	if d.OOMs.B > d.OOMs.A {
		f := finding.New("oom-appeared", finding.Critical, finding.Numbers{"a_count": d.OOMs.A, "b_count": d.OOMs.B},
			fmt.Sprintf("B has %d out-of-memory events on %s, A %d.", int(d.OOMs.B), d.Key, int(d.OOMs.A)),
			"See B's out-of-memory findings (ptscope analyze) for the verdict and what filled the memory.")
		f.At = memRef(d)
		out = append(out, f)
	}
	return out
}

func traceRef(d *TraceDiff) *finding.Ref {
	return &finding.Ref{View: "diff", Rank: finding.Int(d.B.Rank), Name: d.Key}
}

func traceFindings(d *TraceDiff) []finding.Finding {
	var out []finding.Finding
	s := d.AverageStep
	nums := finding.Numbers{"a_ns": float64(s.A), "b_ns": float64(s.B), "delta_ns": float64(s.Delta)}
	if s.Change != nil {
		nums["change_ratio"] = *s.Change
	}
	switch c := s.Change; {
	case c != nil && *c >= warnChange:
		msg := fmt.Sprintf("The average step takes %s instead of %s (%s, %s) on %s.", units.Duration(s.B), units.Duration(s.A),
			signedDuration(s.Delta), pct(c), d.Key)
		var grew []string
		for i := range d.Operators {
			o := &d.Operators[i]
			if t := opTime(o); t.Delta > 0 && len(grew) < 3 {
				grew = append(grew, fmt.Sprintf("%s %s per step (%s)", o.Name, signedDuration(t.Delta), o.Status))
			}
		}
		if len(grew) > 0 {
			msg += " Largest operator regressions: " + strings.Join(grew, "; ") + "."
		}
		f := finding.New("step-time-regression", severityOf(*c), nums, msg,
			"Compare the step breakdown, operators and kernels below; a new or slower kernel, a lost tensor-core path or more idle time usually explains it.")
		f.At = traceRef(d)
		out = append(out, f)
	case c != nil && *c <= -warnChange:
		f := finding.New("step-time-improvement", finding.Info, nums, fmt.Sprintf("The average step takes %s instead of %s (%s, %s) on %s.",
			units.Duration(s.B), units.Duration(s.A), signedDuration(s.Delta), pct(c), d.Key), "")
		f.At = traceRef(d)
		out = append(out, f)
	}
	if u := d.GPUUtilization; u.Delta <= -utilDrop {
		f := finding.New("gpu-utilization-drop", finding.Warning, finding.Numbers{"a_ratio": u.A, "b_ratio": u.B, "delta_ratio": u.Delta},
			fmt.Sprintf("GPU utilisation fell from %s to %s on %s.", units.Percent(u.A), units.Percent(u.B), d.Key),
			"Compare the idle time split (host wait, kernel wait, communication) and the DataLoader share.")
		f.At = traceRef(d)
		out = append(out, f)
	}
	return out
}
