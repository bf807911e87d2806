package perf

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ptscope/ptscope/internal/kineto"
)

// htaDescribe is a pandas describe() row as scripts/hta/analyses.py writes
// it (null for NaN).
type htaDescribe struct {
	Count float64  `json:"count"`
	Mean  *float64 `json:"mean"`
	Min   *float64 `json:"min"`
	P25   *float64 `json:"25%"`
	P50   *float64 `json:"50%"`
	P75   *float64 `json:"75%"`
	Max   *float64 `json:"max"`
}

// htaResults is scripts/hta/analyses.py's output: HTA's own results.
type htaResults struct {
	CriticalPath []struct {
		Step     string             `json:"step"`
		OK       bool               `json:"ok"`
		LengthUS float64            `json:"length_us"`
		BoundBy  map[string]float64 `json:"bound_by_us"`
	} `json:"critical_path"`
	Launch struct {
		Rows            int         `json:"rows"`
		CPUUS           float64     `json:"cpu_duration_sum_us"`
		GPUUS           float64     `json:"gpu_duration_sum_us"`
		Short           int         `json:"short_kernels"`
		RuntimeOutliers int         `json:"runtime_outliers"`
		DelayOutliers   int         `json:"launch_delay_outliers"`
		Delay           htaDescribe `json:"launch_delay"`
	} `json:"launch"`
	Queue struct {
		Streams map[string]htaDescribe `json:"streams"`
	} `json:"queue"`
	MemoryBW       map[string]htaDescribe `json:"memory_bw"`
	GPUAnnotations []struct {
		Name  string  `json:"name"`
		SumUS float64 `json:"sum_us"`
		MaxUS float64 `json:"max_us"`
	} `json:"gpu_annotations"`
	IdleIntervals map[string]map[string]htaDescribe `json:"idle_intervals"`
	Sequences     map[string][]struct {
		Pattern string  `json:"pattern"`
		Count   int     `json:"count"`
		GPUUS   float64 `json:"gpu_us"`
		CPUUS   float64 `json:"cpu_us"`
	} `json:"sequences"`
}

// TestDeepAsHTA checks the deeper analyses against HTA's own results on
// the same traces (testdata/hta/expected, made by scripts/hta/analyses.py
// with HTA 0.6 at f4d0062 and HTA_DISABLE_NS_ROUNDING=1; docs/validation.md
// has the commands): each critical path's length and breakdown, the
// launch statistics, the queue lengths, the copy bandwidth, the GPU
// annotations, the idle gaps per stream and the kernel sequences.
func TestDeepAsHTA(t *testing.T) {
	t.Parallel()
	const hta = "../../testdata/hta"
	for _, c := range []struct {
		trace, expected, seqOp string
	}{
		{hta + "/critical_path/cuda_event_sync.json.gz", "cuda_event_sync.json", ""},
		{hta + "/critical_path/cuda_event_sync_multi_stream.json.gz", "cuda_event_sync_multi_stream.json", ""},
		{hta + "/critical_path/alexnet.json.gz", "alexnet.json", ""},
		{peersDir + "/hta/critical_path/simple_add/benchmark_result_493459_1694039959_trace.json.gz", "simple_add.json", ""},
		{peersDir + "/hta/trace_filter/sampled_rank-0.json.gz", "sampled_rank-0.json", ""},
		{"../../testdata/traces/real/gpt2_6l_dataloader_bottleneck.pt.trace.json.gz", "gpt2_6l_dataloader_bottleneck.json",
			"autograd::engine::evaluate_function"},
		{peersDir + "/real/fsdp2_slow0/rank1.1795802810005459801.pt.trace.json.gz", "fsdp2_slow0_rank1.json", ""},
		{peersDir + "/real/ddp/rank0.1795802743110009081.pt.trace.json.gz", "ddp_rank0.json", ""},
	} {
		t.Run(c.expected, func(t *testing.T) {
			t.Parallel()
			var want htaResults
			b, err := os.ReadFile(filepath.Join(hta, "expected", c.expected))
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(b, &want); err != nil {
				t.Fatal(err)
			}
			tr, err := kineto.ReadFile(context.Background(), c.trace, kineto.Options{})
			if err != nil {
				t.Fatal(err)
			}
			r := Analyze(tr, Options{SequenceOp: c.seqOp})
			checkAsHTA(t, r, &want, c.seqOp)
		})
	}
}

// closeTo reports whether got (ns, or a ratio for values) is within rel of
// want, or within 11 ns of it: HTA's figures are microseconds, some rounded
// to 0.01.
func closeTo(got, want, rel float64) bool {
	return math.Abs(got-want) <= rel*math.Abs(want) || math.Abs(got-want) < 11
}

