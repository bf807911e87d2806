package memory

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ptscope/ptscope/internal/finding"
	"github.com/ptscope/ptscope/internal/snapshot"
	"github.com/ptscope/ptscope/internal/snapshot/snapgen"
)

// A snapshot taken without _record_memory_history has segments and no
// trace (the legacy test file, and a generated one): it is analysed from
// its blocks at dump time instead of panicking.
func TestNoHistory(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	if err := snapgen.Write(&buf, snapgen.Options{Entries: 0, Seed: 3}); err != nil {
		t.Fatal(err)
	}
	generated, err := snapshot.Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]*snapshot.Snapshot{
		"legacy_list_history": testdataSnapshot(t, "legacy_list_history.pickle.xz"),
		"generated":           generated,
	} {
		t.Run(name, func(t *testing.T) {
			if s.Trace(0).Len() != 0 || len(s.DeviceSegments(0)) == 0 {
				t.Fatalf("want segments without a trace: %d entries, %d segments", s.Trace(0).Len(), len(s.DeviceSegments(0)))
			}
			a := Analyze(s, 0, Options{}).Result
			var allocated, reserved int64
			for _, g := range s.DeviceSegments(0) {
				reserved += g.TotalSize
				for _, b := range g.Blocks {
					if b.State == snapshot.BlockActiveAllocated {
						allocated += b.Size
					}
				}
			}
			if a.HasHistory || a.End.AllocatedBytes != allocated || a.End.ReservedBytes != reserved ||
				a.Peak.AllocatedBytes != allocated || a.Peak.EventIndex != -1 {
				t.Errorf("has_history %v, end %+v, peak %+v; blocks hold %d of %d", a.HasHistory, a.End, a.Peak, allocated, reserved)
			}
			var sum int64
			for _, c := range a.Categories {
				sum += c.Bytes
			}
			if sum != allocated || len(a.Stacks) == 0 || len(a.TopAllocations) == 0 {
				t.Errorf("categories sum to %d of %d; %d stacks, %d top allocations", sum, allocated, len(a.Stacks), len(a.TopAllocations))
			}
			if !finding.Has(a.Findings, "no-history") || finding.Has(a.Findings, "before-recording") {
				t.Errorf("findings %v", a.Findings)
			}
			// One instant: the peak's numbers are the end's (the review
			// found active and cached free differing between them), and
			// nothing is "before the recording" when nothing was recorded.
			f := a.Fragmentation
			if a.Peak.ActiveBytes != a.End.ActiveBytes || a.Peak.ReservedAtPeakBytes != a.End.ReservedBytes ||
				a.Peak.RequestedBytes != a.End.RequestedBytes || f.CachedFreeAtPeakBytes != f.CachedFreeBytes ||
				f.EfficiencyAtPeak != f.EfficiencyAtEnd {
				t.Errorf("peak %+v, end %+v; cached free %d at the peak, %d at the end", a.Peak, a.End, f.CachedFreeAtPeakBytes, f.CachedFreeBytes)
			}
			if a.bytesAt(CatBeforeRecording) != 0 {
				t.Errorf("%d B allocated before a recording that never happened", a.bytesAt(CatBeforeRecording))
			}
			for _, fd := range a.Findings {
				if strings.Contains(fd.Message, "at the peak") || strings.Contains(fd.Message, "At the peak") || strings.Contains(fd.Message, "at the end") {
					t.Errorf("%s speaks of a peak or an end: %s", fd.ID, fd.Message)
				}
			}
			if a.Timeline.Len() != 0 || len(a.Steps) != 0 || a.Fragmentation.SegmentCount == 0 {
				t.Errorf("timeline %d, steps %d, segments %d", a.Timeline.Len(), len(a.Steps), a.Fragmentation.SegmentCount)
			}
		})
	}
	// The legacy file's blocks carry frames: categories come from them.
	a := Analyze(testdataSnapshot(t, "legacy_list_history.pickle.xz"), 0, Options{}).Result
	if a.bytesAt(CatOptimizerState) == 0 || a.bytesAt(CatParameter) == 0 {
		t.Errorf("categories from block frames: %+v", a.Categories)
	}
}

