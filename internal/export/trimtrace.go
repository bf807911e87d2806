package export

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/ptscope/ptscope/internal/input"
	"github.com/ptscope/ptscope/internal/kineto"
)

// TraceTrim says which events of a Kineto trace a Perfetto export keeps.
type TraceTrim struct {
	// FirstStep..LastStep select ProfilerStep#N spans by N, both included;
	// Steps is false to keep the whole time range.
	Steps               bool
	FirstStep, LastStep int
	// MinDuration drops complete events (ph "X") shorter than it, in ns.
	MinDuration int64
	// Source is the memory budget the reading is checked against (nil:
	// the default budget).
	Source *input.Source
}

// TraceTrimSummary says what a trimmed trace holds.
type TraceTrimSummary struct {
	Events int // events read
	Kept   int
	// FromNS..ToNS is the time window kept (the trace's clock, ns), when
	// steps were selected.
	FromNS, ToNS int64
	StepsFound   []int // ProfilerStep numbers the trace holds (with Steps)
	Warnings     []string
}

// TrimTrace copies the Kineto trace that open returns to w, keeping the
// events of a step range and of at least a duration, byte for byte as the
// trace wrote them (and its metadata around the traceEvents array), so
// that a trace too large for the Perfetto UI or chrome://tracing opens
// there. It never builds the trace's model: the events stream through
// kineto.Scan in bounded memory, in two passes when steps are selected
// (the first finds the steps' spans, which is why it takes an opener).
//
// A step's span is device-aware, as perf's: from its host ProfilerStep#N
// to the end of the GPU work it launched, so that kernels a step launched
// are kept with it. Metadata events (process and thread names) are always kept;
// other events are kept when they overlap the window, except the
// ProfilerStep slices of other steps.
func TrimTrace(ctx context.Context, open func() (io.ReadCloser, error), w io.Writer, o TraceTrim) (*TraceTrimSummary, error) {
	sum := &TraceTrimSummary{}
	var from, to int64 = -1 << 62, 1 << 62
	if o.Steps {
		spans, err := stepSpans(ctx, open, o.Source)
		if err != nil {
			return nil, err
		}
		for n := range spans {
			sum.StepsFound = append(sum.StepsFound, n)
		}
		sort.Ints(sum.StepsFound)
		found := false
		for n := o.FirstStep; n <= o.LastStep; n++ {
			sp, ok := spans[n]
			if !ok {
				continue
			}
			if !found {
				from, to = sp[0], sp[1]
				found = true
			}
			from, to = min(from, sp[0]), max(to, sp[1])
		}
		if !found {
			return nil, fmt.Errorf("no ProfilerStep#%d..#%d in the trace (it holds %s)", o.FirstStep, o.LastStep, stepList(sum.StepsFound))
		}
		sum.FromNS, sum.ToNS = from, to
	}

	r, err := open()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	sc, err := kineto.NewScanner(r, kineto.Options{Source: o.Source})
	if err != nil {
		return nil, err
	}
	j := newJSONW(w)
	if sc.BareArray {
		j.raw("[\n")
	} else {
		// The metadata is copied when it is valid JSON around the array
		// (the reader tolerates damage there; the output must not).
		if json.Valid(append(append([]byte(nil), sc.Header...), `"traceEvents":[]}`...)) {
			j.bytes(sc.Header)
		} else {
			j.raw("{")
			sum.Warnings = append(sum.Warnings, "the trace's metadata before traceEvents is not valid JSON: left out")
		}
		j.raw("\"traceEvents\": [\n")
	}
	first := true
	err = sc.Each(ctx, func(ev []byte) error {
		sum.Events++
		h, err := kineto.ParseHead(ev)
		if err != nil {
			return nil // an event the reader would skip: left out too
		}
		if !keepEvent(&h, from, to, o.MinDuration) || (o.Steps && !stepInRange(&h, o.FirstStep, o.LastStep)) {
			return nil
		}
		if !first {
			j.raw(",\n")
		}
		first = false
		j.bytes(ev)
		sum.Kept++
		return j.err
	})
	if err != nil {
		return nil, err
	}
	j.raw("\n]")
	switch {
	case sc.BareArray:
		j.raw("\n")
	case json.Valid(append([]byte(`{"traceEvents":[]`), sc.Tail...)):
		j.bytes(sc.Tail)
	default:
		// truncated, or damaged after the array: close the object
		if len(bytes.TrimSpace(sc.Tail)) > 0 {
			sum.Warnings = append(sum.Warnings, "the trace's metadata after traceEvents is not valid JSON: left out")
		}
		j.raw("}\n")
	}
	sum.Warnings = append(sum.Warnings, sc.Warnings...)
	if sc.Truncated {
		sum.Warnings = append(sum.Warnings, "the trace is truncated: the events before the cut were kept")
	}
	return sum, j.flush()
}

