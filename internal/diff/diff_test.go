package diff

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ptscope/ptscope/internal/export"
	"github.com/ptscope/ptscope/internal/input"
	"github.com/ptscope/ptscope/internal/load"
	"github.com/ptscope/ptscope/internal/memory"
	"github.com/ptscope/ptscope/internal/testfixture"
)

// What torch measured in the processes that wrote the committed snapshots
// (testdata/snapshots/facts.jsonl): max_memory_allocated.
var torchPeak = map[string]int64{
	"validate_gpt2tiny_fp32.pickle.xz": 1414996992,
	"leak_gpt2_2l.pickle.xz":           782174720,
	"expandable_gpt2_2l.pickle.xz":     415645696,
}

func snap(t testing.TB, name string) string { return testfixture.Testdata(t, "snapshots", name) }

func memInput(t testing.TB, paths ...string) Input {
	t.Helper()
	set, err := load.Snapshots(context.Background(), paths, load.SnapshotOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return Input{Path: paths[0], Memory: set.Report}
}

func traceInput(t testing.TB, paths ...string) Input {
	t.Helper()
	set, err := load.Traces(context.Background(), paths, load.TraceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return Input{Path: paths[0], Trace: set.Report}
}

func within(got, want int64, frac float64) bool {
	d := float64(got - want)
	if d < 0 {
		d = -d
	}
	w := float64(want)
	if w < 0 {
		w = -w
	}
	return d <= frac*w
}

// TestMemoryPeaksAgainstTorch: the diff of two real snapshots reports each
// side's peak and the change within 1% of what torch measured.
func TestMemoryPeaksAgainstTorch(t *testing.T) {
	t.Parallel()
	for _, pair := range [][2]string{
		{"validate_gpt2tiny_fp32.pickle.xz", "expandable_gpt2_2l.pickle.xz"},
		{"validate_gpt2tiny_fp32.pickle.xz", "leak_gpt2_2l.pickle.xz"},
		{"leak_gpt2_2l.pickle.xz", "expandable_gpt2_2l.pickle.xz"},
	} {
		rep := Compare(memInput(t, snap(t, pair[0])), memInput(t, snap(t, pair[1])))
		if len(rep.Memory) != 1 || len(rep.Unmatched) != 0 || len(rep.Trace) != 0 {
			t.Fatalf("%v: %d memory pairs, %d unmatched", pair, len(rep.Memory), len(rep.Unmatched))
		}
		p := rep.Memory[0].PeakAllocated
		ta, tb := torchPeak[pair[0]], torchPeak[pair[1]]
		if !within(p.A, ta, 0.01) || !within(p.B, tb, 0.01) || !within(p.Delta, tb-ta, 0.01) {
			t.Errorf("%v: peaks %d -> %d (delta %d); torch %d -> %d (delta %d)", pair, p.A, p.B, p.Delta, ta, tb, tb-ta)
		}
		if p.Change == nil || !within(int64(*p.Change*1e6), int64(float64(tb-ta)/float64(ta)*1e6), 0.01) {
			t.Errorf("%v: change %v", pair, p.Change)
		}
	}
}

// TestMemoryIdentity: a snapshot against itself changes nothing, and the
// groups are complete (every category and stack of the result).
func TestMemoryIdentity(t *testing.T) {
	in := memInput(t, snap(t, "validate_gpt2tiny_fp32.pickle.xz"))
	rep := Compare(in, in)
	d := rep.Memory[0]
	res := in.Memory.Inputs[0].Devices[0]
	if d.PeakAllocated.Delta != 0 || d.PeakAllocated.A != res.Peak.AllocatedBytes || *d.PeakAllocated.Change != 0 {
		t.Errorf("peak %+v", d.PeakAllocated)
	}
	if len(d.Categories) != len(res.Categories) || len(d.Stacks) != len(res.Stacks) || len(d.Sources) != len(res.Sources) {
		t.Errorf("rows: %d categories, %d stacks, %d sources; result has %d, %d, %d", len(d.Categories), len(d.Stacks),
			len(d.Sources), len(res.Categories), len(res.Stacks), len(res.Sources))
	}
	for _, rows := range [][]GroupRow{d.Categories, d.Groups, d.Sources, d.Modules} {
		for _, r := range rows {
			if r.Status != Same || r.Bytes.Delta != 0 {
				t.Errorf("%+v changed", r)
			}
		}
	}
	for _, s := range d.Stacks {
		if s.Status != Same {
			t.Errorf("stack %v: %v", s.Frames, s.Status)
		}
	}
	if len(d.Phases) < 3 || len(rep.Findings) != 0 || len(d.FindingsAppeared) != 0 || len(d.FindingsResolved) != 0 {
		t.Errorf("%d phases, findings %v, appeared %v, resolved %v", len(d.Phases), rep.Findings, d.FindingsAppeared, d.FindingsResolved)
	}
	var sum int64
	for _, s := range d.Stacks {
		sum += s.Bytes.A
	}
	if sum != res.Peak.AllocatedBytes {
		t.Errorf("stacks add up to %d B, the peak is %d B", sum, res.Peak.AllocatedBytes)
	}
}

// TestMemoryAntisymmetry: B against A is A against B with every change
// negated, row for row.
func TestMemoryAntisymmetry(t *testing.T) {
	a, b := memInput(t, snap(t, "validate_gpt2tiny_fp32.pickle.xz")), memInput(t, snap(t, "leak_gpt2_2l.pickle.xz"))
	x, y := Compare(a, b).Memory[0], Compare(b, a).Memory[0]
	if x.PeakAllocated.Delta != -y.PeakAllocated.Delta || x.EfficiencyAtPeak.Delta != -y.EfficiencyAtPeak.Delta {
		t.Errorf("peak %+v vs %+v", x.PeakAllocated, y.PeakAllocated)
	}
	deltas := func(rows []StackRow) map[string]int64 {
		m := map[string]int64{}
		for i := range rows {
			m[stackKey(&rows[i].Stack)+rows[i].Category.String()] = rows[i].Bytes.Delta
		}
		return m
	}
	dx, dy := deltas(x.Stacks), deltas(y.Stacks)
	if len(dx) != len(dy) {
		t.Fatalf("%d vs %d stacks", len(dx), len(dy))
	}
	news, gones := 0, 0
	for k, v := range dx {
		if dy[k] != -v {
			t.Errorf("stack delta %d vs %d", v, dy[k])
		}
	}
	for _, s := range x.Stacks {
		switch s.Status {
		case New:
			news++
		case Gone:
			gones++
		}
	}
	for _, s := range y.Stacks {
		switch s.Status {
		case New:
			gones--
		case Gone:
			news--
		}
	}
	if news != 0 || gones != 0 {
		t.Errorf("new/gone do not swap: %d %d", news, gones)
	}
	ids := func(r *Report) string {
		var s []string
		for _, f := range r.Findings {
			s = append(s, f.Severity.String()+" "+f.ID)
		}
		return strings.Join(s, ", ")
	}
	if got := ids(Compare(a, b)); got != "critical leak-appeared, info peak-decrease" {
		t.Errorf("A vs B: %s", got)
	}
	if got := ids(Compare(b, a)); got != "critical peak-increase, info leak-resolved" {
		t.Errorf("B vs A: %s", got)
	}
}

// TestLeakAppeared: the leaking run against a stable one.
func TestLeakAppeared(t *testing.T) {
	a, b := memInput(t, snap(t, "validate_gpt2tiny_fp32.pickle.xz")), memInput(t, snap(t, "leak_gpt2_2l.pickle.xz"))
	rep := Compare(a, b)
	d := rep.Memory[0]
	if d.Pattern.A != memory.PatternStable || d.Pattern.B != memory.PatternLeak || d.LeakPerStep.B <= 0 || d.LeakPerStep.A != 0 {
		t.Fatalf("pattern %+v, leak %+v", d.Pattern, d.LeakPerStep)
	}
	found := false
	for _, f := range rep.Findings {
		found = found || f.ID == "leak-appeared"
	}
	if !found {
		t.Errorf("no leak-appeared finding: %v", rep.Findings)
	}
	leakFinding := false
	for _, f := range d.FindingsAppeared {
		leakFinding = leakFinding || f.ID == "leak"
	}
	if !leakFinding {
		t.Errorf("B's own leak finding is not among those that appeared: %v", d.FindingsAppeared)
	}
}

// TestRankFolders: two folders of ranks pair by rank; a rank on one side
// only is reported unmatched.
func TestRankFolders(t *testing.T) {
	da, db := t.TempDir(), t.TempDir()
	cp := func(src, dst string) {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(dst, b, 0o644)
	}
	cp(snap(t, "validate_gpt2tiny_fp32.pickle.xz"), filepath.Join(da, "rank0.pickle.xz"))
	cp(snap(t, "leak_gpt2_2l.pickle.xz"), filepath.Join(da, "rank1.pickle.xz"))
	cp(snap(t, "expandable_gpt2_2l.pickle.xz"), filepath.Join(db, "rank1.pickle.xz"))
	cp(snap(t, "validate_gpt2tiny_fp32.pickle.xz"), filepath.Join(db, "rank0.pickle.xz"))
	cp(snap(t, "validate_gpt2tiny_fp32.pickle.xz"), filepath.Join(db, "rank2.pickle.xz"))
	rep := Compare(memInput(t, da), memInput(t, db))
	if len(rep.Memory) != 2 || len(rep.Unmatched) != 1 || rep.Unmatched[0].Side != "b" || rep.Unmatched[0].Key != "rank 2, rank2.pickle.xz, device 0" {
		t.Fatalf("pairs %d, unmatched %+v", len(rep.Memory), rep.Unmatched)
	}
	for _, d := range rep.Memory {
		switch d.A.Rank {
		case 0:
			if d.PeakAllocated.Delta != 0 || d.B.Rank != 0 {
				t.Errorf("rank 0: %+v", d.PeakAllocated)
			}
		case 1:
			if d.PeakAllocated.A != 782174720 || d.PeakAllocated.B != 415645696 || d.B.Rank != 1 {
				t.Errorf("rank 1: %+v", d.PeakAllocated)
			}
		default:
			t.Errorf("rank %d paired", d.A.Rank)
		}
	}
}

func bundleTracePath(t testing.TB) string {
	return testfixture.Testdata(t, "bundles", "lm_small_bf16", "rank0", "trace_step4.pt.trace.json.gz")
}

// TestTraceIdentity: a trace against itself changes nothing.
func TestTraceIdentity(t *testing.T) {
	in := traceInput(t, bundleTracePath(t))
	rep := Compare(in, in)
	if len(rep.Trace) != 1 || len(rep.Memory) != 0 {
		t.Fatalf("%d trace pairs, %d memory pairs", len(rep.Trace), len(rep.Memory))
	}
	d := rep.Trace[0]
	r := &in.Trace.Ranks[0]
	if d.AverageStep.A != r.AverageStepNS || d.AverageStep.Delta != 0 || len(d.Operators) != len(r.Operators) || len(d.Kernels) != len(r.Kernels) {
		t.Errorf("step %+v, %d operators of %d, %d kernels of %d", d.AverageStep, len(d.Operators), len(r.Operators), len(d.Kernels), len(r.Kernels))
	}
	for _, o := range d.Operators {
		if o.Status != Same {
			t.Errorf("operator %s %v", o.Name, o.Status)
		}
		if o.HostTotal.Delta != 0 || o.DeviceTotal.Delta != 0 || o.Calls.Delta != 0 {
			t.Errorf("operator %s changed: %+v", o.Name, o)
		}
	}
	if len(rep.Findings) != 0 {
		t.Errorf("findings %v", rep.Findings)
	}
}

// TestTraceShortEventsDropped: B is A's trace without its events shorter
// than 20 us (ptscope export perfetto --min-duration): the operators and
// kernels that only ran short are gone, the others match by name.
func TestTraceShortEventsDropped(t *testing.T) {
	path := bundleTracePath(t)
	var buf bytes.Buffer
	_, err := export.TrimTrace(context.Background(), func() (io.ReadCloser, error) { return input.NewSource(0, nil, nil).Open(path) }, &buf,
		export.TraceTrim{MinDuration: 20_000})
	if err != nil {
		t.Fatal(err)
	}
	short := filepath.Join(t.TempDir(), "short.pt.trace.json")
	if err := os.WriteFile(short, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	a, b := traceInput(t, path), traceInput(t, short)
	d := Compare(a, b).Trace[0]
	var gone, same, shrunk int
	for _, k := range d.Kernels {
		switch k.Status {
		case Gone:
			gone++
			if k.Time.B != 0 || k.Mean.A >= 20_000 {
				t.Errorf("gone kernel %s: %+v", k.Name, k)
			}
		case Same:
			same++
		case Shrunk:
			shrunk++
		case New, Grown:
			t.Errorf("kernel %s %v", k.Name, k.Status)
		}
	}
	if gone == 0 || same+shrunk == 0 {
		t.Errorf("%d kernels gone, %d kept", gone, same+shrunk)
	}
	// every row is a name of A or of B
	names := map[string]bool{}
	for _, k := range a.Trace.Ranks[0].Kernels {
		names[k.Name] = true
	}
	for _, k := range d.Kernels {
		if !names[k.Name] {
			t.Errorf("kernel %s is in neither trace", k.Name)
		}
	}
	// regressions first, then improvements, each largest first, then
	// the unchanged
	for i := 1; i < len(d.Kernels); i++ {
		x, y := d.Kernels[i-1].Time.Delta, d.Kernels[i].Time.Delta
		ok := (x > 0 && (y <= 0 || y <= x)) || (x < 0 && (y == 0 || (y < 0 && y >= x))) || (x == 0 && y == 0)
		if !ok {
			t.Fatalf("kernels out of order at %d: %d then %d", i, x, y)
		}
	}
}

// TestBundles: two bundles compare both their snapshots and their traces.
func TestBundles(t *testing.T) {
	dir := testfixture.Testdata(t, "bundles", "lm_small_bf16")
	mem, tr := memInput(t, dir), traceInput(t, dir)
	in := Input{Path: dir, Memory: mem.Memory, Trace: tr.Trace}
	rep := Compare(in, in)
	if len(rep.Memory) != 1 || len(rep.Trace) != 1 || rep.Memory[0].A.Rank != 0 || rep.Trace[0].B.Rank != 0 {
		t.Fatalf("memory %d, trace %d", len(rep.Memory), len(rep.Trace))
	}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("the document does not read back: %v", err)
	}
	again, _ := json.Marshal(&back)
	if !bytes.Equal(b, again) {
		t.Error("the document does not round-trip")
	}
}

func TestRankOf(t *testing.T) {
	for p, want := range map[string]int{
		"runs/rank3.pickle": 3, "x/rank_12/snapshot.pickle": 12, "RANK-2.pt.trace.json": 2,
		"a/b/c/snap.pickle": -1, "rank7/a/b/c.pickle": -1,
	} {
		if got := rankOf(p); got != want {
			t.Errorf("rankOf(%q) = %d, want %d", p, got, want)
		}
	}
}

// TestSharedFixtures: the GPT-2 small inference (bf16) and training (fp32)
// snapshots of ../shared/fixtures (torch: 1,111,965,696 B and
// 5,538,270,208 B), each peak and the change within 1%; and the DataLoader
// trace against the committed bundle's trace, paired though their ranks
// have no name in common.
func TestSharedFixtures(t *testing.T) {
	fwd, train := testfixture.Path(t, "gpt2s_fwd_bf16_b4_ctx512.pickle"), testfixture.Path(t, "gpt2s_train_fp32_b4_ctx512.pickle")
	rep := Compare(memInput(t, fwd), memInput(t, train))
	p := rep.Memory[0].PeakAllocated
	const ta, tb = 1111965696, 5538270208
	if !within(p.A, ta, 0.01) || !within(p.B, tb, 0.01) || !within(p.Delta, tb-ta, 0.01) {
		t.Errorf("peaks %d -> %d (%d); torch %d -> %d (%d)", p.A, p.B, p.Delta, int64(ta), int64(tb), int64(tb-ta))
	}
	if rep.Findings[0].ID != "peak-increase" {
		t.Errorf("findings %v", rep.Findings)
	}
	tr := Compare(traceInput(t, bundleTracePath(t)), traceInput(t, testfixture.Path(t, "gpt2_6l_dataloader_bottleneck.pt.trace.json.gz")))
	if len(tr.Trace) != 1 || tr.Trace[0].DataLoader.B <= tr.Trace[0].DataLoader.A {
		t.Errorf("trace pairs %d", len(tr.Trace))
	}
}

// TestTraceRankFolders: two folders of traces pair by rank.
func TestTraceRankFolders(t *testing.T) {
	full := bundleTracePath(t)
	var buf bytes.Buffer
	if _, err := export.TrimTrace(context.Background(), func() (io.ReadCloser, error) { return input.NewSource(0, nil, nil).Open(full) }, &buf,
		export.TraceTrim{MinDuration: 20_000}); err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(mustOpen(t, full))
	if err != nil {
		t.Fatal(err)
	}
	da, db := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(da, "rank0.pt.trace.json"), raw, 0o644)
	os.WriteFile(filepath.Join(da, "rank1.pt.trace.json"), buf.Bytes(), 0o644)
	os.WriteFile(filepath.Join(db, "rank0.pt.trace.json"), buf.Bytes(), 0o644)
	os.WriteFile(filepath.Join(db, "rank1.pt.trace.json"), raw, 0o644)
	rep := Compare(traceInput(t, da), traceInput(t, db))
	if len(rep.Trace) != 2 || len(rep.Unmatched) != 0 {
		t.Fatalf("%d pairs, unmatched %+v", len(rep.Trace), rep.Unmatched)
	}
	for _, d := range rep.Trace {
		if d.A.Rank != d.B.Rank || filepath.Base(d.A.Path) != filepath.Base(d.B.Path) {
			t.Errorf("paired %s (rank %d) with %s (rank %d)", d.A.Path, d.A.Rank, d.B.Path, d.B.Rank)
		}
		faster := d.AverageStep.Delta < 0
		if faster != (d.A.Rank == 0) {
			t.Errorf("rank %d: step %+v", d.A.Rank, d.AverageStep)
		}
	}
}

func mustOpen(t *testing.T, path string) io.Reader {
	t.Helper()
	r, err := input.NewSource(0, nil, nil).Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}