// The thinned timeline keeps what the charts and the text must agree on:
// the peak bucket's maximum is the peak, categories sum to the allocated
// maximum of every bucket, and allocated/reserved there is the efficiency
// at the peak.
func TestThinTimeline(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"gpt2s_train_fp32_b4_ctx512.pickle", "gpt2tiny_train_bf16_cppstacks.pickle", "leak_gpt2_2l.pickle"} {
		an := Analyze(fixture(t, name), 0, Options{})
		a, tl := an.Result, &an.Result.Timeline
		n := an.Replay.Timeline.Len()
		if tl.Len() == 0 || tl.Len() > MaxBuckets || tl.FirstIndex[0] != 0 || tl.LastIndex[tl.Len()-1] != n-1 {
			t.Fatalf("%s: %d buckets over %d entries", name, tl.Len(), n)
		}
		peakBucket := -1
		for k := 0; k < tl.Len(); k++ {
			if k > 0 && tl.FirstIndex[k] != tl.LastIndex[k-1]+1 {
				t.Fatalf("%s: bucket %d starts at %d after %d", name, k, tl.FirstIndex[k], tl.LastIndex[k-1])
			}
			if tl.AllocatedMinBytes[k] > tl.AllocatedMaxBytes[k] || tl.ReservedMinBytes[k] > tl.ReservedMaxBytes[k] ||
				tl.ActiveMinBytes[k] > tl.ActiveMaxBytes[k] || tl.AllocatedMaxBytes[k] > a.Peak.AllocatedBytes {
				t.Errorf("%s: bucket %d min/max out of order", name, k)
			}
			var sum int64
			for _, c := range tl.Categories {
				sum += c.Bytes[k]
			}
			if sum != tl.AllocatedMaxBytes[k] {
				t.Fatalf("%s: bucket %d: categories sum to %d, allocated max %d", name, k, sum, tl.AllocatedMaxBytes[k])
			}
			if tl.FirstIndex[k] <= a.Peak.EventIndex && a.Peak.EventIndex <= tl.LastIndex[k] {
				peakBucket = k
			}
		}
		if peakBucket < 0 || tl.AllocatedMaxBytes[peakBucket] != a.Peak.AllocatedBytes {
			t.Fatalf("%s: the peak bucket does not reach the peak", name)
		}
		eff := float64(tl.AllocatedMaxBytes[peakBucket]) / float64(tl.ReservedAtMaxBytes[peakBucket])
		if eff != a.Fragmentation.EfficiencyAtPeak {
			t.Errorf("%s: efficiency at the peak bucket %v, result %v", name, eff, a.Fragmentation.EfficiencyAtPeak)
		}
		if a.HasTime && tl.StartNS[peakBucket] > a.Peak.TimeNS {
			t.Errorf("%s: peak bucket starts after the peak", name)
		}
		at := 0
		for _, sp := range tl.Phases {
			if sp.StartIndex != at || sp.EndIndex <= sp.StartIndex {
				t.Fatalf("%s: phase spans not contiguous at %d", name, at)
			}
			at = sp.EndIndex
		}
		if at != n {
			t.Errorf("%s: phase spans end at %d of %d", name, at, n)
		}
	}
}

// With stacks="all" recordings C++ frames are interleaved with Python
// ones, and autograd's threads record no Python at all. The largest
// allocations must still lead to .py lines: the first Python frame outside
// PyTorch for forward allocations, the .backward() call for the backward
// ones, never a "??" frame.
func TestCppStacks(t *testing.T) {
	t.Parallel()
	a := Analyze(fixture(t, "gpt2tiny_train_bf16_cppstacks.pickle"), 0, Options{}).Result
	for _, s := range a.Sources {
		if strings.HasPrefix(s.Name, "??") || strings.Contains(s.Name, "at::meta::") {
			t.Errorf("source %q is a C++ frame", s.Name)
		}
	}
	nodes := map[string]bool{}
	for i, ta := range a.TopAllocations[:10] {
		st := a.Stacks[ta.Stack]
		if ta.Origin != FromTrace {
			continue
		}
		head, user := st.Short(3)
		shown := head
		if user != nil {
			shown = append(shown, *user)
		}
		py := false
		for _, f := range shown {
			if line := ShortFrame(f); strings.Contains(line, "??") {
				t.Errorf("allocation %d shows %q", i, line)
			}
			py = py || strings.HasSuffix(f.Filename, ".py")
		}
		if !py {
			t.Errorf("allocation %d (%s) shows no .py frame: %+v", i, st.Source, shown)
		}
		if st.AutogradNode != "" {
			nodes[st.AutogradNode] = true
			if user == nil || !strings.HasSuffix(user.Filename, "fixtures.py") || user.Line != 36 {
				t.Errorf("backward allocation %d: caller %+v, want fixtures.py:36 (loss.backward())", i, user)
			}
		}
	}
	if !nodes["NllLossBackward0"] || !nodes["LogSoftmaxBackward0"] {
		t.Errorf("autograd nodes %v", nodes)
	}
}

