package fleet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/ptscope/ptscope/internal/finding"
	"github.com/ptscope/ptscope/internal/fleet/fleetgen"
	"github.com/ptscope/ptscope/internal/input"
	"github.com/ptscope/ptscope/internal/load"
	"github.com/ptscope/ptscope/internal/perf"
)

// genFleet writes 12 ranks of a real snapshot (rank 0 at 1.3x its sizes),
// a real leaking run on rank 5 and a real out-of-memory run on rank 9, a
// synthetic FSDP trace per rank with rank 7 loading its data 3x slower, and
// a truncated snapshot as rank 12. It is written once per test binary.
var genFleet = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "fleet-test-")
	if err != nil {
		return "", err
	}
	tempDirs = append(tempDirs, dir)
	snap := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "snapshots", name))
		if err != nil {
			panic(err)
		}
		r, _ := input.NewSource(0, nil, nil).NewReader(bytes.NewReader(b))
		out, _ := io.ReadAll(r)
		return out
	}
	o := fleetgen.Options{Ranks: 12, Snapshot: snap("validate_gpt2tiny_fp32.pickle.xz"),
		Special: map[int][]byte{5: snap("leak_gpt2_2l.pickle.xz"), 9: snap("oom_capacity.pickle.xz")},
		Sizes:   map[int]float64{0: 1.3}, SlowData: []int{7}, Traces: true, TraceSteps: 3, Seed: 3}
	if _, err := fleetgen.Write(dir, o); err != nil {
		return "", err
	}
	bad := filepath.Join(dir, "rank12")
	os.MkdirAll(bad, 0o755)
	return dir, os.WriteFile(filepath.Join(bad, fleetgen.SnapshotName), o.Snapshot[:len(o.Snapshot)/3], 0o644)
})

// tempDirs are the folders the generated fleets were written to, removed
// when the tests end.
var tempDirs []string

func TestMain(m *testing.M) {
	code := m.Run()
	for _, d := range tempDirs {
		os.RemoveAll(d)
	}
	os.Exit(code)
}

