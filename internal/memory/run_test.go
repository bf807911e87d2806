package memory

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ptscope/ptscope/internal/snapshot"
)

// windowSnap builds a JSON snapshot of one 8 MiB segment at 1 MiB whose
// 1 MiB blocks at the given offsets (in MiB) are allocated at the end,
// each with the frames of its site, and a trace of the given entries
// ("alloc@2:leak": allocate the block at offset 2 from site leak;
// "free@4:tmp": free it).
func windowSnap(t *testing.T, alive map[int]string, entries ...string) *snapshot.Snapshot {
	t.Helper()
	const mib = 1 << 20
	frames := func(site string) string {
		return fmt.Sprintf(`[{"filename": "train.py", "line": %d, "name": %q}]`, len(site), site)
	}
	var blocks []string
	for off := 0; off < 8; off++ {
		if site, ok := alive[off]; ok {
			blocks = append(blocks, fmt.Sprintf(`{"address": %d, "size": %d, "requested_size": %d, "state": "active_allocated", "frames": %s}`,
				mib+off*mib, mib, mib, frames(site)))
		} else {
			blocks = append(blocks, fmt.Sprintf(`{"address": %d, "size": %d, "requested_size": 0, "state": "inactive", "frames": []}`, mib+off*mib, mib))
		}
	}
	var trace []string
	for i, e := range entries {
		var act, site string
		var off int
		if _, err := fmt.Sscanf(strings.NewReplacer("@", " ", ":", " ").Replace(e), "%s %d %s", &act, &off, &site); err != nil {
			t.Fatalf("entry %q: %v", e, err)
		}
		acts := []string{act}
		if act == "free" {
			acts = []string{"free_requested", "free_completed"}
		}
		for _, a := range acts {
			trace = append(trace, fmt.Sprintf(`{"action": %q, "addr": %d, "size": %d, "stream": 0, "time_us": %d, "frames": %s}`,
				a, mib+off*mib, mib, 1000+i, frames(site)))
		}
	}
	doc := fmt.Sprintf(`{"segments": [{"device": 0, "address": %d, "total_size": %d, "stream": 0, "segment_type": "large", "blocks": [%s]}], "device_traces": [[%s]]}`,
		mib, 8*mib, strings.Join(blocks, ", "), strings.Join(trace, ", "))
	s, err := snapshot.Read(strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// What accumulates is what steady-state windows left behind and the next
// snapshot still held from before its recording to its end: the kept
// logits of each window (at two addresses), not the gradient that each
// window frees and allocates again in the same cached block, nor a
// temporary freed in its window.
func TestWindowLeak(t *testing.T) {
	a := Analyze(windowSnap(t, map[int]string{0: "keep", 2: "grad"}, "alloc@0:keep", "alloc@2:grad", "alloc@4:tmp", "free@4:tmp"), 0, Options{})
	b := Analyze(windowSnap(t, map[int]string{0: "keep", 1: "keep", 2: "grad"}, "free@2:grad", "alloc@1:keep", "alloc@2:grad"), 0, Options{})
	c := Analyze(windowSnap(t, map[int]string{0: "keep", 1: "keep", 2: "grad"}, "free@2:grad", "alloc@2:grad"), 0, Options{})
	exit := Analyze(windowSnap(t, map[int]string{}), 0, Options{}) // at exit, the kept list is gone
	if n := len(a.Survivors()); n != 2 {
		t.Fatalf("window a: %d survivors", n)
	}
	if n := len(b.Survivors()); n != 2 {
		t.Fatalf("window b: %d survivors", n)
	}
	for _, tc := range []struct {
		name string
		held []func(uint64, int64) bool
		want string // site:bytes:count of each group
	}{
		{"witnessed by the next windows", []func(uint64, int64) bool{b.HeldThroughout(), c.HeldThroughout()}, "keep:2097152:2"},
		// the end snapshot at exit holds nothing: b's survivors do not
		// count, and a's alone do not recur
		{"the end released everything", []func(uint64, int64) bool{b.HeldThroughout(), exit.HeldThroughout()}, ""},
		// without witnesses the gradient counts too
		{"no witness", nil, "grad:2097152:2 keep:2097152:2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := WindowLeak([]*Analysis{a, b}, tc.held)
			var parts []string
			for _, g := range got {
				parts = append(parts, fmt.Sprintf("%s:%d:%d", g.Frames[0].Name, g.Bytes, g.Count))
				if g.UserFrame != 0 || g.Source == "" {
					t.Errorf("group %+v", g)
				}
			}
			if s := strings.Join(parts, " "); s != tc.want {
				t.Errorf("leak stacks %q, want %q", s, tc.want)
			}
		})
	}
	// one window alone: nothing recurs
	if got := WindowLeak([]*Analysis{b}, nil); len(got) != 0 {
		t.Errorf("one window: %+v", got)
	}
}

// The series classifier both the trace's steps and a windowed run's
// counters use.
func TestClassifySteps(t *testing.T) {
	const g = 1 << 30
	for _, tc := range []struct {
		name      string
		ends      []int64
		peaks     []int64
		want      Pattern
		perStep   int64
		growthEnd int64
	}{
		{"too few", []int64{g, 2 * g}, nil, PatternUnknown, 0, 0},
		{"flat", []int64{g, g, g, g}, []int64{2 * g, 2 * g, 2 * g, 2 * g}, PatternStable, 0, 0},
		{"leak 32 MiB a step", []int64{g, g + 32<<20, g + 64<<20, g + 96<<20}, nil, PatternLeak, 32 << 20, 96 << 20},
		{"spike", []int64{g, g, g, g}, []int64{2 * g, 2 * g, 3 * g, 2 * g}, PatternSpike, 0, 0},
		{"spike needs three known peaks", []int64{g, g, g, g}, []int64{2 * g, 3 * g}, PatternStable, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, l := classifySteps(tc.ends, tc.peaks)
			if p != tc.want {
				t.Fatalf("pattern %s, want %s", p, tc.want)
			}
			if (l != nil) != (p == PatternLeak) {
				t.Fatalf("leak %+v", l)
			}
			if l != nil && (l.PerStepBytes != tc.perStep || l.GrowthBytes != tc.growthEnd || l.Steps != len(tc.ends)) {
				t.Errorf("leak %+v", l)
			}
		})
	}
}
