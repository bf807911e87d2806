package memory

import (
	"compress/gzip"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// torch.profiler's categories in export_memory_timeline's raw order.
var profilerCats = []string{"PARAMETER", "OPTIMIZER_STATE", "INPUT", "TEMPORARY", "ACTIVATION", "GRADIENT", "AUTOGRAD_DETAIL", "UNKNOWN"}

// ours maps a ptscope category onto the profiler's index (AUTOGRAD_DETAIL is
// compared as TEMPORARY: ptscope has no separate class for it).
func profilerIndex(c Category) int {
	switch c {
	case CatParameter:
		return 0
	case CatOptimizerState:
		return 1
	case CatInput:
		return 2
	case CatTemporary:
		return 3
	case CatActivation:
		return 4
	case CatGradient:
		return 5
	}
	return 7
}

// TestCategoriesAgreeWithProfiler compares ptscope's categories with
// torch.profiler's memory timeline recorded in the same run
// (scripts/gpu/snapshot_scenarios.py validate): at 200 instants over the
// profiled steps, the share of bytes both put in the same category.
func TestCategoriesAgreeWithProfiler(t *testing.T) {
	s := testdataSnapshot(t, "validate_gpt2tiny_fp32.pickle.xz")
	a := Analyze(s, 0, Options{})
	f, err := os.Open(filepath.Join("..", "..", "testdata", "snapshots", "validate_gpt2tiny_fp32_timeline_raw.json.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var raw [][4]int64 // t_ns, action, bytes (+/-), category index
	if err := json.NewDecoder(zr).Decode(&raw); err != nil {
		t.Fatal(err)
	}
	sort.SliceStable(raw, func(i, j int) bool { return raw[i][0] < raw[j][0] })
	var lo, hi int64 = -1, 0
	for _, r := range raw {
		if r[0] > 0 && lo < 0 {
			lo = r[0]
		}
		hi = max(hi, r[0])
	}
	times := a.Replay.Timeline.TimeUS
	entryAt := func(ns int64) int { // last entry at or before ns
		i := sort.Search(len(times), func(i int) bool { return times[i]*1000 > ns })
		return i - 1
	}
	const points = 200
	var agreeSum, knownInter, knownProf float64
	var sumProf, sumOurs [8]float64
	k := 0
	var prof [8]int64
	for p := 0; p < points; p++ {
		T := lo + (hi-lo)*int64(p)/(points-1)
		for k < len(raw) && raw[k][0] <= T {
			prof[raw[k][3]] += raw[k][2]
			k++
		}
		var ours [8]int64
		for _, al := range a.Replay.LiveAt(entryAt(T)) {
			ours[profilerIndex(al.Category)] += al.Size
		}
		pc := prof
		pc[3] += pc[6]
		pc[6] = 0
		var inter, to, tp int64
		for c := 0; c < 8; c++ {
			inter += min(ours[c], max(pc[c], 0))
			to += ours[c]
			tp += max(pc[c], 0)
			sumProf[c] += float64(max(pc[c], 0))
			sumOurs[c] += float64(ours[c])
		}
		agreeSum += float64(inter) / float64(max(to, tp))
		for c := 0; c < 7; c++ {
			knownInter += float64(min(ours[c], max(pc[c], 0)))
			knownProf += float64(max(pc[c], 0))
		}
	}
	known := knownInter / knownProf
	agree := agreeSum / points
	var b strings.Builder
	fmt.Fprintf(&b, "%-16s %14s %14s\n", "category", "profiler GiB*s", "ptscope GiB*s")
	for c := 0; c < 8; c++ {
		if c == 6 {
			continue
		}
		fmt.Fprintf(&b, "%-16s %14.2f %14.2f\n", profilerCats[c], sumProf[c]/points/(1<<30), sumOurs[c]/points/(1<<30))
	}
	t.Logf("mean byte agreement over %d instants: %.1f%%; on the bytes the profiler categorised: %.1f%%\n%s", points, 100*agree, 100*known, b.String())
	// Measured on the committed run (docs/validation.md); a drop is a
	// regression. The profiler leaves this model's activations UNKNOWN,
	// which caps the overall figure.
	if agree < 0.68 || known < 0.90 {
		t.Errorf("agreement %.1f%% (known %.1f%%) below the measured 70.2%% (97.7%%)", 100*agree, 100*known)
	}
}