// keepEvent decides on one event: metadata always, complete events when
// they overlap [from, to] and last at least minDur, others when their
// timestamp lies in [from, to]. Events without a timestamp are kept.
func keepEvent(h *kineto.Head, from, to, minDur int64) bool {
	if h.Ph == "M" || !h.HasTS {
		return true
	}
	if h.Ph == "X" {
		if h.Dur < minDur {
			return false
		}
		if h.Dur <= 0 {
			return h.TS >= from && h.TS <= to
		}
		return h.TS < to && h.TS+h.Dur > from
	}
	return h.TS >= from && h.TS <= to
}

const profilerStep = "ProfilerStep#"

// stepInRange is false for the ProfilerStep#N slices of steps outside
// first..last, which the window may overlap at its edges.
func stepInRange(h *kineto.Head, first, last int) bool {
	if !strings.HasPrefix(h.Name, profilerStep) {
		return true
	}
	n, err := strconv.Atoi(h.Name[len(profilerStep):])
	return err != nil || (n >= first && n <= last)
}

// stepSpans reads the trace once for its ProfilerStep#N events and returns
// each N's device-aware span [start, end], as perf bounds a step: from the
// host ProfilerStep#N's start to the later of its end and the end of the
// GPU work (kernels, copies, sets) launched inside it, matched to the
// runtime call by its correlation id. The GPU-side ProfilerStep#N slice is
// not used: Kineto writes it as a marker of a few microseconds, not the
// span of the step's kernels. The launches and GPU events are kept as
// correlation id and time only (16 bytes each), so memory stays a small
// fraction of the trace's size.
func stepSpans(ctx context.Context, open func() (io.ReadCloser, error), src *input.Source) (map[int][2]int64, error) {
	r, err := open()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	sc, err := kineto.NewScanner(r, kineto.Options{Source: src})
	if err != nil {
		return nil, err
	}
	host := map[int][2]int64{}
	launchAt := map[int64]int64{} // correlation id -> launch time
	gpuEnd := map[int64]int64{}   // correlation id -> latest end of its GPU work
	marker, corr := []byte(profilerStep), []byte(`"correlation"`)
	err = sc.Each(ctx, func(ev []byte) error {
		isStep := bytes.Contains(ev, marker)
		if !isStep && !bytes.Contains(ev, corr) {
			return nil
		}
		h, err := kineto.ParseHead(ev)
		if err != nil || h.Ph != "X" || !h.HasTS {
			return nil
		}
		k := kineto.KindOf(h.Cat)
		switch {
		case isStep && strings.HasPrefix(h.Name, profilerStep) && !k.IsGPU() && k != kineto.KindGPUUserAnnotation:
			n, err := strconv.Atoi(h.Name[len(profilerStep):])
			if err != nil {
				return nil
			}
			sp, ok := host[n]
			if !ok {
				sp = [2]int64{h.TS, h.TS + h.Dur}
			}
			host[n] = [2]int64{min(sp[0], h.TS), max(sp[1], h.TS+h.Dur)}
		case k.IsLaunch():
			if id, ok := correlation(ev); ok {
				launchAt[id] = h.TS
			}
		case k.IsGPU():
			if id, ok := correlation(ev); ok {
				if e, seen := gpuEnd[id]; !seen || h.TS+h.Dur > e {
					gpuEnd[id] = h.TS + h.Dur
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	// the host steps by start, to find the one each launch lies in
	nums := make([]int, 0, len(host))
	for n := range host {
		nums = append(nums, n)
	}
	sort.Slice(nums, func(i, j int) bool { return host[nums[i]][0] < host[nums[j]][0] })
	spans := make(map[int][2]int64, len(host))
	for n, sp := range host {
		spans[n] = sp
	}
	for id, end := range gpuEnd {
		at, ok := launchAt[id]
		if !ok {
			continue
		}
		k := sort.Search(len(nums), func(i int) bool { return host[nums[i]][0] > at }) - 1
		if k < 0 || at > host[nums[k]][1] {
			continue // launched outside every step
		}
		sp := spans[nums[k]]
		spans[nums[k]] = [2]int64{sp[0], max(sp[1], end)}
	}
	return spans, nil
}

// correlation reads an event's args.correlation, the id that ties a GPU
// event to the runtime call that launched it.
func correlation(ev []byte) (int64, bool) {
	var w struct {
		Args struct {
			Correlation *float64 `json:"correlation"`
		} `json:"args"`
	}
	if json.Unmarshal(ev, &w) != nil || w.Args.Correlation == nil {
		return 0, false
	}
	return int64(*w.Args.Correlation), true
}

func stepList(ns []int) string {
	if len(ns) == 0 {
		return "no ProfilerStep#N events"
	}
	var b strings.Builder
	for i, n := range ns {
		if i > 0 {
			b.WriteString(", ")
		}
		if i == 8 && len(ns) > 10 {
			fmt.Fprintf(&b, "... #%d", ns[len(ns)-1])
			break
		}
		fmt.Fprintf(&b, "#%d", n)
	}
	return b.String()
}