func TestFrameKind(t *testing.T) {
	cases := []struct {
		file, name string
		want       FrameKind
	}{
		{"/home/u/train.py", "main", FrameUser},
		{"/opt/venv/lib/python3.12/site-packages/torch/nn/functional.py", "linear", FrameTorch},
		{"/opt/venv/lib/python3.12/site-packages/transformers/models/gpt2/modeling_gpt2.py", "forward", FrameLibrary},
		{"/usr/lib/python3.12/threading.py", "run", FrameLibrary},
		{"<frozen runpy>", "_run_code", FrameLibrary},
		{"/opt/venv/lib/python3.12/site-packages/torch/nn/modules/module.py", "_call_impl", FramePlumbing},
		{"??", "torch::unwind::unwind()", FramePlumbing},
		{"??", "_PyEval_EvalFrameDefault", FramePlumbing},
		{"CUDACachingAllocator.cpp", "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(int)", FramePlumbing},
		{"??", "at::meta::structured_nll_loss_backward::meta(at::Tensor const&)", FrameCpp},
		{"Functions.cpp", "torch::autograd::generated::NllLossBackward0::apply(std::vector<at::Tensor>&&)", FrameCpp},
	}
	for _, c := range cases {
		if got := frameKind(&snapshot.Frame{Filename: c.file, Name: c.name}); got != c.want {
			t.Errorf("%s %s: %v, want %v", c.file, c.name, got, c.want)
		}
	}
}

func TestStackShort(t *testing.T) {
	py := func(file string, line int, name string, k FrameKind) Frame { return Frame{file, line, name, k} }
	cpp := func(name string) Frame { return Frame{"??", 0, name, FrameCpp} }
	plumb := Frame{"??", 0, "_PyEval_EvalFrameDefault", FramePlumbing}
	mixed := Stack{Frames: []Frame{cpp("at::native::mm"), plumb, py("torch/nn/functional.py", 1, "linear", FrameTorch), plumb,
		py("site-packages/transformers/x.py", 2, "forward", FrameLibrary), py("site-packages/transformers/y.py", 3, "forward", FrameLibrary),
		py("site-packages/transformers/z.py", 4, "forward", FrameLibrary), py("/home/u/train.py", 5, "step", FrameUser)}, UserFrame: 7}
	head, user := mixed.Short(3)
	if len(head) != 3 || head[0].Name != "linear" || user == nil || user.Line != 5 {
		t.Errorf("mixed: head %v user %v", head, user)
	}
	if head, user := mixed.Short(0); len(head) != 5 || user != nil {
		t.Errorf("mixed, no limit: head %v user %v", head, user)
	}
	if head, user := mixed.Short(5); len(head) != 5 || user != nil || head[4].Line != 5 {
		t.Errorf("mixed, user within the limit: head %v user %v", head, user)
	}
	backward := Stack{Frames: []Frame{plumb, cpp("at::meta::nll_loss_backward"), cpp("torch::autograd::generated::NllLossBackward0::apply")},
		UserFrame: -1, Caller: []Frame{py("torch/autograd/__init__.py", 9, "backward", FrameTorch), py("/home/u/train.py", 36, "step", FrameUser)}}
	head, user = backward.Short(3)
	if len(head) != 2 || head[0].Name != "at::meta::nll_loss_backward" || user == nil || user.Line != 36 {
		t.Errorf("backward: head %v user %v", head, user)
	}
	if head, user := (&Stack{UserFrame: -1}).Short(3); len(head) != 0 || user != nil {
		t.Errorf("empty: %v %v", head, user)
	}
	if got := autogradNode(backward.Frames); got != "NllLossBackward0" {
		t.Errorf("autograd node %q", got)
	}
	if got := ShortFrame(cpp("at::native::mm(at::Tensor const&, at::Tensor const&)")); got != "at::native::mm" {
		t.Errorf("C++ frame renders as %q", got)
	}
}

