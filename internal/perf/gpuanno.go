package perf

import (
	"cmp"
	"slices"

	"github.com/ptscope/ptscope/internal/kineto"
)

// GPUAnnotation is one name of GPU-side user annotations
// (gpu_user_annotation: the GPU time of a record_function range, from its
// first GPU event's start to its last one's end, on a stream), HTA's
// get_gpu_user_annotation_breakdown, with the GPU time of the work
// attributed to it (HTA's get_gpu_kernels_with_user_annotations: each
// kernel, copy or memset to the shortest annotation on its stream that it
// overlaps).
type GPUAnnotation struct {
	Name      string        `json:"name"`
	Durations DurationStats `json:"durations"`
	Events    int           `json:"gpu_events"` // GPU events attributed to it
	EventNS   int64         `json:"gpu_event_ns"`
}

// gpuAnnoPart is what a window adds: each name's durations and attributed
// GPU work.
type gpuAnnoPart struct {
	durs   map[string][]int64
	events map[string]int
	ns     map[string]int64
}

func newGPUAnnoPart() gpuAnnoPart {
	return gpuAnnoPart{durs: map[string][]int64{}, events: map[string]int{}, ns: map[string]int64{}}
}

func (a *gpuAnnoPart) add(b gpuAnnoPart) {
	for n, d := range b.durs {
		a.durs[n] = append(a.durs[n], d...)
	}
	for n, v := range b.events {
		a.events[n] += v
	}
	for n, v := range b.ns {
		a.ns[n] += v
	}
}

func (a *gpuAnnoPart) rows() []GPUAnnotation {
	out := make([]GPUAnnotation, 0, len(a.durs))
	for n, d := range a.durs {
		out = append(out, GPUAnnotation{Name: n, Durations: describeNS(d), Events: a.events[n], EventNS: a.ns[n]})
	}
	slices.SortFunc(out, func(x, y GPUAnnotation) int {
		return cmp.Or(cmp.Compare(y.Durations.SumNS, x.Durations.SumNS), cmp.Compare(x.Name, y.Name))
	})
	return out
}

// gpuAnnotations sums the owned GPU annotations and attributes the owned
// GPU events to them.
func gpuAnnotations(g *graph) gpuAnnoPart {
	ev := g.ev
	p := newGPUAnnoPart()
	type lane struct{ pid, tid int32 }
	annos := map[lane][]int32{}
	for i, k := range ev.Kind {
		if k != kineto.KindGPUUserAnnotation {
			continue
		}
		l := lane{ev.PID[i], ev.TID[i]}
		annos[l] = append(annos[l], int32(i))
		if g.owned(int32(i)) {
			n := g.t.Name(i)
			p.durs[n] = append(p.durs[n], ev.Dur[i])
		}
	}
	if len(annos) == 0 {
		return p
	}
	for _, list := range annos {
		sortRuns(list, func(a, b int32) int { return cmp.Compare(ev.TS[a], ev.TS[b]) }, slices.SortStableFunc)
	}
	next := map[lane]int{}       // the next annotation to consider, by start
	active := map[lane][]int32{} // annotations that may overlap later events
	for _, i := range g.gpu {    // by start
		l := lane{ev.PID[i], ev.TID[i]}
		list := annos[l]
		if list == nil {
			continue
		}
		s, e := ev.TS[i], ev.End(int(i))
		act := active[l][:0]
		for _, a := range active[l] {
			if ev.End(int(a)) > s {
				act = append(act, a)
			}
		}
		k := next[l]
		for ; k < len(list) && ev.TS[list[k]] < e; k++ {
			if ev.End(int(list[k])) > s {
				act = append(act, list[k])
			}
		}
		next[l], active[l] = k, act
		if !g.owned(i) || g.launch[i] < 0 {
			continue
		}
		best := int32(-1)
		for _, a := range act {
			if ev.TS[a] < e && ev.End(int(a)) > s && (best < 0 || ev.Dur[a] < ev.Dur[best]) {
				best = a
			}
		}
		if best >= 0 {
			n := g.t.Name(int(best))
			p.events[n]++
			p.ns[n] += ev.Dur[i]
		}
	}
	return p
}