func checkAsHTA(t *testing.T, r *Rank, want *htaResults, seqOp string) {
	t.Helper()
	// critical paths: the steps by name, or the whole trace
	steps := map[string]StepCriticalPath{}
	for _, s := range r.CriticalPath.Steps {
		steps[s.Step] = s
	}
	paths := 0
	for _, h := range want.CriticalPath {
		if !h.OK {
			continue
		}
		s, ok := steps[h.Step]
		if !ok && len(r.CriticalPath.Steps) == 1 {
			s, ok = r.CriticalPath.Steps[0], true
		}
		if !ok {
			t.Errorf("critical path: no step %s", h.Step)
			continue
		}
		paths++
		// issue 29 asks for 5%; they agree to 0.1%
		if !closeTo(float64(s.LengthNS), h.LengthUS*1e3, 0.001) {
			t.Errorf("critical path of %s: %d ns, HTA %.3f us", h.Step, s.LengthNS, h.LengthUS)
		}
		b := s.BoundBy
		for k, v := range map[string]int64{"cpu_bound": b.CPUNS + b.DataLoadingNS, "gpu_compute_bound": b.GPUComputeNS,
			"gpu_communication_bound": b.GPUCommunicationNS, "gpu_kernel_kernel_overhead": b.KernelKernelNS,
			"gpu_kernel_launch_overhead": b.LaunchNS} {
			if !closeTo(float64(v), h.BoundBy[k]*1e3, 0.001) {
				t.Errorf("critical path of %s, %s: %d ns, HTA %.3f us", h.Step, k, v, h.BoundBy[k])
			}
		}
	}
	if paths == 0 {
		t.Error("no critical path compared")
	}
	// launches
	l := r.Launch.HTA
	w := want.Launch
	if l.Launches != w.Rows || l.ShortKernels != w.Short || l.RuntimeOutliers != w.RuntimeOutliers || l.DelayOutliers != w.DelayOutliers ||
		!closeTo(float64(l.CPUNS), w.CPUUS*1e3, 1e-6) || !closeTo(float64(l.GPUNS), w.GPUUS*1e3, 1e-6) {
		t.Errorf("launches %+v, HTA %+v", l, w)
	}
	checkDescribeNS(t, "launch delay", l.Delay, w.Delay)
	// queues, by stream id (HTA's key)
	streams := map[string]StreamStats{}
	for _, s := range r.Streams {
		streams[fmt.Sprint(s.Stream)] = s
	}
	for id, h := range want.Queue.Streams {
		// at equal timestamps (microsecond traces) HTA's sort puts a launch
		// and a kernel start in either order: 2 on simple_add's 167
		checkDescribe(t, "queue length of stream "+id, streams[id].Queue.Samples, h, 1, 0.02)
	}
	// bandwidth (HTA: GB/s)
	bw := map[string]CopyBandwidth{}
	for _, b := range r.CopyBandwidth {
		bw[b.Kind] = b
	}
	for kind, h := range want.MemoryBW {
		checkDescribe(t, "bandwidth of "+kind, bw[kind].Samples, h, 1e-9, 1e-6)
	}
	// GPU annotations
	annos := map[string]GPUAnnotation{}
	for _, a := range r.GPUAnnotations {
		annos[a.Name] = a
	}
	for _, h := range want.GPUAnnotations {
		a := annos[h.Name]
		if !closeTo(float64(a.Durations.SumNS), h.SumUS*1e3, 1e-6) || !closeTo(float64(a.Durations.MaxNS), h.MaxUS*1e3, 1e-6) {
			t.Errorf("GPU annotation %s: %+v, HTA %+v", h.Name, a.Durations, h)
		}
	}
	// idle gaps
	for id, cats := range want.IdleIntervals {
		s := streams[id]
		for cat, h := range cats {
			var got DurationStats
			switch cat {
			case "host_wait":
				got = s.HostWait
			case "kernel_wait":
				got = s.KernelWait
			default:
				got = s.OtherWait
			}
			checkDescribeNS(t, "stream "+id+" "+cat, got, h)
		}
	}
	// kernel sequences
	if seqOp != "" {
		got := map[string]KernelSequence{}
		for _, s := range r.KernelSequences {
			got[s.Operator+"|"+strings.Join(s.Kernels, "|")] = s
		}
		hs := want.Sequences[seqOp]
		if len(hs) == 0 || len(got) != len(hs) {
			t.Errorf("kernel sequences of %s: %d, HTA %d", seqOp, len(got), len(hs))
		}
		for _, h := range hs {
			s, ok := got[h.Pattern]
			if !ok || s.Count != h.Count || !closeTo(float64(s.GPUNS), h.GPUUS*1e3, 1e-6) || !closeTo(float64(s.CPUNS), h.CPUUS*1e3, 1e-6) {
				t.Errorf("kernel sequence %.60s...: %+v, HTA %+v", h.Pattern, s, h)
			}
		}
	}
}

// checkDescribe compares ValueStats (times scale) with HTA's describe,
// within rel.
func checkDescribe(t *testing.T, what string, got ValueStats, want htaDescribe, scale, rel float64) {
	t.Helper()
	if got.Count != int(want.Count) {
		t.Errorf("%s: %d values, HTA %v", what, got.Count, want.Count)
		return
	}
	for _, x := range []struct {
		g float64
		w *float64
	}{{got.Mean, want.Mean}, {got.Min, want.Min}, {got.P25, want.P25}, {got.P50, want.P50}, {got.P75, want.P75}, {got.Max, want.Max}} {
		if x.w != nil && math.Abs(x.g*scale-*x.w) > rel*math.Abs(*x.w)+1e-9 {
			t.Errorf("%s: %+v, HTA %+v", what, got, want)
			return
		}
	}
}

// checkDescribeNS compares DurationStats with HTA's describe (us, some
// rounded to 0.01).
func checkDescribeNS(t *testing.T, what string, got DurationStats, want htaDescribe) {
	t.Helper()
	if got.Count != int(want.Count) {
		t.Errorf("%s: %d values, HTA %v", what, got.Count, want.Count)
		return
	}
	for _, x := range []struct {
		g int64
		w *float64
	}{{got.MeanNS, want.Mean}, {got.MinNS, want.Min}, {got.P50NS, want.P50}, {got.MaxNS, want.Max}} {
		if x.w != nil && !closeTo(float64(x.g), *x.w*1e3, 1e-6) {
			t.Errorf("%s: %+v, HTA %+v", what, got, want)
			return
		}
	}
}
