package export

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/ptscope/ptscope/internal/input"
	"github.com/ptscope/ptscope/internal/kineto"
	"github.com/ptscope/ptscope/internal/perf"
	"github.com/ptscope/ptscope/internal/testfixture"
)

// The DataLoader trace of ../shared (ProfilerStep#2..4) and the committed
// bundle's trace (a ptscope run of a small LM: ProfilerStep#2 and the start
// of #3).
const (
	dataloaderTrace = "gpt2_6l_dataloader_bottleneck.pt.trace.json.gz"
	bundleTrace     = "bundles/lm_small_bf16/rank0/trace_step4.pt.trace.json.gz"
)

func bundleTracePath(t *testing.T) string {
	return testfixture.Testdata(t, strings.Split(bundleTrace, "/")...)
}

func opener(path string) func() (io.ReadCloser, error) {
	return func() (io.ReadCloser, error) {
		r, err := input.NewSource(0, nil, nil).Open(path)
		if err != nil {
			return nil, err
		}
		return r, nil
	}
}

func bytesOpener(b []byte) func() (io.ReadCloser, error) {
	return func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
}

// heads reads every event head of a trace.
func heads(t *testing.T, open func() (io.ReadCloser, error)) []kineto.Head {
	t.Helper()
	r, err := open()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	sc, err := kineto.NewScanner(r, kineto.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var out []kineto.Head
	if err := sc.Each(context.Background(), func(ev []byte) error {
		h, err := kineto.ParseHead(ev)
		if err != nil {
			t.Fatalf("%v: %s", err, ev)
		}
		out = append(out, h)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestTrimTraceSteps: ProfilerStep#2 of a real trace.
func TestTrimTraceSteps(t *testing.T) {
	t.Parallel()
	checkTrimSteps(t, bundleTracePath(t), 2, "#2, #3")
}

// checkTrimSteps: the output is a valid Chrome trace that ptscope's own
// reader reads; it holds the metadata, step n's host and GPU slices and
// every event overlapping their span, and nothing else.
func checkTrimSteps(t *testing.T, path string, n int, found string) {
	var buf bytes.Buffer
	sum, err := TrimTrace(context.Background(), opener(path), &buf, TraceTrim{Steps: true, FirstStep: n, LastStep: n})
	if err != nil {
		t.Fatal(err)
	}
	if got := stepList(sum.StepsFound); got != found {
		t.Errorf("steps found %s, want %s", got, found)
	}
	ct := checkChromeTrace(t, buf.Bytes())
	step := fmt.Sprintf("ProfilerStep#%d", n)
	if ct.names[step] != 2 || ct.names[fmt.Sprintf("ProfilerStep#%d", n-1)] != 0 || ct.names[fmt.Sprintf("ProfilerStep#%d", n+1)] != 0 {
		t.Errorf("step slices: %v", ct.names)
	}
	if ct.meta["deviceProperties"] == nil || ct.meta["baseTimeNanoseconds"] == nil {
		t.Errorf("the trace's metadata was lost: %v", ct.meta)
	}
	// An independent count of what the window keeps.
	want, meta := 0, 0
	all := heads(t, opener(path))
	for i := range all {
		h := &all[i]
		if h.Ph == "M" {
			meta++
		}
		if keepEvent(h, sum.FromNS, sum.ToNS, 0) && stepInRange(h, n, n) {
			want++
		}
	}
	if sum.Events != len(all) || sum.Kept != want || ct.events != want {
		t.Errorf("read %d of %d events, kept %d (file %d), want %d", sum.Events, len(all), sum.Kept, ct.events, want)
	}
	if sum.Kept < 1000 || sum.Kept > len(all)*9/10 {
		t.Errorf("kept %d of %d events for one step", sum.Kept, len(all))
	}
	if ct.byPhase["M"] != meta {
		t.Errorf("%d metadata events kept of %d", ct.byPhase["M"], meta)
	}
	tr, err := kineto.Read(context.Background(), bytes.NewReader(buf.Bytes()), kineto.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if tr.Damage.Truncated || len(tr.Damage.Warnings) > 0 || tr.Events.Len() == 0 {
		t.Errorf("the reader found damage %+v in %d events", tr.Damage, tr.Events.Len())
	}
	if tr.Meta.BaseTimeNS == 0 {
		t.Errorf("baseTimeNanoseconds lost: %+v", tr.Meta)
	}
}

// TestTrimTraceMinDuration: complete events shorter than the bound are
// gone, everything else is there.
func TestTrimTraceMinDuration(t *testing.T) {
	t.Parallel()
	path := bundleTracePath(t)
	const minDur = 50_000 // 50 us
	var buf bytes.Buffer
	sum, err := TrimTrace(context.Background(), opener(path), &buf, TraceTrim{MinDuration: minDur})
	if err != nil {
		t.Fatal(err)
	}
	checkChromeTrace(t, buf.Bytes())
	want := 0
	for _, h := range heads(t, opener(path)) {
		if h.Ph != "X" || h.Dur >= minDur {
			want++
		}
	}
	if sum.Kept != want || sum.Kept == sum.Events {
		t.Errorf("kept %d of %d, want %d", sum.Kept, sum.Events, want)
	}
	for _, h := range heads(t, bytesOpener(buf.Bytes())) {
		if h.Ph == "X" && h.Dur < minDur {
			t.Fatalf("kept %q of %d ns", h.Name, h.Dur)
		}
	}
}

func TestTrimTraceShapes(t *testing.T) {
	for _, c := range []struct {
		name, in string
		o        TraceTrim
		kept     int
		warns    int
		err      string
	}{
		{name: "bare array", in: `[{"ph":"X","name":"a","ts":1,"dur":5},{"ph":"X","name":"b","ts":2,"dur":1}]`,
			o: TraceTrim{MinDuration: 2000}, kept: 1},
		{name: "truncated", in: `{"traceEvents":[{"ph":"X","name":"a","ts":1,"dur":5},{"ph":"X","na`, kept: 1, warns: 2},
		{name: "damaged metadata after the array", in: `{"traceEvents":[{"ph":"i","name":"a","ts":1}],"x":nope}`, kept: 1, warns: 1},
		{name: "object after the array", in: `{"traceEvents":[{"ph":"i","name":"a","ts":1}],"displayTimeUnit":"ns"}`, kept: 1},
		{name: "steps", in: `{"traceEvents":[{"ph":"X","name":"ProfilerStep#7","ts":10,"dur":10},{"ph":"X","name":"op","ts":12,"dur":1},{"ph":"X","name":"late","ts":30,"dur":1},{"ph":"M","name":"process_name","pid":1,"args":{"name":"p"}}]}`,
			o: TraceTrim{Steps: true, FirstStep: 7, LastStep: 7}, kept: 3},
		// the kernel step 7 launched runs after its host span and is kept;
		// the GPU-side step slice is a short marker and sets no bound
		{name: "steps with GPU work", in: `{"traceEvents":[{"ph":"X","cat":"user_annotation","name":"ProfilerStep#7","ts":10,"dur":10},` +
			`{"ph":"X","cat":"gpu_user_annotation","name":"ProfilerStep#7","ts":22,"dur":1},` +
			`{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","ts":15,"dur":2,"args":{"correlation":5}},` +
			`{"ph":"X","cat":"kernel","name":"k","ts":25,"dur":15,"args":{"correlation":5}},` +
			`{"ph":"X","cat":"kernel","name":"other","ts":45,"dur":1,"args":{"correlation":6}}]}`,
			o: TraceTrim{Steps: true, FirstStep: 7, LastStep: 7}, kept: 4},
		{name: "no such step", in: `{"traceEvents":[{"ph":"X","name":"ProfilerStep#7","ts":10,"dur":10}]}`,
			o: TraceTrim{Steps: true, FirstStep: 1, LastStep: 2}, err: "no ProfilerStep#1..#2 in the trace (it holds #7)"},
		{name: "not a trace", in: `"hello"`, err: "offset 0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			sum, err := TrimTrace(context.Background(), bytesOpener([]byte(c.in)), &buf, c.o)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			ct := checkChromeTrace(t, buf.Bytes())
			if sum.Kept != c.kept || ct.events != c.kept || len(sum.Warnings) != c.warns {
				t.Errorf("kept %d (file %d), warnings %q; want %d, %d warnings\n%s", sum.Kept, ct.events, sum.Warnings, c.kept, c.warns, buf.String())
			}
		})
	}
}

// FuzzTrimTrace: whatever the input, TrimTrace returns an error or writes
// valid JSON, and never panics.
func FuzzTrimTrace(f *testing.F) {
	for _, s := range []string{
		`{"traceEvents":[{"ph":"X","name":"ProfilerStep#1","ts":1,"dur":5},{"ph":"X","name":"a","ts":2,"dur":1}],"x":1}`,
		`[{"ph":"i","name":"a","ts":"3"}]`,
		`{"traceEvents":[{"ph":"X","na`,
		"{\"traceEvents\":[{\"ph\":\"X\",\"name\":\"a\nb\",\"ts\":1}]}",
		`{"a":1}`,
	} {
		f.Add([]byte(s), true, int64(0))
	}
	f.Fuzz(func(t *testing.T, in []byte, steps bool, minDur int64) {
		var buf bytes.Buffer
		o := TraceTrim{Steps: steps, FirstStep: 1, LastStep: 1, MinDuration: minDur}
		if _, err := TrimTrace(context.Background(), bytesOpener(in), &buf, o); err != nil {
			return
		}
		if !json.Valid(buf.Bytes()) {
			t.Fatalf("invalid JSON from %q:\n%s", in, buf.Bytes())
		}
	})
}

// checkTrimKeepsSteps: steps first..last cut from the trace at path are,
// to perf, the same steps as in the whole trace: the same number, each
// with the same GPU events and the same device-aware duration (the GPU
// work a step launched runs past its host span and must stay with it).
func checkTrimKeepsSteps(t *testing.T, path string, first, last int) {
	t.Helper()
	read := func(open func() (io.ReadCloser, error)) *perf.Rank {
		r, err := open()
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		tr, err := kineto.Read(context.Background(), r, kineto.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return perf.Analyze(tr, perf.Options{})
	}
	want := map[int]perf.Step{}
	for _, st := range read(opener(path)).Steps {
		if st.Number >= first && st.Number <= last {
			want[st.Number] = st
		}
	}
	var buf bytes.Buffer
	if _, err := TrimTrace(context.Background(), opener(path), &buf, TraceTrim{Steps: true, FirstStep: first, LastStep: last}); err != nil {
		t.Fatal(err)
	}
	got := read(bytesOpener(buf.Bytes())).Steps
	if len(got) != len(want) {
		t.Fatalf("%d steps after the cut, want %d", len(got), len(want))
	}
	for _, st := range got {
		w := want[st.Number]
		if st.GPUEvents != w.GPUEvents || st.DurationNS != w.DurationNS || st.GPUEvents == 0 {
			t.Errorf("%s: %d GPU events over %d ns after the cut, want %d over %d ns", st.Name, st.GPUEvents, st.DurationNS, w.GPUEvents, w.DurationNS)
		}
	}
}

// TestTrimTraceKeepsKernels: a step cut from the committed bundle's trace
// keeps all the GPU work it launched.
func TestTrimTraceKeepsKernels(t *testing.T) {
	t.Parallel()
	checkTrimKeepsSteps(t, bundleTracePath(t), 2, 2)
}
