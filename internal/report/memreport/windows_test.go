package memreport

import (
	"strings"
	"testing"

	"github.com/ptscope/ptscope/internal/memory"
	"github.com/ptscope/ptscope/internal/report"
)

func TestWindowsLine(t *testing.T) {
	const gib = 1 << 30
	win := func(first, last int, reason, snap string, view bool) memory.StackWindow {
		return memory.StackWindow{FirstStep: first, LastStep: last, Reason: reason, Snapshot: snap, View: view}
	}
	in := func(peak, run int64, ws ...memory.StackWindow) *memory.Input {
		d := &memory.Result{HasHistory: true, Peak: memory.Peak{AllocatedBytes: peak, ProcessMaxAllocatedBytes: run}}
		return &memory.Input{Devices: []*memory.Result{d}, StackWindows: ws,
			Bundle: &memory.BundleInfo{HistoryMode: "windows", PeakSnapshot: "snapshot_window0.pickle"}}
	}
	many := []memory.StackWindow{win(-1, -1, "setup", "w0", true), win(0, 2, "warmup", "w0", true)}
	for s := 16; s <= 4096; s *= 2 {
		many = append(many, win(s, s, "periodic", "w"+string(rune('a'+len(many))), false))
	}
	for _, tc := range []struct {
		name  string
		in    *memory.Input
		width int
		want  string
	}{
		{"the run's peak", in(2*gib, 2*gib, win(-1, -1, "setup", "w0", true), win(0, 2, "warmup", "w0", true),
			win(16, 16, "periodic", "w1", false), win(32, 32, "peak", "w2", false), win(40, 40, "peak", "w3", false),
			win(64, 64, "periodic", "", false)), 120,
			"stack windows: setup+steps 0-2, 16 (periodic), 32, 40 (peak), 64 (not saved); peak 2.00 GiB in window 1 of 4 = the run's"},
		{"cut to the width", in(2*gib, 2*gib, win(-1, -1, "setup", "w0", true), win(0, 2, "warmup", "w0", true),
			win(16, 16, "periodic", "w1", false), win(32, 32, "peak", "w2", false), win(40, 40, "peak", "w3", false),
			win(64, 64, "periodic", "", false)), 100,
			"stack windows: setup+steps 0-2, … 3 more, 64 (not saved); peak 2.00 GiB in window 1 of 4 = the run's"},
		{"contiguous windows in one snapshot", in(2*gib, 2*gib, win(-1, -1, "setup", "w0", true), win(0, 2, "warmup", "w0", true),
			win(3, 4, "capacity", "w0", true), win(7, 7, "capacity", "w1", false)), 100,
			"stack windows: setup+steps 0-4, 7 (capacity); peak 2.00 GiB in window 1 of 2 = the run's"},
		{"unreadable", in(gib, gib, win(-1, -1, "setup", "w0", true), memory.StackWindow{FirstStep: 6, LastStep: 6, Reason: "peak",
			Snapshot: "w1", Error: "w1: offset 2: FRAME: input ends"}), 100,
			"stack windows: setup, step 6 (unreadable); peak 1.00 GiB in window 1 of 1 = the run's"},
		{"below the run's peak", in(gib, 2*gib, win(-1, -1, "setup", "w0", false), win(5, 5, "requested", "w1", true)), 100,
			"stack windows: setup, step 5 (requested); peak 1.00 GiB in window 2 of 2, the run's 2.00 GiB"},
		{"many windows", in(gib, gib, many...), 110,
			"stack windows: setup+steps 0-2, 16, … 7 more, 4096 (periodic); peak 1.00 GiB in window 1 of 10 = the run's"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := windowsLine(tc.in, tc.width); got != tc.want {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

// A rank whose process had not finished says so under its header.
func TestUnfinishedLine(t *testing.T) {
	for _, unfinished := range []bool{false, true} {
		rep := memory.NewReport()
		rep.Inputs = append(rep.Inputs, &memory.Input{Path: "run/rank0", Format: "ptscope run bundle", Devices: []*memory.Result{},
			Bundle: &memory.BundleInfo{Rank: 0, Unfinished: unfinished}})
		var b strings.Builder
		if err := WriteText(&b, rep, report.DefaultText()); err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(b.String(), "The process had not finished (killed, or still running)"); got != unfinished {
			t.Errorf("unfinished %v: %q", unfinished, b.String())
		}
	}
}
