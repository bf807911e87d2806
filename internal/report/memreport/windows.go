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
//	stack windows: setup+steps 0-4, 6, 10, 18 (peak); peak 1.20 GiB in window 4 of 4, the run's 1.35 GiB
//
// Windows saved in one snapshot are one group ("setup+steps 0-4"; its
// contiguous steps merged), named by the steps they hold, with the reason
// of steady-state windows after a run of groups that share it; a list too
// long for width keeps its first and last groups.
func windowsLine(in *memory.Input, width int) string {
	groups := windowGroups(in.StackWindows)
	names, snaps := groupNames(groups)
	return fitGroups("stack windows: ", names, peakTail(in, groups, snaps), width)
}

// windowGroup is the windows saved in one snapshot.
type windowGroup struct {
	snapshot   string
	setup      bool
	ranges     [][2]int
	tag        string
	view, lost bool
	bad        bool // its snapshot could not be read
	warm       bool // holds the set-up or a warm-up step: no tag
}

// windowGroups groups consecutive windows saved in one snapshot, their
// contiguous steps merged.
func windowGroups(windows []memory.StackWindow) []*windowGroup {
	var groups []*windowGroup
	for _, w := range windows {
		var g *windowGroup
		if n := len(groups); n > 0 && w.Snapshot != "" && groups[n-1].snapshot == w.Snapshot {
			g = groups[n-1]
		} else {
			g = &windowGroup{snapshot: w.Snapshot}
			groups = append(groups, g)
		}
		g.view = g.view || w.View
		g.lost = g.lost || w.Snapshot == "" || w.Error != ""
		g.bad = g.bad || w.Snapshot != "" && w.Error != ""
		switch w.Reason {
		case "setup", "warmup", "all":
			g.warm = true
		default:
			g.tag = w.Reason
		}
		if w.FirstStep < 0 {
			g.setup = true
			continue
		}
		if n := len(g.ranges); n > 0 && g.ranges[n-1][1]+1 >= w.FirstStep {
			g.ranges[n-1][1] = max(g.ranges[n-1][1], w.LastStep)
		} else {
			g.ranges = append(g.ranges, [2]int{w.FirstStep, w.LastStep})
		}
	}
	return groups
}

// groupNames names each group by the steps it holds ("setup+steps 0-4"),
// marks those unreadable or not saved, and tags the last of a run of
// steady-state groups with their reason; snaps is the snapshots saved.
func groupNames(groups []*windowGroup) (names []string, snaps map[string]bool) {
	snaps = map[string]bool{}
	names = make([]string, len(groups))
	numbered := false
	for i, g := range groups {
		var parts []string
		if g.setup {
			parts = append(parts, "setup")
		}
		for _, rg := range g.ranges {
			label := strconv.Itoa(rg[0])
			if rg[1] > rg[0] {
				label += "-" + strconv.Itoa(rg[1])
			}
			if !numbered {
				numbered = true
				if rg[1] > rg[0] || len(g.ranges) > 1 {
					label = "steps " + label
				} else {
					label = "step " + label
				}
			}
			parts = append(parts, label)
		}
		names[i] = strings.Join(parts, "+")
		if g.bad {
			names[i] += " (unreadable)"
		} else if g.lost {
			names[i] += " (not saved)"
		} else if g.tag != "" && !g.warm && (i+1 == len(groups) || groups[i+1].tag != g.tag || groups[i+1].warm || groups[i+1].lost) {
			names[i] += " (" + g.tag + ")"
		}
		if g.snapshot != "" && !g.lost {
			snaps[g.snapshot] = true
		}
	}
	return names, snaps
}

// peakTail ends the line: how many snapshots, or, for one device with a
// peak view, the peak, the window (or snapshot) it comes from, and how it
// compares with the run's own peak.
func peakTail(in *memory.Input, groups []*windowGroup, snaps map[string]bool) string {
	tail := "; " + units.Plural(len(snaps), "snapshot", "snapshots")
	if len(in.Devices) == 1 && in.Bundle != nil && in.Bundle.PeakSnapshot != "" {
		d := in.Devices[0]
		where := "in " + in.Bundle.PeakSnapshot + " (no trace)"
		for i, g := range groups {
			if g.view && d.HasHistory {
				where = fmt.Sprintf("in window %d of %d", i+1, len(snaps)) // counted from 1, as read
				break
			}
		}
		tail = fmt.Sprintf("; peak %s %s", units.Bytes(d.Peak.AllocatedBytes), where)
		if pm := d.Peak.ProcessMaxAllocatedBytes; pm > 0 && d.HasHistory {
			if float64(d.Peak.AllocatedBytes) >= 0.999*float64(pm) {
				tail += " = the run's"
			} else {
				tail += ", the run's " + units.Bytes(pm) // its step: peak-outside-windows
			}
		}
	}
	return tail
}

// fitGroups joins head, the group names and tail, keeping only the first
// and last groups when the line is too long for width.
func fitGroups(head string, names []string, tail string, width int) string {
	list := strings.Join(names, ", ")
	// keep the first and last groups when the line is too long
	for keep := len(names) - 1; visibleWidth(head+list+tail) > width && keep >= 1; keep-- {
		first := (keep + 1) / 2
		list = strings.Join(names[:first], ", ") + fmt.Sprintf(", … %d more", len(names)-keep)
		if last := keep - first; last > 0 {
			list += ", " + strings.Join(names[len(names)-last:], ", ")
		}
	}
	return head + list + tail
}