func fleetDir(t *testing.T) string {
	t.Helper()
	dir, err := genFleet()
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// The memory summary agrees with each rank analysed on its own, and its
// distribution with one computed here from those peaks.
func TestSummarizeMemory(t *testing.T) {
	t.Parallel()
	dir := fleetDir(t)
	in, err := Find(nil, []string{dir}, input.Snapshot)
	if err != nil {
		t.Fatal(err)
	}
	var order []int
	rep, err := Summarize(context.Background(), "analyze", in, Options{Workers: 3}, func(l *Loaded) error {
		order = append(order, l.Rank)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.IsSorted(order) || len(order) != 13 || rep.Ranks != 13 || rep.Inputs != 13 || rep.Time != nil || rep.Command != "analyze" || !rep.Fleet {
		t.Fatalf("order %v, %d ranks, %d inputs", order, rep.Ranks, rep.Inputs)
	}
	m := rep.Memory
	var peaks []float64
	for _, row := range m.Ranks {
		if row.Rank == 12 {
			if row.Device != -1 || row.Error == "" || len(rep.Errors) != 1 || rep.Errors[0].Rank != 12 {
				t.Errorf("truncated rank: %+v, errors %+v", row, rep.Errors)
			}
			continue
		}
		own, err := load.Snapshots(context.Background(), []string{row.Path}, load.SnapshotOptions{})
		if err != nil {
			t.Fatal(err)
		}
		d := own.Report.Inputs[0].Devices[0]
		if row.PeakAllocatedBytes != d.Peak.AllocatedBytes || row.PeakReservedBytes != d.Peak.ReservedBytes || row.Pattern != d.Pattern ||
			row.OOMs != len(d.OOMs) || row.Steps != len(d.Steps) || row.EfficiencyAtPeakRatio != d.Fragmentation.EfficiencyAtPeak {
			t.Errorf("rank %d: %+v, its own analysis: peak %d, reserved %d, %s, %d OOMs", row.Rank, row, d.Peak.AllocatedBytes,
				d.Peak.ReservedBytes, d.Pattern, len(d.OOMs))
		}
		peaks = append(peaks, float64(row.PeakAllocatedBytes))
	}
	sort.Float64s(peaks)
	p := m.PeakAllocated
	mean := 0.0
	for _, v := range peaks {
		mean += v / float64(len(peaks))
	}
	if p.Ranks != 12 || p.MedianBytes != int64((peaks[5]+peaks[6])/2) || p.P99Bytes != int64(peaks[11]) || p.MinBytes != int64(peaks[0]) ||
		p.MaxRank != 9 || p.MinRank != 5 || math.Abs(m.ImbalanceRatio-(peaks[11]/mean-1)) > 1e-6 {
		t.Errorf("peak distribution %+v, imbalance %.4f; peaks %v", p, m.ImbalanceRatio, peaks)
	}
	var out []string
	for _, o := range p.Outliers {
		out = append(out, fmt.Sprint(o.Rank))
	}
	// the OOM run, the leaking run (a smaller model) and rank 0 at 1.3x
	if fmt.Sprint(out) != "[9 5 0]" || math.Abs(p.Outliers[2].DeviationRatio-0.3) > 0.02 {
		t.Errorf("outliers %+v", p.Outliers)
	}
	if fmt.Sprint(m.OOMRanks) != "[9]" || fmt.Sprint(m.LeakRanks) != "[5]" || len(m.TruncatedRanks) != 0 {
		t.Errorf("oom %v leak %v truncated %v", m.OOMRanks, m.LeakRanks, m.TruncatedRanks)
	}
	for _, id := range []string{"fleet-oom", "fleet-leak", "memory-imbalance", "unreadable-inputs"} {
		found := false
		for _, f := range rep.Findings {
			if f.ID == id {
				found = f.At != nil && f.At.Rank != nil
			}
		}
		if !found {
			t.Errorf("no finding %s with a rank: %+v", id, rep.Findings)
		}
	}
	var ids []string
	for _, f := range rep.RankFindings {
		if f.Source != "memory" || f.Ranks < 1 || f.Example.At == nil || f.Example.At.Rank == nil {
			t.Errorf("rank finding %+v", f)
		}
		ids = append(ids, f.ID)
	}
	if !slices.Contains(ids, "leak") || !slices.Contains(ids, "oom-capacity") {
		t.Errorf("rank findings %v", ids)
	}
}

// The time summary agrees with perf's cross-rank comparison of the same
// traces: the same matched collectives, skews, last ranks and late
// arrivals, computed one rank at a time.
func TestSummarizeTime(t *testing.T) {
	t.Parallel()
	dir := fleetDir(t)
	in, err := Find(nil, []string{dir}, input.Trace)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Summarize(context.Background(), "trace", in, Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	all, err := load.Traces(context.Background(), []string{dir}, load.TraceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cr := all.Report.CrossRank
	tf := rep.Time
	if rep.Memory != nil || tf == nil || len(tf.Ranks) != 12 || cr == nil {
		t.Fatalf("time %v, cross rank %v", tf, cr)
	}
	c := tf.Collectives
	if c.Matched != len(cr.Collectives) || c.Matched == 0 {
		t.Fatalf("%d matched, perf %d", c.Matched, len(cr.Collectives))
	}
	for i, x := range c.MostSkewed {
		y := cr.Collectives[i]
		if x.StartSkewNS != y.StartSkewNS || x.StartNS != y.StartTimeNS || x.MaxDurNS != y.MaxDurNS || x.MinDurNS != y.MinDurNS {
			t.Errorf("collective %d: %+v, perf %+v", i, x, y)
			break
		}
	}
	for i, r := range tf.Ranks {
		pr := all.Report.Ranks[i]
		if r.Rank != pr.Rank || r.LateArrivals != cr.Ranks[i].LateArrivals || r.AverageStepNS != pr.AverageStepNS ||
			r.GPUUtilizationRatio != pr.GPUUtilizationRatio || r.Steps != len(pr.Steps) || r.WorldSize != 12 {
			t.Errorf("rank %d: %+v, perf: late %d, step %d, util %v", r.Rank, r, cr.Ranks[i].LateArrivals, pr.AverageStepNS, pr.GPUUtilizationRatio)
		}
	}
	if len(tf.Stragglers) == 0 || tf.Stragglers[0].Rank != 7 || cr.Straggler != 7 || tf.Stragglers[0].LateRatio <= 0.5 {
		t.Errorf("stragglers %+v, perf's %d", tf.Stragglers, cr.Straggler)
	}
	checkWaitsAsPerf(t, tf, cr)
	if tf.StepTime.Ranks != 12 || tf.StepTime.MaxRank != 7 || len(tf.Steps) != 3 || tf.Steps[0].Ranks != 12 {
		t.Errorf("steps %+v %+v", tf.StepTime, tf.Steps)
	}
	if !slices.ContainsFunc(rep.Findings, func(f finding.Finding) bool { return f.ID == "stragglers" && *f.At.Rank == 7 }) {
		t.Errorf("findings %+v", rep.Findings)
	}
}

func TestEachErrors(t *testing.T) {
	t.Parallel()
	dir := fleetDir(t)
	in, err := Find(nil, []string{dir}, input.Snapshot)
	if err != nil {
		t.Fatal(err)
	}
	stop := errors.New("stop")
	n := 0
	err = Each(context.Background(), in, Options{Workers: 2}, func(l *Loaded) error {
		n++
		if n == 3 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || n != 3 {
		t.Errorf("visit error: %v after %d", err, n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Each(ctx, in, Options{}, func(*Loaded) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	// an input larger than the whole budget is still read, alone
	n = 0
	err = Each(context.Background(), in, Options{Workers: 4, MaxInFlightBytes: 1}, func(l *Loaded) error {
		if l.Err == nil {
			n++
		}
		return nil
	})
	if err != nil || n != 12 {
		t.Errorf("tiny budget: %v, %d read", err, n)
	}
}

func TestByteGate(t *testing.T) {
	g := newByteGate(100)
	ctx := context.Background()
	if !g.acquire(ctx, 60) || !g.acquire(ctx, 30) {
		t.Fatal("under budget")
	}
	done := make(chan bool)
	go func() { done <- g.acquire(ctx, 20) }()
	select {
	case <-done:
		t.Fatal("admitted over budget")
	default:
	}
	g.release(60)
	if !<-done {
		t.Fatal("not admitted after a release")
	}
	cctx, cancel := context.WithCancel(ctx)
	go func() { done <- g.acquire(cctx, 90) }()
	cancel()
	if <-done {
		t.Error("admitted after cancel")
	}
}

// checkWaitsAsPerf: the fleet splits each rank's collectives into waiting
// and transfer, and names the straggler, as perf's cross-rank comparison
// of the same traces does (one rule, perf.WaitSplit).
func checkWaitsAsPerf(t *testing.T, tf *TimeFleet, cr *perf.CrossRank) {
	t.Helper()
	for i, r := range tf.Ranks {
		p := cr.Ranks[i]
		w := -1
		if len(p.WaitsFor) > 0 {
			w = p.WaitsFor[0].Rank
		}
		if r.CommunicationWaitNS != p.CommunicationWaitNS || r.CommunicationTransferNS != p.CommunicationTransferNS ||
			r.ExposedWaitNS != p.ExposedWaitNS || r.CausedWaitNS != p.CausedWaitNS || r.WaitsForRank != w {
			t.Errorf("rank %d: wait %d transfer %d exposed %d caused %d for %d; perf %d %d %d %d %d", r.Rank, r.CommunicationWaitNS,
				r.CommunicationTransferNS, r.ExposedWaitNS, r.CausedWaitNS, r.WaitsForRank, p.CommunicationWaitNS,
				p.CommunicationTransferNS, p.ExposedWaitNS, p.CausedWaitNS, w)
		}
	}
	got := -1
	if len(tf.Stragglers) > 0 {
		got = tf.Stragglers[0].Rank
		if s := tf.Stragglers[0]; s.WaitRatio != cr.StragglerWaitRatio {
			t.Errorf("straggler wait ratio %v, perf %v", s.WaitRatio, cr.StragglerWaitRatio)
		}
	}
	if got != cr.Straggler || len(tf.Stragglers) > 1 {
		t.Errorf("stragglers %+v, perf's %d", tf.Stragglers, cr.Straggler)
	}
}

// TestFleetRealStraggler: on the real 4-rank FSDP2 run where rank 0's host
// sleeps 20 ms a step (testdata/peers/real), the fleet names rank 0, as
// perf does, with each other rank's waiting split as perf splits it.
func TestFleetRealStraggler(t *testing.T) {
	t.Parallel()
	dir := filepath.Join("..", "..", "testdata", "peers", "real", "fsdp2_slow0")
	in, err := Find(nil, []string{dir}, input.Trace)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Summarize(context.Background(), "trace", in, Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	all, err := load.Traces(context.Background(), []string{dir}, load.TraceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tf, cr := rep.Time, all.Report.CrossRank
	if tf == nil || cr == nil || len(tf.Ranks) != 4 || cr.Straggler != 0 {
		t.Fatalf("time %+v, cross rank %+v", tf, cr)
	}
	checkWaitsAsPerf(t, tf, cr)
	for _, r := range tf.Ranks[1:] {
		// rank 0 slept 60 ms over the three profiled steps
		if r.WaitsForRank != 0 || r.ExposedWaitNS < 60_000_000 {
			t.Errorf("rank %d waits for %d, exposed %d ns", r.Rank, r.WaitsForRank, r.ExposedWaitNS)
		}
	}
	if !slices.ContainsFunc(rep.Findings, func(f finding.Finding) bool {
		return f.ID == "stragglers" && *f.At.Rank == 0 && strings.Contains(f.Message, "The other ranks wait for rank 0")
	}) {
		t.Errorf("findings %+v", rep.Findings)
	}
}
