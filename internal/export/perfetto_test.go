package export

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// chromeTrace is what checkChromeTrace found in a Trace Event Format file.
type chromeTrace struct {
	events   int
	byPhase  map[string]int
	counters map[string]int   // counter events by track ("name arg")
	maxCtr   map[string]int64 // highest value by track
	names    map[string]int   // events by name
	meta     map[string]any   // the top-level object without traceEvents
}

// checkChromeTrace validates data against the Chrome Trace Event Format as
// Perfetto's JSON importer and chrome://tracing read it: an object with a
// traceEvents array (or a bare array) of objects, each with a known ph;
// X with a non-negative dur; B/E, X, i, C and flow events with a numeric
// ts; C with numeric args (one track per arg); M naming a process or
// thread; pid and tid numbers or strings.
func checkChromeTrace(t *testing.T, data []byte) *chromeTrace {
	t.Helper()
	var top map[string]json.RawMessage
	var events []map[string]any
	if err := json.Unmarshal(data, &top); err == nil {
		raw, ok := top["traceEvents"]
		if !ok {
			t.Fatal("no traceEvents array")
		}
		if err := json.Unmarshal(raw, &events); err != nil {
			t.Fatalf("traceEvents: %v", err)
		}
	} else if err := json.Unmarshal(data, &events); err != nil {
		t.Fatalf("neither a trace object nor an event array: %v", err)
	}
	ct := &chromeTrace{events: len(events), byPhase: map[string]int{}, counters: map[string]int{},
		maxCtr: map[string]int64{}, names: map[string]int{}, meta: map[string]any{}}
	for k, v := range top {
		if k != "traceEvents" {
			var x any
			json.Unmarshal(v, &x)
			ct.meta[k] = x
		}
	}
	num := func(e map[string]any, k string) (float64, bool) {
		v, ok := e[k].(float64)
		return v, ok
	}
	for i, e := range events {
		fail := func(format string, a ...any) {
			t.Fatalf("event %d %v: %s", i, e, fmt.Sprintf(format, a...))
		}
		ph, _ := e["ph"].(string)
		ct.byPhase[ph]++
		name, _ := e["name"].(string)
		ct.names[name]++
		for _, k := range []string{"pid", "tid"} {
			switch e[k].(type) {
			case float64, string, nil:
			default:
				fail("%s is neither a number nor a string", k)
			}
		}
		switch ph {
		case "M":
			switch name {
			case "process_name", "thread_name", "process_sort_index", "thread_sort_index", "process_labels":
			default:
				fail("unknown metadata %q", name)
			}
			if _, ok := e["args"].(map[string]any); !ok {
				fail("metadata without args")
			}
			continue
		case "X", "B", "E", "i", "I", "C", "s", "t", "f", "b", "e", "n", "R", "O", "N", "D":
		default:
			fail("unknown ph %q", ph)
		}
		if _, ok := num(e, "ts"); !ok {
			fail("no numeric ts")
		}
		switch ph {
		case "X":
			if d, ok := num(e, "dur"); !ok || d < 0 {
				fail("complete event without a non-negative dur")
			}
		case "i", "I":
			if s, ok := e["s"].(string); ok && s != "g" && s != "p" && s != "t" {
				fail("instant scope %q", s)
			}
		case "C":
			args, ok := e["args"].(map[string]any)
			if !ok || len(args) == 0 {
				fail("counter without args")
			}
			for k, v := range args {
				f, ok := v.(float64)
				if !ok {
					fail("counter arg %s is not a number", k)
				}
				track := name + " " + k
				ct.counters[track]++
				if ct.counters[track] == 1 || int64(f) > ct.maxCtr[track] {
					ct.maxCtr[track] = int64(f)
				}
			}
		}
	}
	return ct
}

func TestPerfetto(t *testing.T) { checkPerfetto(t, testMemory(t), validateTorchPeak) }

