package perf

import (
	"slices"
	"sort"
	"strings"

	"github.com/ptscope/ptscope/internal/kineto"
)

// Idle splits the time a device runs no compute kernel during the steps,
// so that utilisation + idle ratio = 1. Idle time while communication
// kernels run (and no compute) is communication; while only copies run,
// copy; time with nothing on the device is split by HTA's rule on the event
// that ends the gap: host wait if its launch started after the gap began
// (the CPU enqueued too late), else kernel wait if the gap is shorter than
// 30 us, else other (waits on events or other streams). A gap that no event
// ends (the span's tail) is host wait.
type Idle struct {
	SpanNS          int64   `json:"span_ns"`    // the steps' time (their windows' union)
	ComputeNS       int64   `json:"compute_ns"` // union of compute kernels
	IdleNS          int64   `json:"idle_ns"`    // span - compute
	CommunicationNS int64   `json:"communication_wait_ns"`
	CopyNS          int64   `json:"copy_wait_ns"`
	HostWaitNS      int64   `json:"host_wait_ns"`
	KernelWaitNS    int64   `json:"kernel_wait_ns"`
	OtherNS         int64   `json:"other_wait_ns"`
	IdleRatio       float64 `json:"idle_ratio"` // idle / span
}

// Launch summarises kernel launch delays: GPU start − (launch start + launch
// duration), clipped at 0 (HTA).
type Launch struct {
	Launches         int     `json:"launches"`
	MeanDelayNS      int64   `json:"mean_delay_ns"`
	P50DelayNS       int64   `json:"p50_delay_ns"`
	P95DelayNS       int64   `json:"p95_delay_ns"`
	MaxDelayNS       int64   `json:"max_delay_ns"`
	LongDelays       int     `json:"long_delays"` // delay > 100 us
	MeanRuntimeNS    int64   `json:"mean_runtime_ns"`
	ShortKernels     int     `json:"short_kernels"` // kernel shorter than its launch call
	ShortKernelRatio float64 `json:"short_kernel_ratio"`
	TinyKernels      int     `json:"tiny_kernels"` // kernels under 10 us
	Kernels          int     `json:"kernels"`
	// the launch statistics of launchstats.go
	DelayHistogram   []int          `json:"delay_histogram"`       // delays by bucket of DelayBucketsNS
	DelayBucketsNS   []int64        `json:"delay_bucket_upper_ns"` // upper bounds; the last bucket has no bound (-1)
	LongCalls        int            `json:"long_launch_calls"`     // launch calls over 50 us
	LaunchBoundSteps int            `json:"launch_bound_steps"`    // steps whose launch calls outlast their kernels
	Steps            []StepLaunches `json:"steps"`                 // per step
	HTA              LaunchHTA      `json:"hta"`                   // HTA's get_cuda_kernel_launch_stats
}

// Copy is memcpy or memset traffic of one kind (direction, pinned or pageable).
type Copy struct {
	Name               string  `json:"name"`
	Direction          string  `json:"direction"`
	Pageable           bool    `json:"pageable"`
	Calls              int     `json:"calls"`
	Bytes              int64   `json:"bytes"`
	TotalNS            int64   `json:"total_ns"`
	BandwidthBytesPerS float64 `json:"bandwidth_bytes_per_s"`
}

// Sync is a synchronising call made by the host.
type Sync struct {
	Name    string `json:"name"`
	Calls   int    `json:"calls"`
	TotalNS int64  `json:"total_ns"`
}

const kernelWaitNS = 30_000 // HTA's consecutive_kernel_delay, 30 us

// gapKind is HTA's class of an idle gap before a GPU event.
type gapKind int

const (
	gapHostWait   gapKind = iota // the CPU enqueued the event too late
	gapKernelWait                // a short gap between back-to-back kernels
	gapOther
)

