package memreport

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/ptscope/ptscope/internal/memory"
	"github.com/ptscope/ptscope/internal/units"
)

// windowsLine is the one line that says which steps of a run recorded in
// stack windows have a snapshot, and where the peak view comes from:
//
//	stack windows: setup+steps 0-2, 7-8 (peak), 16; 3 snapshots; peak 1.84 GiB in window 1 = the run's peak
//
// (or "(the run's: X)" when the run peaked higher).
//
// Windows saved in one snapshot are joined with "+"; a list too long for
// width keeps its first and last windows.
func windowsLine(in *memory.Input, width int) string {
	type group struct {
		snapshot string
		parts    []string
		view     bool
	}
	var groups []*group
	numbered := false
	for _, w := range in.StackWindows {
		var g *group
		if n := len(groups); n > 0 && w.Snapshot != "" && groups[n-1].snapshot == w.Snapshot {
			g = groups[n-1]
		} else {
			g = &group{snapshot: w.Snapshot}
			groups = append(groups, g)
		}
		g.view = g.view || w.View
		label := "setup"
		if w.FirstStep >= 0 {
			label = strconv.Itoa(w.FirstStep)
			if w.LastStep > w.FirstStep {
				label += "-" + strconv.Itoa(w.LastStep)
			}
			if !numbered {
				label = "steps " + label
				if w.LastStep == w.FirstStep {
					label = "step " + strconv.Itoa(w.FirstStep)
				}
				numbered = true
			}
		}
		switch w.Reason {
		case "peak", "capacity":
			label += " (" + w.Reason + ")"
		}
		if w.Snapshot == "" {
			label += " (not saved)"
		} else if w.Error != "" {
			label += " (unreadable)"
		}
		g.parts = append(g.parts, label)
	}
	snaps := map[string]bool{}
	names := make([]string, len(groups))
	for i, g := range groups {
		names[i] = strings.Join(g.parts, "+")
		if g.snapshot != "" {
			snaps[g.snapshot] = true
		}
	}
	tail := "; " + plural(len(snaps), "snapshot")
	if len(in.Devices) == 1 && in.Bundle != nil && in.Bundle.PeakSnapshot != "" {
		d := in.Devices[0]
		where := "in " + in.Bundle.PeakSnapshot
		for i, g := range groups {
			if g.view {
				where = "in window " + strconv.Itoa(i)
				break
			}
		}
		if !d.HasHistory {
			where = "(no window's snapshot has a trace)"
		}
		tail += fmt.Sprintf("; peak %s %s", units.Bytes(d.Peak.AllocatedBytes), where)
		if pm := d.Peak.ProcessMaxAllocatedBytes; pm > 0 && d.HasHistory {
			if float64(d.Peak.AllocatedBytes) >= 0.999*float64(pm) {
				tail += " = the run's peak"
			} else {
				tail += " (the run's: " + units.Bytes(pm) + ")"
			}
		}
	}
	head := "stack windows: "
	list := strings.Join(names, ", ")
	// keep the first and last windows when the line is too long
	for keep := len(names) - 1; visibleWidth(head+list+tail) > width && keep >= 2; keep-- {
		first := (keep + 1) / 2
		last := keep - first
		list = strings.Join(names[:first], ", ") + fmt.Sprintf(", … %d more, ", len(names)-keep) + strings.Join(names[len(names)-last:], ", ")
	}
	return head + list + tail
}

// plural is "1 thing" or "n things".
func plural(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return units.Count(int64(n)) + " " + thing + "s"
}