// checkPerfetto: the Chrome trace of m has counter tracks of allocated and
// reserved bytes (allocated reaching the peak, within 1% of torchPeak),
// per-category tracks, one slice per step and phase slices.
func checkPerfetto(t *testing.T, m *Memory, torchPeak int64) {
	var buf bytes.Buffer
	sum, err := WritePerfetto(&buf, []*Memory{m}, PerfettoOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ct := checkChromeTrace(t, buf.Bytes())
	if ct.counters["allocated bytes"] == 0 || ct.counters["reserved bytes"] == 0 {
		t.Fatalf("counter tracks %v", ct.counters)
	}
	if got, want := ct.maxCtr["allocated bytes"], m.AllocatedAt(m.Peak); got != want {
		t.Errorf("allocated track peaks at %d B, the peak is %d B", got, want)
	}
	if !within(ct.maxCtr["allocated bytes"], torchPeak, 0.01) {
		t.Errorf("allocated track peak %d B not within 1%% of torch's %d B", ct.maxCtr["allocated bytes"], torchPeak)
	}
	cats := 0
	for track := range ct.counters {
		if strings.HasPrefix(track, "allocated by category ") {
			cats++
		}
	}
	if ct.counters["allocated by category activation"] == 0 || cats < 3 {
		t.Errorf("category tracks: %v", ct.counters)
	}
	if sum.Thinned || ct.counters["allocated bytes"] < m.Entries()/2 {
		t.Errorf("a %d-entry trace should keep every point: %d points, thinned %v", m.Entries(), ct.counters["allocated bytes"], sum.Thinned)
	}
	steps := 0
	for _, st := range m.Phases.Steps {
		steps += ct.names[st.Name]
	}
	if len(m.Phases.Steps) == 0 || steps != len(m.Phases.Steps) {
		t.Errorf("%d step slices for %d steps", steps, len(m.Phases.Steps))
	}
	for _, ph := range []string{"forward", "backward", "optimizer"} {
		if ct.names[ph] == 0 {
			t.Errorf("no %s phase slice", ph)
		}
	}
	if ct.names["peak allocated"] != 1 {
		t.Errorf("%d peak markers", ct.names["peak allocated"])
	}
	if ct.byPhase["C"] != sum.Counters || ct.byPhase["X"] != sum.Slices || ct.byPhase["i"] != sum.Instants {
		t.Errorf("summary %+v, file %v", sum, ct.byPhase)
	}
}

// TestPerfettoThinned: with few points per track, the allocated track keeps
// the peak exactly and stays within the bound.
func TestPerfettoThinned(t *testing.T) {
	m := testMemory(t)
	var buf bytes.Buffer
	sum, err := WritePerfetto(&buf, []*Memory{m}, PerfettoOptions{MaxPoints: 200})
	if err != nil {
		t.Fatal(err)
	}
	ct := checkChromeTrace(t, buf.Bytes())
	if !sum.Thinned {
		t.Error("not thinned")
	}
	if n := ct.counters["allocated bytes"]; n > 201 || n < 100 {
		t.Errorf("%d allocated points for a bound of 200", n)
	}
	if got, want := ct.maxCtr["allocated bytes"], m.AllocatedAt(m.Peak); got != want {
		t.Errorf("thinned allocated track peaks at %d B, the peak is %d B", got, want)
	}
	if ct.counters["allocated by category activation"] != ct.counters["allocated bytes"] {
		t.Errorf("category points %d, allocated points %d", ct.counters["allocated by category activation"], ct.counters["allocated bytes"])
	}
}

func TestSamplePoints(t *testing.T) {
	for _, c := range []struct {
		v       []int64
		max     int
		want    []int
		thinned bool
	}{
		{v: nil, max: 10},
		{v: []int64{5}, max: 10, want: []int{0}},
		{v: []int64{1, 1, 2, 2, 2, 1}, max: 10, want: []int{0, 2, 5}},
		{v: []int64{1, 1, 1, 1}, max: 10, want: []int{0, 3}},
		// two buckets of 4: min and max of each, then the last entry
		{v: []int64{3, 9, 1, 4, 4, 2, 8, 5}, max: 4, want: []int{1, 2, 5, 6, 7}, thinned: true},
	} {
		got, thinned := samplePoints(c.v, c.max)
		if fmt.Sprint(got) != fmt.Sprint(c.want) || thinned != c.thinned {
			t.Errorf("samplePoints(%v, %d) = %v %v, want %v %v", c.v, c.max, got, thinned, c.want, c.thinned)
		}
	}
}