// Roles (a bundle's tensor inventories) override the categories and
// modules guessed from stacks: the allocation alive at the role's time at its
// address, or holding it, takes the role.
func TestRoles(t *testing.T) {
	t.Parallel()
	s := fixture(t, "gpt2s_train_fp32_b4_ctx512.pickle")
	base := Analyze(s, 0, Options{}).Result
	top := base.TopAllocations[0]
	if top.Category == CatGradient || top.AllocIndex < 0 {
		t.Fatal("pick another allocation")
	}
	at := base.Peak.TimeNS
	for _, addr := range []uint64{top.Address, top.Address + 4096} {
		a := Analyze(s, 0, Options{Roles: []Role{{Address: addr, TimeNS: at, Category: CatGradient, Module: "lm_head"}}}).Result
		got := a.TopAllocations[0]
		if got.Address != top.Address || got.Category != CatGradient || got.Module != "lm_head" {
			t.Errorf("%#x: labelled top allocation %+v", addr, got)
		}
		if a.bytesAt(CatGradient) != base.bytesAt(CatGradient)+top.Bytes {
			t.Errorf("%#x: gradient bytes %d, want %d", addr, a.bytesAt(CatGradient), base.bytesAt(CatGradient)+top.Bytes)
		}
	}
	// A role taken before the allocation was made names another one.
	b := Analyze(s, 0, Options{Roles: []Role{{Address: top.Address, TimeNS: at - top.AgeNS - 1000, Category: CatGradient}}}).Result
	if b.TopAllocations[0].Category != top.Category {
		t.Errorf("a role from before the allocation applied")
	}
}

func TestEnumsText(t *testing.T) {
	for _, v := range []interface {
		MarshalText() ([]byte, error)
	}{CatOptimizerState, PhaseZeroGrad, PatternLeak, VerdictFragmentation, StepsOptimizerFrames, FrameLibrary, BeforeGhost} {
		b, err := json.Marshal(v)
		if err != nil || strings.ContainsAny(string(b), "0123456789") {
			t.Errorf("%T: %s %v", v, b, err)
		}
	}
	var r struct {
		C Category
		P Pattern
		V Verdict
	}
	if err := json.Unmarshal([]byte(`{"C":"gradient","P":"spike","V":"capacity"}`), &r); err != nil ||
		r.C != CatGradient || r.P != PatternSpike || r.V != VerdictCapacity {
		t.Errorf("unmarshal: %+v %v", r, err)
	}
	if err := json.Unmarshal([]byte(`{"C":"weights"}`), &r); err == nil {
		t.Error("unknown category accepted")
	}
	if _, err := json.Marshal(Pattern(9)); err == nil {
		t.Error("invalid pattern marshalled")
	}
}

func TestMarkOutliers(t *testing.T) {
	const mib = 1 << 20
	rows := []StepRow{{Partial: true, PeakAllocatedBytes: 9000 * mib}, {PeakAllocatedBytes: 1000 * mib, DurationNS: 10},
		{PeakAllocatedBytes: 1010 * mib, DurationNS: 11}, {PeakAllocatedBytes: 1400 * mib, DurationNS: 10},
		{PeakAllocatedBytes: 1000 * mib, DurationNS: 30}, {PeakAllocatedBytes: 1005 * mib, DurationNS: 10}}
	markOutliers(rows)
	var got []bool
	for _, r := range rows {
		got = append(got, r.Outlier)
	}
	want := []bool{false, false, false, true, true, false}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("outliers %v, want %v", got, want)
		}
	}
}

