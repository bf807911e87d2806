package capture

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ptscope/ptscope/internal/units"
)

// statusLine is the one-line live status: per rank the step, phase,
// allocated (peak) and reserved bytes and what the device has in use.
func (t *tailer) statusLine() string {
	keys := t.keys()
	if len(keys) == 0 {
		return ""
	}
	parts := make([]string, 0, 4)
	for i, k := range keys {
		if i == 3 {
			parts = append(parts, fmt.Sprintf("+%d ranks", len(keys)-3))
			break
		}
		s := t.last[k]
		ph := s.Phase
		if ph == "" {
			ph = "-"
		}
		parts = append(parts, fmt.Sprintf("%s step %d %s alloc %s (peak %s) rsv %s dev %s",
			strings.TrimPrefix(k, "rank"), s.Step, ph, units.Bytes(s.AllocatedBytes),
			units.Bytes(s.MaxAllocatedBytes), units.Bytes(s.ReservedBytes), units.Bytes(s.DeviceUsedBytes)))
	}
	return "ptscope r" + strings.Join(parts, " | r")
}

// writeSummary prints the end-of-run summary: one row per captured rank.
func writeSummary(w io.Writer, res *Result, t *tailer) {
	m := res.Manifest
	how := fmt.Sprintf("exit %d", res.ExitCode)
	if res.Signal != 0 {
		how = fmt.Sprintf("killed by signal %d, %s", int(res.Signal), res.Signal)
	}
	took := units.Duration(time.Duration(m.DurationNs).Nanoseconds())
	if res.Dir == "" {
		fmt.Fprintf(w, "ptscope: no bundle (%s, %s)\n", how, took)
		return
	}
	fmt.Fprintf(w, "ptscope: bundle %s (%s, %s)\n", res.Dir, how, took)
	if line := m.SimulationSummary(); line != "" {
		fmt.Fprintf(w, "ptscope: %s\n", line)
		for _, f := range m.FakedLines() {
			fmt.Fprintf(w, "ptscope:   faked %s\n", f)
		}
	}
	if len(m.Ranks) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  rank\tdevice\tsteps\tmax allocated\tmax reserved\tmax device used\tmax host rss\tsnapshots\ttraces\toom")
	for _, r := range m.Ranks {
		p := t.peak[r.Dir]
		maxAlloc := max(r.MaxAllocatedBytes, p.MaxAllocatedBytes)
		maxRsv := max(r.MaxReservedBytes, p.MaxReservedBytes)
		dev := max(r.MaxDeviceUsedBytes, p.DeviceUsedBytes)
		rss := max(r.MaxHostRSSBytes, p.HostRSSBytes)
		oom := "-"
		if r.OOM != nil {
			oom = fmt.Sprintf("step %d", r.OOM.Step)
			if r.OOM.Count > 1 {
				oom += fmt.Sprintf(" (first of %d)", r.OOM.Count)
			}
		}
		name := r.DeviceName
		if name == "" {
			name = "?"
		}
		fmt.Fprintf(tw, "  %d\t%s\t%d\t%s\t%s\t%s\t%s\t%d\t%d\t%s\n", r.Rank, name, r.Steps,
			units.Bytes(maxAlloc), units.Bytes(maxRsv), units.Bytes(dev), units.Bytes(rss),
			len(r.Snapshots), len(r.Traces), oom)
	}
	tw.Flush()
}