// classifyGap is HTA's rule, the one the idle split, the "as HTA" streams
// and the per-stream statistics share: a gap that began at start and
// lasted gap before an event whose launch (when launched) began at
// launchTS is host wait if that launch began after the gap did, else
// kernel wait if shorter than kernelWaitNS, else other.
func classifyGap(gap, start int64, launched bool, launchTS int64) gapKind {
	switch {
	case launched && launchTS > start:
		return gapHostWait
	case gap < kernelWaitNS:
		return gapKernelWait
	}
	return gapOther
}

// gapEnd is what ends an idle gap: the device's first GPU event starting
// at or after the gap's end (found), and when its launch started.
type gapEnd struct {
	found, launched bool
	launchTS        int64
}

// gapPiece is an idle gap (no compute, communication or copy), or the part
// of one inside a window.
type gapPiece struct {
	s, e int64
	end  gapEnd
	ok   bool
}

// addGap classifies a whole gap [s, e) by HTA's rule (Idle); lastSlotEnd
// is the end of the last step.
func addGap(out *Idle, s, e int64, end gapEnd, lastSlotEnd int64) {
	gap := e - s
	kind := gapHostWait // no event ends it, or the last step does
	if end.found && e < lastSlotEnd {
		kind = classifyGap(gap, s, end.launched, end.launchTS)
	}
	switch kind {
	case gapHostWait:
		out.HostWaitNS += gap
	case gapKernelWait:
		out.KernelWaitNS += gap
	default:
		out.OtherNS += gap
	}
}

// deviceIdle splits the idle time of device a over slots (IdleRatio is
// left to gpuRows). A gap that starts at the first slot's start or ends at
// the last slot's end may continue in the window before or after: it is
// returned (head, tail) for the merge to classify, the others are
// classified here. The event that ends a gap is the device's first GPU
// event starting at or after the gap's end: past the window's context it
// is the window's NextGPU.
func deviceIdle(g *graph, a *devWork, slots spans) (out Idle, head, tail gapPiece) {
	if len(slots) == 0 {
		return out, head, tail
	}
	ev := g.ev
	w := g.win
	out.SpanNS = slots.total()
	out.ComputeNS = intersect(a.compute, slots).total()
	out.IdleNS = out.SpanNS - out.ComputeNS
	gaps := subtract(slots, a.compute)
	out.CommunicationNS = intersect(gaps, a.comm).total()
	rest := subtract(gaps, a.comm)
	out.CopyNS = intersect(rest, a.copy).total()
	next, hasNext := w.next[a.device]
	first, last := slots[0].S, slots[len(slots)-1].E
	for _, x := range subtract(rest, a.copy) {
		k := sort.Search(len(a.events), func(j int) bool { return ev.TS[a.events[j]] >= x.E })
		var end gapEnd
		switch {
		case k < len(a.events) && ev.TS[a.events[k]] <= w.to:
			end.found = true
			if l := g.launch[a.events[k]]; l >= 0 {
				end.launched, end.launchTS = true, ev.TS[l]
			}
		case hasNext:
			end = gapEnd{true, next.Launched, next.LaunchTS}
		case k < len(a.events):
			end.found = true
			if l := g.launch[a.events[k]]; l >= 0 {
				end.launched, end.launchTS = true, ev.TS[l]
			}
		}
		if x.S == first || x.E == last {
			p := gapPiece{x.S, x.E, end, true}
			if x.S == first {
				head = p
			}
			if x.E == last {
				tail = p
			}
			continue
		}
		addGap(&out, x.S, x.E, end, w.lastSlotEnd)
	}
	return out, head, tail
}

// launchStats sums the launch delays of the owned kernels.
func launchStats(g *graph) launchAcc {
	ev := g.ev
	var out launchAcc
	for _, i := range g.gpu {
		if ev.Kind[i] != kineto.KindKernel || !g.owned(i) {
			continue
		}
		out.kernels++
		if ev.Dur[i] < 10_000 {
			out.tiny++
		}
		l := g.launch[i]
		if l < 0 {
			continue
		}
		d := ev.TS[i] - ev.End(int(l))
		if d < 0 {
			d = 0
		}
		out.delays = append(out.delays, d)
		out.runtime += ev.Dur[l]
		if ev.Dur[i] < ev.Dur[l] {
			out.short++
		}
	}
	return out
}

