package load

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ptscope/ptscope/internal/kineto/gen"
	"github.com/ptscope/ptscope/internal/perf"
	"github.com/ptscope/ptscope/internal/testfixture"
)

// randomTrace writes a Kineto trace of random structure made to stress
// the windows of the streaming path: ops, annotations and Python frames
// that span many steps, a worker thread whose ops cross step boundaries,
// GPU work queued behind the host so that it runs into later steps,
// collectives, GPU work without a launch, copies and syncs between steps,
// memory events on two GPUs and the CPU, and forward-backward flows. With
// sections, host events come first, then Python frames, then runtime calls
// and GPU work, as Kineto writes a long profile.
func randomTrace(seed int64, sections bool) []byte {
	r := rand.New(rand.NewSource(seed))
	var host, py, gpu []string
	us := func(ns int64) string { return fmt.Sprintf("%d.%03d", ns/1000, ns%1000) }
	x := func(dst *[]string, cat, name string, tid int, ts, dur int64, args string) {
		e := fmt.Sprintf(`{"ph": "X", "cat": "%s", "name": "%s", "pid": 7, "tid": %d, "ts": %s, "dur": %s`, cat, name, tid, us(ts), us(dur))
		if args != "" {
			e += `, "args": {` + args + `}`
		}
		*dst = append(*dst, e+"}")
	}
	var ext, corr, seqNo, flow int64
	streamFree := map[int]int64{}
	nextExt := func() int64 { ext++; return ext }
	launch := func(tid int, ts int64, extID int64, kernel string, dev, stream int, dur int64, extra string) {
		corr++
		x(&gpu, "cuda_runtime", "cudaLaunchKernel", tid, ts, 2_000, fmt.Sprintf(`"External id": %d, "correlation": %d`, extID, corr))
		key := dev*100 + stream
		start := max(ts+1_000+r.Int63n(20_000), streamFree[key])
		streamFree[key] = start + dur
		cat := "kernel"
		if strings.HasPrefix(kernel, "Memcpy") {
			cat = "gpu_memcpy"
		}
		args := fmt.Sprintf(`"External id": %d, "device": %d, "stream": %d, "correlation": %d, "blocks per SM": %.6f, "est. achieved occupancy %%": %d, "grid": [%d, 1, 1], "block": [256, 1, 1], "registers per thread": 64, "shared memory": 0`,
			extID, dev, stream, corr, 0.01+r.Float64()*40, r.Intn(101), 1+r.Intn(500))
		if cat == "gpu_memcpy" {
			args = fmt.Sprintf(`"External id": %d, "device": %d, "stream": %d, "correlation": %d, "bytes": %d`, extID, dev, stream, corr, 1+r.Intn(1<<20))
		}
		if extra != "" {
			args += ", " + extra
		}
		x(&gpu, cat, kernel, 0, start, dur, args)
		host = append(host, fmt.Sprintf(`{"ph": "s", "id": %d, "pid": 7, "tid": %d, "ts": %s, "cat": "ac2g", "name": "ac2g"}`, corr, tid, us(ts)))
	}
	const mainTID, bwdTID, workerTID = 10, 20, 30
	t0 := int64(1_000_000_000)
	steps := 4 + r.Intn(9)
	t := t0
	var stepStarts []int64
	alloc := map[int]int64{0: 1 << 30, 1: 1 << 29}
	mem := func(ts int64, dev int) {
		devType := 1
		if dev < 0 {
			devType, dev = 0, -1
		}
		d := int64(r.Intn(1<<22)) - 1<<21
		alloc[dev] = max(alloc[dev]+d, 0)
		host = append(host, fmt.Sprintf(`{"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 7, "tid": %d, "ts": %s, "args": {"Device Type": %d, "Device Id": %d, "Addr": %d, "Bytes": %d, "Total Allocated": %d, "Total Reserved": %d}}`,
			mainTID, us(ts), devType, dev, 1<<20, d, alloc[dev], alloc[dev]+1<<25))
	}
	for k := 0; k < steps; k++ {
		stepStarts = append(stepStarts, t)
		s := t
		// data loading, forward ops with kernels, backward on the autograd thread
		dl := 50_000 + r.Int63n(400_000)
		x(&host, "user_annotation", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", mainTID, s+1_000, dl, fmt.Sprintf(`"External id": %d`, nextExt()))
		x(&py, "python_function", "train.py(40): step", mainTID, s+500, 900_000+r.Int63n(400_000), "")
		f := s + dl + 5_000
		fwdStart := f
		var fwd []int64
		for op := 0; op < 3+r.Intn(6); op++ {
			e := nextExt()
			seqNo++
			d := 20_000 + r.Int63n(60_000)
			x(&host, "cpu_op", "aten::mm", mainTID, f, d, fmt.Sprintf(`"External id": %d, "Sequence number": %d, "Fwd thread id": 0, "Input Dims": [[%d, 64], [64, 64]], "Input type": ["float", "float"]`, e, seqNo, 1+r.Intn(3)))
			launch(mainTID, f+2_000, e, "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", r.Intn(2), 7, 30_000+r.Int63n(200_000), "")
			flow++
			host = append(host, fmt.Sprintf(`{"ph": "s", "id": %d, "pid": 7, "tid": %d, "ts": %s, "cat": "fwdbwd", "name": "fwdbwd"}`, flow, mainTID, us(f)))
			fwd = append(fwd, seqNo)
			f += d + 1_000
		}
		x(&host, "user_annotation", "forward", mainTID, fwdStart-500, f-fwdStart+1_000, fmt.Sprintf(`"External id": %d`, nextExt()))
		b := f + 2_000
		for i := len(fwd) - 1; i >= 0; i-- {
			e := nextExt()
			d := 30_000 + r.Int63n(90_000)
			x(&host, "cpu_op", "MmBackward0", bwdTID, b, d, fmt.Sprintf(`"External id": %d, "Sequence number": %d, "Fwd thread id": 1`, e, fwd[i]))
			host = append(host, fmt.Sprintf(`{"ph": "f", "id": %d, "pid": 7, "tid": %d, "ts": %s, "cat": "fwdbwd", "name": "fwdbwd", "bp": "e"}`, flow-int64(len(fwd)-1-i), bwdTID, us(b)))
			launch(bwdTID, b+3_000, e, "void cutlass::Kernel2<cutlass_80_simt_sgemm_128x256_8x4_nn_align1>", 0, 7, 50_000+r.Int63n(300_000), "")
			if r.Intn(3) == 0 {
				launch(bwdTID, b+10_000, e, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", 0, 20, 100_000+r.Int63n(900_000),
					fmt.Sprintf(`"Collective name": "allreduce", "dtype": "Float", "In msg nelems": %d, "Out msg nelems": %d, "Group size": 2, "Process Group Name": "0", "Seq": %d`, 1000+r.Intn(9000), 1000+r.Intn(9000), corr))
			}
			b += d + 2_000
		}
		o := b + 5_000
		oe := nextExt()
		od := 40_000 + r.Int63n(100_000)
		x(&host, "user_annotation", "Optimizer.step#AdamW.step", mainTID, o, od, fmt.Sprintf(`"External id": %d`, oe))
		launch(mainTID, o+1_000, oe, "Memcpy HtoD (Pageable -> Device)", 0, 7, 5_000+r.Int63n(20_000), "")
		for m := 0; m < 1+r.Intn(4); m++ {
			mem(s+r.Int63n(o-s+od), r.Intn(3)-1)
		}
		end := o + od + 2_000
		x(&host, "user_annotation", fmt.Sprintf("ProfilerStep#%d", k+1), mainTID, s, end-s, fmt.Sprintf(`"External id": %d`, nextExt()))
		// between steps: a sync, GPU work without a launch, and a gap
		t = end + 1_000 + r.Int63n(200_000)
		if r.Intn(2) == 0 {
			x(&host, "cuda_runtime", "cudaDeviceSynchronize", mainTID, end+200, t-end-400, fmt.Sprintf(`"correlation": %d`, 900_000+k))
		}
		if r.Intn(3) == 0 {
			x(&gpu, "kernel", "orphan_kernel", 0, end-r.Int63n(300_000), 10_000+r.Int63n(500_000), `"device": 1, "stream": 9, "correlation": 5000000`)
		}
		if r.Intn(2) == 0 {
			// a short op between steps whose long kernel runs into the next steps
			e := nextExt()
			x(&host, "cpu_op", "aten::copy_", mainTID, end+300, 600, fmt.Sprintf(`"External id": %d`, e))
			launch(mainTID, end+400, e, "long_reduce_kernel", r.Intn(2), 13, 500_000+r.Int63n(3_000_000), "")
		}
	}
	last := t
	// the worker thread: ops that span steps, with children and launches in several
	for i := 0; i+1 < len(stepStarts); i += 1 + r.Intn(3) {
		j := min(i+1+r.Intn(3), len(stepStarts)-1)
		s, e := stepStarts[i]+100_000, stepStarts[j]+200_000
		pe := nextExt()
		x(&host, "cpu_op", "aten::copy_", workerTID, s, e-s, fmt.Sprintf(`"External id": %d`, pe))
		for c := s + 10_000; c+30_000 < e; c += 100_000 + r.Int63n(300_000) {
			ce := nextExt()
			x(&host, "cpu_op", "aten::add_", workerTID, c, 20_000, fmt.Sprintf(`"External id": %d`, ce))
			launch(workerTID, c+2_000, ce, "vectorized_elementwise_kernel", r.Intn(2), 11, 5_000+r.Int63n(50_000), "")
		}
	}
	x(&host, "user_annotation", "epoch", mainTID, t0-50_000, last-t0+100_000, fmt.Sprintf(`"External id": %d`, nextExt()))
	x(&py, "python_function", "train.py(1): <module>", mainTID, t0-60_000, last-t0+120_000, "")
	var all []string
	if sections {
		all = append(append(append(all, host...), py...), gpu...)
	} else {
		// by start, as one would write them one step after the other
		all = append(append(append(all, host...), py...), gpu...)
		r.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	}
	all = append(all, `{"ph": "M", "name": "thread_name", "pid": 7, "tid": 20, "args": {"name": "pt_autograd_0"}}`)
	var out bytes.Buffer
	fmt.Fprintf(&out, `{"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100", "totalGlobalMem": 85000000000, "computeMajor": 9, "computeMinor": 0, "numSms": 132}, {"id": 1, "name": "NVIDIA H100", "totalGlobalMem": 85000000000, "computeMajor": 9, "computeMinor": 0, "numSms": 132}], "record_shapes": 1, "profile_memory": 1, "with_stack": 1, "traceEvents": [`+"\n  ")
	out.WriteString(strings.Join(all, ",\n  "))
	out.WriteString(`
], "traceName": "random", "displayTimeUnit": "ms", "baseTimeNanoseconds": 1790000000000000000}`)
	return out.Bytes()
}

// reportJSON analyses paths with opt and returns rank 0's document,
// without the analyses a trace analysed in windows skips (perf.Rank.Skipped)
// and without its critical path, which may differ at the windows' edges
// (docs/trace.md, "Traces larger than memory"): critical checks it apart.
func reportJSON(t *testing.T, paths []string, opt TraceOptions) []byte {
	t.Helper()
	set, err := Traces(context.Background(), paths, opt)
	if err != nil {
		t.Fatal(err)
	}
	for i := range set.Report.Ranks {
		r := &set.Report.Ranks[i]
		if len(r.Skipped) > 0 && (len(r.Streams) > 0 || len(r.CopyBandwidth) > 0) {
			t.Fatalf("skipped %q, yet streams and copy bandwidth are there", r.Skipped)
		}
		r.Streams, r.CopyBandwidth, r.Skipped = nil, nil, nil
		r.CriticalPath = criticalOf(t, r.CriticalPath)
	}
	b, err := json.MarshalIndent(set.Report, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// criticalOf keeps of a critical path what windows do not change: the
// steps, and whether each has a path (TestStreamedCriticalPath compares
// the lengths).
func criticalOf(t *testing.T, c perf.CriticalPath) perf.CriticalPath {
	t.Helper()
	out := perf.CriticalPath{SyncEvents: c.SyncEvents} // not Windowed
	for _, s := range c.Steps {
		if s.Failed == "" && s.LengthNS <= 0 && s.Nodes > 0 {
			t.Fatalf("step %s: %d nodes but no path", s.Step, s.Nodes)
		}
		out.Steps = append(out.Steps, perf.StepCriticalPath{Step: s.Step, Failed: s.Failed})
	}
	return out
}

// TestStreamedCriticalPath checks that the critical paths of a trace
// analysed in windows (one step each, the worst case) sum to within 5% of
// the whole trace's, and say they were found per window: a window misses
// the launches queued in the window before it, which can turn a
// launch-delay edge into a kernel gap in a step at a window's edge.
func TestStreamedCriticalPath(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var worst float64
	for seed := int64(1); seed <= 40; seed++ {
		p := filepath.Join(dir, fmt.Sprintf("c%d.pt.trace.json", seed))
		if err := os.WriteFile(p, randomTrace(seed, seed%2 == 0), 0o644); err != nil {
			t.Fatal(err)
		}
		whole, err := Traces(context.Background(), []string{p}, TraceOptions{StreamAbove: -1})
		if err != nil {
			t.Fatal(err)
		}
		got, err := Traces(context.Background(), []string{p}, TraceOptions{StreamAbove: 1, WindowEvents: 1})
		if err != nil {
			t.Fatal(err)
		}
		wc, gc := whole.Report.Ranks[0].CriticalPath, got.Report.Ranks[0].CriticalPath
		if len(wc.Steps) != len(gc.Steps) || len(wc.Steps) == 0 || wc.Windowed || !gc.Windowed {
			t.Fatalf("seed %d: %d steps whole, %d streamed; windowed %v, %v", seed, len(wc.Steps), len(gc.Steps), wc.Windowed, gc.Windowed)
		}
		d := math.Abs(float64(gc.LengthNS-wc.LengthNS)) / float64(wc.LengthNS)
		worst = max(worst, d)
		if d > 0.05 {
			t.Errorf("seed %d: critical paths %d ns streamed, %d ns whole", seed, gc.LengthNS, wc.LengthNS)
		}
	}
	t.Logf("worst difference of the summed lengths %.2f%%", 100*worst)
}

// firstDiff shows where two documents part.
func firstDiff(a, b []byte) string {
	la, lb := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	for i := 0; i < len(la) && i < len(lb); i++ {
		if la[i] != lb[i] {
			lo := max(i-3, 0)
			return fmt.Sprintf("line %d:\nwhole:    %s\nstreamed: %s\n(context: %s)", i+1, la[i], lb[i], strings.Join(la[lo:i], " | "))
		}
	}
	return fmt.Sprintf("lengths %d and %d lines", len(la), len(lb))
}

// TestStreamedEqualsWhole checks that the streaming path gives, byte for
// byte, the report the whole-trace analysis gives, on random traces made to
// stress its windows and with windows of one step and of several.
func TestStreamedEqualsWhole(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for seed := int64(1); seed <= 40; seed++ {
		for _, sections := range []bool{false, true} {
			p := filepath.Join(dir, fmt.Sprintf("r%d_%v.pt.trace.json", seed, sections))
			if err := os.WriteFile(p, randomTrace(seed, sections), 0o644); err != nil {
				t.Fatal(err)
			}
			if seed == 1 && !sections {
				set, err := Traces(context.Background(), []string{p}, TraceOptions{StreamAbove: 1, WindowEvents: 300})
				if err != nil || len(set.Report.Ranks[0].Skipped) != 2 {
					t.Fatalf("streamed: skipped analyses %q, %v; want streams and copy bandwidth", set.Report.Ranks[0].Skipped, err)
				}
			}
			for _, a := range []perf.Options{{}, {GroupByShape: true, Annotations: true, DropLastStep: true}} {
				whole := reportJSON(t, []string{p}, TraceOptions{Analysis: a, StreamAbove: -1})
				for _, w := range []int64{1, 300, 1000} {
					got := reportJSON(t, []string{p}, TraceOptions{Analysis: a, StreamAbove: 1, WindowEvents: w})
					if !bytes.Equal(whole, got) {
						t.Fatalf("seed %d sections %v options %+v windows of %d events: %s", seed, sections, a, w, firstDiff(whole, got))
					}
				}
			}
		}
	}
}

// TestStreamedEqualsWholeFixtures checks the same on the real fixtures, on
// a gzip-compressed one, and on copies of a fixture's steps in Kineto's
// layout (every step's host events before any GPU event).
func TestStreamedEqualsWholeFixtures(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	src := testfixture.Path(t, "gpt2tiny_with_stack.pt.trace.json")
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	gen3 := filepath.Join(dir, "sections3.pt.trace.json")
	f, err := os.Create(gen3)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gen.GenerateWith(f, data, gen.Options{Steps: 3, Sections: true}); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	// a ptscope run bundle's trace: the bundle's phases join the analysis
	bundle := filepath.Join("..", "..", "testdata", "bundles", "lm_small_bf16", "rank0", "trace_step4.pt.trace.json.gz")
	paths := []string{src, testfixture.Path(t, "gpt2_6l_dataloader_bottleneck.pt.trace.json.gz"), gen3, bundle}
	for _, p := range paths {
		for _, a := range []perf.Options{{}, {GroupByShape: true, Annotations: true, DropLastStep: true}} {
			whole := reportJSON(t, []string{p}, TraceOptions{Analysis: a, StreamAbove: -1})
			var notes []string
			for _, w := range []int64{1, 5000} {
				got := reportJSON(t, []string{p}, TraceOptions{Analysis: a, StreamAbove: 1, WindowEvents: w,
					Notify: func(m string) { notes = append(notes, m) }})
				if !bytes.Equal(whole, got) {
					t.Fatalf("%s options %+v windows of %d events: %s", filepath.Base(p), a, w, firstDiff(whole, got))
				}
			}
			// the fixture has no ProfilerStep#N: it is analysed whole; the
			// others in a window per step when windows hold one event
			if len(notes) != 4 || !strings.Contains(notes[0], "bounded memory") {
				t.Fatalf("%s: notices %q, want two per streamed analysis", filepath.Base(p), notes)
			}
			m := regexp.MustCompile(`analysed in (\d+) windows of its (\d+) steps`).FindStringSubmatch(notes[1])
			if p == src && !strings.Contains(notes[1], "no ProfilerStep#N") || p != src && (m == nil || m[1] != m[2] || m[1] < "1") {
				t.Fatalf("%s: notice %q: want a window per step (or no ProfilerStep#N for the fixture)", filepath.Base(p), notes[1])
			}
		}
	}
}

// TestStreamedEqualsWholeDamaged checks the same on truncated traces, some
// with an invalid field: launches, ops and flow ends go missing, so GPU
// work is owned through its External id and fwdbwd flows may link no ops.
func TestStreamedEqualsWholeDamaged(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for seed := int64(1); seed <= 24; seed++ {
		data := randomTrace(seed, seed%2 == 0)
		for _, cut := range []int{len(data) / 5, len(data) / 2, len(data) * 9 / 10} {
			b := append([]byte(nil), data[:cut]...)
			if seed%3 == 0 {
				b = bytes.Replace(b, []byte(`"dur": `), []byte(`"dur": "x", "du": `), 1)
			}
			p := filepath.Join(dir, fmt.Sprintf("d%d_%d.pt.trace.json", seed, cut))
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
			whole := reportJSON(t, []string{p}, TraceOptions{StreamAbove: -1})
			if !bytes.Contains(whole, []byte("truncated")) {
				t.Fatalf("seed %d cut %d: the report does not say the trace is truncated", seed, cut)
			}
			for _, w := range []int64{1, 1000} {
				got := reportJSON(t, []string{p}, TraceOptions{StreamAbove: 1, WindowEvents: w})
				if !bytes.Equal(whole, got) {
					t.Fatalf("seed %d cut %d windows of %d events: %s", seed, cut, w, firstDiff(whole, got))
				}
			}
		}
	}
}