func TestCppName(t *testing.T) {
	cases := map[string]string{
		"at::native::mm(at::Tensor const&, at::Tensor const&)":                                                         "at::native::mm",
		"torch::cuda::(anonymous namespace)::gather_with_cpp()":                                                        "torch::cuda::{anonymous}::gather_with_cpp",
		"void at::native::elementwise_kernel<128, 4, float>(int, float*)":                                              "at::native::elementwise_kernel<…>",
		"c10::impl::wrap_kernel_functor_unboxed_<c10::impl::detail::F<at::Tensor (long)>>::call(c10::OperatorKernel*)": "c10::impl::wrap_kernel_functor_unboxed_<…>::call",
		"PyCMethod_New": "PyCMethod_New",
	}
	for in, want := range cases {
		if got := cppName(in); got != want {
			t.Errorf("cppName(%q) = %q, want %q", in, got, want)
		}
	}
}

// categoriesAt's lookup table gives what a binary search gives.
func TestCategoriesAtLookup(t *testing.T) {
	t.Parallel()
	an := Analyze(fixture(t, "leak_gpt2_2l.pickle"), 0, Options{})
	r := an.Replay
	n := r.Timeline.Len()
	for _, xs := range [][]int{{0}, {n - 1}, {0, 1, 2, 3}, {5, 5, 9, 700, 701, n - 1}, {3, 1000, 4000}} {
		got := r.categoriesAt(xs)
		for c := range got {
			for k, x := range xs {
				var want int64
				for _, a := range r.LiveAt(x) {
					if a.Category == Category(c) {
						want += a.Size
					}
				}
				if got[c][k] != want {
					t.Fatalf("xs %v: category %v at %d: %d, want %d", xs, Category(c), x, got[c][k], want)
				}
			}
		}
	}
}

// Stack groups are one per (stack, category): per category they sum to
// categories_at_peak, and each top allocation's group has its category.
// The review found the frameless stack of this training run labelled
// allocated_before_recording while 785 MiB of it were temporaries.
func TestStackGroupsByCategory(t *testing.T) {
	t.Parallel()
	a := Analyze(testdataSnapshot(t, "gpt2s_train_fp32_b4_ctx512.pickle.xz"), 0, Options{}).Result
	byCat := map[Category]int64{}
	frameless := map[Category]bool{}
	for _, g := range a.Stacks {
		byCat[g.Category] += g.Bytes
		if len(g.Frames) == 0 {
			if frameless[g.Category] {
				t.Errorf("two frameless groups of %v", g.Category)
			}
			frameless[g.Category] = true
		}
	}
	for _, c := range a.Categories {
		if byCat[c.Category] != c.Bytes {
			t.Errorf("%v: stacks hold %d B, the category %d B", c.Category, byCat[c.Category], c.Bytes)
		}
	}
	if !frameless[CatBeforeRecording] || !frameless[CatTemporary] {
		t.Errorf("frameless groups %v, want allocated_before_recording and temporary apart", frameless)
	}
	for i, ta := range a.TopAllocations {
		if g := a.Stacks[ta.Stack]; g.Category != ta.Category {
			t.Errorf("top allocation %d is %v, its stack group %v", i, ta.Category, g.Category)
		}
	}
}

// Snapshots pickled at protocols 0 and 1 (testdata/*_p0/_p1: the testdata
// snapshots loaded and dumped again with Python's pickle.dumps(d,
// protocol=N)) read and analyse exactly as the originals.
func TestOldPickleProtocols(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ file, orig, format string }{
		{"validate_gpt2tiny_fp32_p0.pickle.xz", "validate_gpt2tiny_fp32.pickle.xz", "pickle protocol 0"},
		{"legacy_list_history_p1.pickle.xz", "legacy_list_history.pickle.xz", "pickle protocol 1"},
	} {
		s, err := snapshot.ReadFile(filepath.Join("testdata", c.file))
		if err != nil {
			t.Fatalf("%s: %v", c.file, err)
		}
		o := testdataSnapshot(t, c.orig)
		got, _ := json.Marshal(Analyze(s, 0, Options{}).Result)
		want, _ := json.Marshal(Analyze(o, 0, Options{}).Result)
		if !strings.HasPrefix(s.Format, c.format+" ") || !bytes.Equal(got, want) || len(want) < 1000 {
			t.Errorf("%s (%s): the analysis differs from %s's", c.file, s.Format, c.orig)
		}
	}
}