// finishLaunch makes the launch summary of the whole trace.
func finishLaunch(a *launchAcc) Launch {
	out := Launch{Kernels: a.kernels, TinyKernels: a.tiny, ShortKernels: a.short}
	delays := a.delays
	out.Launches = len(delays)
	if len(delays) == 0 {
		return out
	}
	slices.Sort(delays)
	var sum int64
	for _, d := range delays {
		sum += d
		if d > 100_000 {
			out.LongDelays++
		}
	}
	out.MeanDelayNS = sum / int64(len(delays))
	out.P50DelayNS = delays[len(delays)/2]
	out.P95DelayNS = delays[len(delays)*95/100]
	out.MaxDelayNS = delays[len(delays)-1]
	out.MeanRuntimeNS = a.runtime / int64(len(delays))
	out.ShortKernelRatio = float64(out.ShortKernels) / float64(len(delays))
	return out
}

// copies groups the owned memcpy and memset events by name, e.g.
// "Memcpy HtoD (Pageable -> Device)".
func copies(g *graph) map[string]*Copy {
	ev := g.ev
	rows := map[string]*Copy{}
	for _, i := range g.gpu {
		k := ev.Kind[i]
		if k != kineto.KindMemcpy && k != kineto.KindMemset || !g.owned(i) {
			continue
		}
		name := g.t.Strings[ev.Name[i]]
		r := rows[name]
		if r == nil {
			r = &Copy{Name: name, Pageable: strings.Contains(name, "Pageable")}
			if k == kineto.KindMemset {
				r.Direction = "memset"
			} else if f := strings.Fields(name); len(f) > 1 {
				r.Direction = f[1]
			}
			rows[name] = r
		}
		r.Calls++
		r.TotalNS += ev.Dur[i]
		if b := g.t.GPU[ev.Aux[i]].Bytes; b > 0 {
			r.Bytes += b
		}
	}
	return rows
}

func copyRows(rows map[string]*Copy) []Copy {
	out := make([]Copy, 0, len(rows))
	for _, r := range rows {
		if r.TotalNS > 0 {
			r.BandwidthBytesPerS = float64(r.Bytes) / float64(r.TotalNS) * 1e9
		}
		out = append(out, *r)
	}
	sortByTotal(out, func(c *Copy) (int64, string) { return c.TotalNS, c.Name })
	return out
}

// syncs lists the owned host calls that wait for the GPU.
func syncs(g *graph) map[string]*Sync {
	ev := g.ev
	rows := map[string]*Sync{}
	for i := 0; i < ev.Len(); i++ {
		k := ev.Kind[i]
		if !k.IsLaunch() && k != kineto.KindSync || !g.owned(int32(i)) {
			continue
		}
		name := g.t.Name(i)
		if k != kineto.KindSync && !isSyncCall(name) {
			continue
		}
		r := rows[name]
		if r == nil {
			r = &Sync{Name: name}
			rows[name] = r
		}
		r.Calls++
		r.TotalNS += ev.Dur[i]
	}
	return rows
}

func syncRows(rows map[string]*Sync) []Sync {
	out := make([]Sync, 0, len(rows))
	for _, r := range rows {
		out = append(out, *r)
	}
	sortByTotal(out, func(s *Sync) (int64, string) { return s.TotalNS, s.Name })
	return out
}

func isSyncCall(name string) bool {
	switch name {
	case "cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize", "cudaStreamWaitEvent",
		"cudaMemcpy", "cuCtxSynchronize", "cuStreamSynchronize", "cuEventSynchronize", "hipDeviceSynchronize",
		"hipStreamSynchronize", "hipEventSynchronize", "hipMemcpy":
		return true
	}
	return false
}
