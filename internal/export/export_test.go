package export

import (
	"testing"

	"github.com/ptscope/ptscope/internal/memory"
	"github.com/ptscope/ptscope/internal/snapshot"
	"github.com/ptscope/ptscope/internal/testfixture"
)

// The GPT-2 small fp32 training fixture (../shared); torch measured
// max_memory_allocated = 5,538,270,208 B in the process.
const (
	gpt2Train          = "gpt2s_train_fp32_b4_ctx512.pickle"
	gpt2TrainTorchPeak = 5538270208
)

// The committed GPT-2 tiny fp32 training snapshot, recorded from before
// the model was made (testdata/snapshots/facts.jsonl: torch measured
// max_memory_allocated = 1,414,996,992 B).
const (
	validateSnap      = "validate_gpt2tiny_fp32.pickle.xz"
	validateTorchPeak = 1414996992
)

// loadMemory reads a snapshot and analyses device d as the CLI does.
func loadMemory(t testing.TB, path string, d int) *Memory {
	t.Helper()
	s, err := snapshot.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return FromAnalysis(memory.Analyze(s, d, memory.Options{}), path)
}

func fixtureMemory(t testing.TB) *Memory {
	return loadMemory(t, testfixture.Path(t, gpt2Train), 0)
}

// testMemory is the committed real snapshot every test can use.
func testMemory(t testing.TB) *Memory {
	return loadMemory(t, testfixture.Testdata(t, "snapshots", validateSnap), 0)
}

// within reports whether got is within frac of want.
func within(got, want int64, frac float64) bool {
	d := float64(got - want)
	if d < 0 {
		d = -d
	}
	return d <= frac*float64(want)
}

func TestParsePoint(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Point
		bad  bool
	}{
		{in: "peak", want: Point{Kind: AtPeak}},
		{in: "", want: Point{Kind: AtPeak}},
		{in: "END", want: Point{Kind: AtEnd}},
		{in: "start", want: Point{Kind: AtStart}},
		{in: "560", want: Point{Kind: AtEvent, N: 560}},
		{in: "event:7", want: Point{Kind: AtEvent, N: 7}},
		{in: "-1", want: Point{Kind: AtEvent, N: -1}},
		{in: "step:2", want: Point{Kind: AtStep, N: 2}},
		{in: "1.5s", want: Point{Kind: AtOffset, Offset: 1500e6}},
		{in: "250ms", want: Point{Kind: AtOffset, Offset: 250e6}},
		{in: "step:x", bad: true},
		{in: "-2", bad: true},
		{in: "soon", bad: true},
		{in: "-1s", bad: true},
	} {
		got, err := ParsePoint(c.in)
		if (err != nil) != c.bad {
			t.Errorf("ParsePoint(%q) error %v, want error %v", c.in, err, c.bad)
			continue
		}
		if !c.bad && got != c.want {
			t.Errorf("ParsePoint(%q) = %+v, want %+v", c.in, got, c.want)
		}
	}
}

func TestResolve(t *testing.T) {
	m := testMemory(t)
	n := m.Entries()
	for _, c := range []struct {
		p    Point
		want int
		bad  bool
	}{
		{p: Point{Kind: AtPeak}, want: m.Peak},
		{p: Point{Kind: AtEnd}, want: n - 1},
		{p: Point{Kind: AtStart}, want: -1},
		{p: Point{Kind: AtEvent, N: 12}, want: 12},
		{p: Point{Kind: AtEvent, N: n}, bad: true},
		{p: Point{Kind: AtStep, N: 1}, want: m.Phases.Steps[1].PeakIdx},
		{p: Point{Kind: AtStep, N: len(m.Phases.Steps)}, bad: true},
		{p: Point{Kind: AtOffset}, want: lastAtTime(m.Replay.Timeline.TimeUS, m.Replay.Timeline.TimeUS[0])},
		{p: Point{Kind: AtOffset, Offset: 1e12}, want: n - 1},
	} {
		got, desc, err := m.Resolve(c.p)
		if (err != nil) != c.bad {
			t.Errorf("Resolve(%+v) error %v, want error %v", c.p, err, c.bad)
			continue
		}
		if !c.bad && (got != c.want || desc == "") {
			t.Errorf("Resolve(%+v) = %d %q, want %d", c.p, got, desc, c.want)
		}
	}
	// The peak of a step is the highest allocated entry inside it.
	st := m.Phases.Steps[1]
	i, _, _ := m.Resolve(Point{Kind: AtStep, N: 1})
	for j := st.Start; j < st.End; j++ {
		if m.AllocatedAt(j) > m.AllocatedAt(i) {
			t.Fatalf("step 1 peak at %d (%d B) but entry %d holds %d B", i, m.AllocatedAt(i), j, m.AllocatedAt(j))
		}
	}
}

// lastAtTime is the entry before the first whose time exceeds t.
func lastAtTime(ts []int64, t int64) int {
	for i, v := range ts {
		if v > t {
			return i - 1
		}
	}
	return len(ts) - 1
}
