package check

import (
	"fmt"
	"io"

	"github.com/ptscope/ptscope/internal/memory"
	"github.com/ptscope/ptscope/internal/units"
)

// Memory applies the memory thresholds of l to every input of an analyze
// report, writing one line per snapshot device to w; an input without a
// snapshot device (a bundle of phases alone) is checked against torch's
// counters where they suffice (PhasesOnly), so that nothing silently
// passes. It returns the failures.
func Memory(w io.Writer, rep *memory.Report, l Limits, log *Log) []string {
	var fails []string
	for _, in := range rep.Inputs {
		if len(in.Devices) == 0 {
			fails = append(fails, phasesOnlyInput(w, in, l, log)...)
			continue
		}
		for _, d := range in.Devices {
			fails = append(fails, device(w, in, d, l, log)...)
		}
	}
	return fails
}

// device checks one snapshot device of input in.
func device(w io.Writer, in *memory.Input, d *memory.Result, l Limits, log *Log) []string {
	var fails []string
	where := fmt.Sprintf("%s device %d", in.Path, d.Device)
	rank := -1
	if in.Bundle != nil {
		rank = in.Bundle.Rank
	}
	rec := func(metric string, v *float64, limit float64, ok bool) {
		log.add(in.Path, d.Device, rank, metric, v, limit, ok)
	}
	top := in.RunPeakAllocatedBytes(d)
	if l.Peak >= 0 {
		ok := top <= l.Peak
		rec("peak_allocated_bytes", num(top), float64(l.Peak), ok)
		if !ok {
			fails = append(fails, fmt.Sprintf("%s: peak allocated %s > %s", where, units.Bytes(top), units.Bytes(l.Peak)))
		}
	}
	if l.Reserved >= 0 {
		ok := d.Peak.ReservedBytes <= l.Reserved
		rec("peak_reserved_bytes", num(d.Peak.ReservedBytes), float64(l.Reserved), ok)
		if !ok {
			fails = append(fails, fmt.Sprintf("%s: peak reserved %s > %s", where, units.Bytes(d.Peak.ReservedBytes), units.Bytes(l.Reserved)))
		}
	}
	if l.Efficiency >= 0 {
		ok := d.Fragmentation.EfficiencyAtPeak >= l.Efficiency
		rec("efficiency_at_peak_ratio", num(d.Fragmentation.EfficiencyAtPeak), l.Efficiency, ok)
		if !ok {
			fails = append(fails, fmt.Sprintf("%s: efficiency at the peak %s < %s", where, units.Percent(d.Fragmentation.EfficiencyAtPeak), units.Percent(l.Efficiency)))
		}
	}
	if l.NoLeak {
		var leak int64
		if d.Pattern == memory.PatternLeak && d.Leak != nil {
			leak = d.Leak.PerStepBytes
			fails = append(fails, fmt.Sprintf("%s: memory leaks %s per step", where, units.Bytes(d.Leak.PerStepBytes)))
		}
		rec("leak_per_step_bytes", num(leak), 0, leak == 0)
	}
	if l.NoOOM {
		n := d.OOMCount()
		rec("oom_count", num(n), 0, n == 0)
		if n > 0 {
			fails = append(fails, fmt.Sprintf("%s: %d out-of-memory events", where, n))
		}
	}
	fmt.Fprintf(w, "%s: peak allocated %s, reserved %s, efficiency %s, pattern %s\n", where,
		units.Bytes(top), units.Bytes(d.Peak.ReservedBytes), units.Percent(d.Fragmentation.EfficiencyAtPeak), d.Pattern)
	return fails
}

// phasesOnlyInput checks an input without a snapshot device: a bundle rank
// recorded without allocator snapshots (ptscope run --memory=false, or
// --no-gpu) has only the counters of its phases (phasesOnly). It returns
// the failures.
func phasesOnlyInput(w io.Writer, in *memory.Input, l Limits, log *Log) []string {
	rank := -1
	if in.Bundle != nil {
		rank = in.Bundle.Rank
	}
	top, res := memory.PhasePeaks(in.Phases)
	what := "no snapshot device and no phases"
	if len(in.Phases) > 0 {
		what = "phases only, no allocator snapshot"
	}
	var fails []string
	for _, t := range phasesOnly(l, top, res, len(in.Phases) > 0) {
		log.add(in.Path, -1, rank, t.metric, t.value, t.limit, t.ok)
		switch {
		case t.value == nil:
			fails = append(fails, fmt.Sprintf("%s: %s cannot be checked: %s", in.Path, t.flag, what))
		case !t.ok:
			fails = append(fails, fmt.Sprintf("%s: %s %s > %s (from the phases)", in.Path, t.what, units.Bytes(int64(*t.value)), units.Bytes(int64(t.limit))))
		}
	}
	if len(in.Phases) > 0 {
		fmt.Fprintf(w, "%s: peak allocated %s, reserved %s (from the phases: %s)\n", in.Path, units.Bytes(top), units.Bytes(res), what)
	}
	return fails
}

// phaseCheck is one memory threshold applied to a rank without a snapshot
// device.
type phaseCheck struct {
	metric, flag, what string
	value              *float64 // nil: it cannot be checked without a snapshot
	limit              float64
	ok                 bool
}

// phasesOnly applies the memory thresholds of l to a rank without a
// snapshot device whose phases (when it has any) peaked at allocated and
// reserved bytes, torch's running maxima as they read them (memory.
// PhasePeaks): --max-peak and --max-reserved against those; efficiency,
// leaks and OOMs need a snapshot, so they cannot be checked, and fail,
// as every threshold does on a rank with no phases either. One rank and a
// fleet's ranks are checked by it alike.
func phasesOnly(l Limits, allocated, reserved int64, phases bool) []phaseCheck {
	var out []phaseCheck
	for _, c := range []struct {
		on                 bool
		metric, flag, what string
		v, limit           int64
	}{
		{l.Peak >= 0, "peak_allocated_bytes", "--max-peak", "peak allocated", allocated, l.Peak},
		{l.Reserved >= 0, "peak_reserved_bytes", "--max-reserved", "peak reserved", reserved, l.Reserved},
	} {
		switch {
		case !c.on:
		case phases:
			out = append(out, phaseCheck{c.metric, c.flag, c.what, num(c.v), float64(c.limit), c.v <= c.limit})
		default:
			out = append(out, phaseCheck{metric: c.metric, flag: c.flag, what: c.what})
		}
	}
	for _, c := range []struct {
		on                 bool
		metric, flag, what string
	}{
		{l.Efficiency >= 0, "efficiency_at_peak_ratio", "--min-efficiency", "efficiency at the peak"},
		{l.NoLeak, "leak_per_step_bytes", "--no-leak", "leak"},
		{l.NoOOM, "oom_count", "--no-oom", "out-of-memory events"},
	} {
		if c.on {
			out = append(out, phaseCheck{metric: c.metric, flag: c.flag, what: c.what})
		}
	}
	return out
}
