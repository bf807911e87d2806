package perf

import (
	"cmp"
	"slices"
	"strings"
)

// CopyBandwidth is the memory traffic of one kind of copy (HTA's memory
// bandwidth counters, trace_counters.py): the kind is the first eleven
// characters of a memcpy's name ("Memcpy HtoD", "Memcpy DtoH", "Memcpy
// DtoD", "Memcpy PtoP") or "Memset", over every device of the rank. As in
// HTA, copies whose launch is not in the trace are left out.
type CopyBandwidth struct {
	Kind   string `json:"kind"`
	Copies int    `json:"copies"`
	Bytes  int64  `json:"bytes"`
	BusyNS int64  `json:"busy_ns"` // the union of the copies' spans
	// BandwidthBytesPerS is Bytes / BusyNS.
	BandwidthBytesPerS float64 `json:"bandwidth_bytes_per_s"`
	// Samples describes the summed bandwidth of the copies running (each
	// its "memory bandwidth (GB/s)", else bytes / duration; a copy of 0 ns
	// lasting 1 us as in HTA) after
	// each change at which it is above 0: HTA's get_memory_bw_summary, in
	// bytes/s.
	Samples ValueStats `json:"samples_bytes_per_s"`
	// Series is that bandwidth over time, decimated (bytes/s).
	Series []SeriesPoint `json:"series_bytes_per_s"`
}

// copyKind is HTA's memory kernel type of a GPU event's name, "" for
// other events.
func copyKind(name string) string {
	switch {
	case strings.HasPrefix(name, "Memset"):
		return "Memset"
	case strings.HasPrefix(name, "Memcpy"):
		return name[:min(len(name), 11)]
	case strings.HasPrefix(name, "hipMemcpy"), strings.HasPrefix(name, "hipMemset"), strings.HasPrefix(name, "dma"):
		return "Memcpy Unknown"
	}
	return ""
}

// copyBandwidth computes the rows of the owned copies and memsets.
func copyBandwidth(g *graph) []CopyBandwidth {
	ev := g.ev
	type change struct {
		t  int64
		bw float64 // bytes per ns
		n  int     // +1 at a start, -1 at an end
	}
	type acc struct {
		row     CopyBandwidth
		busy    spans
		changes []change
	}
	kinds := map[uint32]string{}
	by := map[string]*acc{}
	for _, i := range g.gpu {
		if !g.owned(i) || g.launch[i] < 0 {
			continue
		}
		kind, ok := kinds[ev.Name[i]]
		if !ok {
			kind = copyKind(g.t.Strings[ev.Name[i]])
			kinds[ev.Name[i]] = kind
		}
		if kind == "" {
			continue
		}
		a := by[kind]
		if a == nil {
			a = &acc{row: CopyBandwidth{Kind: kind}}
			by[kind] = a
		}
		d := ev.Dur[i]
		if d == 0 {
			d = 1000
		}
		info := &g.t.GPU[ev.Aux[i]]
		b := max(info.Bytes, 0)
		a.row.Copies++
		a.row.Bytes += b
		a.busy = append(a.busy, span{ev.TS[i], ev.TS[i] + d})
		bw := float64(info.Bandwidth) // Kineto's, from the exact duration
		if info.Bandwidth < 0 {
			bw = float64(b) / float64(d)
		}
		a.changes = append(a.changes, change{ev.TS[i], bw, 1}, change{ev.TS[i] + d, -bw, -1})
	}
	base := g.t.Meta.BaseTimeNS
	out := make([]CopyBandwidth, 0, len(by))
	for _, a := range by {
		r := a.row
		r.BusyNS = union(a.busy).total()
		if r.BusyNS > 0 {
			r.BandwidthBytesPerS = float64(r.Bytes) / float64(r.BusyNS) * 1e9
		}
		slices.SortStableFunc(a.changes, func(x, y change) int { return cmp.Compare(x.t, y.t) })
		t := make([]int64, len(a.changes))
		v := make([]float64, len(a.changes))
		var pos []float64
		sum, running := 0.0, 0
		for k, c := range a.changes {
			sum += c.bw
			running += c.n
			if running == 0 {
				sum = 0 // no float residue when nothing runs
			}
			t[k], v[k] = c.t, sum*1e9
			if sum > 0 {
				pos = append(pos, sum*1e9)
			}
		}
		r.Series = stepSeries(t, v, base)
		r.Samples = describe(pos)
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b CopyBandwidth) int { return cmp.Compare(a.Kind, b.Kind) })
	return out
}
