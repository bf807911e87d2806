package timeline

import (
	"cmp"
	"fmt"
	"slices"
	"sort"

	"github.com/ptscope/ptscope/internal/kineto"
)

// Lane is one row group of the trace timeline: a host thread or a GPU
// stream. Its events are split into depths (nesting levels); the events of
// one depth never overlap and are sorted by start.
type Lane struct {
	Name   string    `json:"name"`
	PID    int32     `json:"pid"`
	TID    int32     `json:"tid"`
	GPU    bool      `json:"gpu"`
	Events int       `json:"events"`
	depths [][]int32 // event indices per depth
	maxEnd [][]int64 // per depth: running maximum of the ends (they are sorted too)
}

// Depth is the number of nesting levels.
func (l *Lane) Depth() int { return len(l.depths) }

// Trace is the level-of-detail index of a profiler trace's timeline.
type Trace struct {
	T          *kineto.Trace
	Lanes      []Lane
	Start, End int64 // ns, relative to the trace's time base
	Memory     []MemCurve
	corrs      corrIndex
}

// NewTrace indexes the complete events of t by lane and depth.
func NewTrace(t *kineto.Trace) *Trace {
	ev := &t.Events
	type key struct{ pid, tid int32 }
	byLane := map[key][]int32{}
	tr := &Trace{T: t}
	first := true
	for i := 0; i < ev.Len(); i++ {
		if ev.Kind[i] == kineto.KindTrace {
			continue
		}
		k := key{ev.PID[i], ev.TID[i]}
		byLane[k] = append(byLane[k], int32(i))
		if first || ev.TS[i] < tr.Start {
			tr.Start = ev.TS[i]
		}
		if first || ev.End(i) > tr.End {
			tr.End = ev.End(i)
		}
		first = false
	}
	for k, idx := range byLane {
		slices.SortFunc(idx, func(a, b int32) int {
			if c := cmp.Compare(ev.TS[a], ev.TS[b]); c != 0 {
				return c
			}
			return cmp.Compare(ev.Dur[b], ev.Dur[a]) // the enclosing event first
		})
		l := Lane{PID: k.pid, TID: k.tid, Events: len(idx)}
		for _, i := range idx {
			if ev.Kind[i].IsGPU() {
				l.GPU = true
				break
			}
		}
		var stack []int64 // ends of the open events, one per depth
		for _, i := range idx {
			for len(stack) > 0 && stack[len(stack)-1] <= ev.TS[i] {
				stack = stack[:len(stack)-1]
			}
			d := len(stack)
			if d == len(l.depths) {
				l.depths = append(l.depths, nil)
			}
			l.depths[d] = append(l.depths[d], i)
			stack = append(stack, ev.End(int(i)))
		}
		l.maxEnd = make([][]int64, len(l.depths))
		for d, es := range l.depths {
			l.maxEnd[d] = make([]int64, len(es))
			var m int64
			for j, i := range es {
				m = max(m, ev.End(int(i)))
				l.maxEnd[d][j] = m
			}
		}
		l.Name = laneName(t, k.pid, k.tid, l.GPU)
		tr.Lanes = append(tr.Lanes, l)
	}
	tr.Memory = memCurves(t)
	// GPU streams first (what most views are about), then host threads
	slices.SortFunc(tr.Lanes, func(a, b Lane) int {
		if a.GPU != b.GPU {
			if a.GPU {
				return -1
			}
			return 1
		}
		if c := cmp.Compare(a.PID, b.PID); c != 0 {
			return c
		}
		return cmp.Compare(a.TID, b.TID)
	})
	return tr
}

func laneName(t *kineto.Trace, pid, tid int32, gpu bool) string {
	if n := t.ThreadName(pid, tid); n != "" {
		return n
	}
	if gpu {
		return fmt.Sprintf("GPU %s stream %s", t.PIDString(pid), t.PIDString(tid))
	}
	return fmt.Sprintf("process %s thread %s", t.PIDString(pid), t.PIDString(tid))
}

// TraceQuery is a viewport of the trace timeline: times [T0, T1) in ns
// relative to the trace's time base, across Width pixels.
type TraceQuery struct {
	T0, T1 int64
	Width  int
}

// Slice is an event drawn on its own (at least one pixel wide).
type Slice struct {
	Lane, Depth int
	Event       int32
}

// Merged is a run of events narrower than a pixel each, drawn as one busy
// bar over columns [Col0, Col1].
type Merged struct {
	Lane, Depth int
	Col0, Col1  int
	Events      int
}

// TraceView is one viewport's answer: every event at least one pixel wide
// on its own, the rest merged into busy runs per lane, depth and column.
type TraceView struct {
	T0, T1  int64
	Width   int
	Slices  []Slice
	Merged  []Merged
	Visited int // events examined (the query's cost)
}

// View answers one viewport. Within a lane and depth the events do not
// overlap, so the first one in range is found by binary search, and after
// a sub-pixel event the search jumps to the next column.
func (tr *Trace) View(q TraceQuery) (*TraceView, error) {
	if q.T1 <= q.T0 {
		return nil, fmt.Errorf("time range [%d, %d) is empty", q.T0, q.T1)
	}
	if q.Width < 1 || q.Width > 1<<14 {
		return nil, fmt.Errorf("width %d pixels is out of range (1..16384)", q.Width)
	}
	ev := &tr.T.Events
	v := &TraceView{T0: q.T0, T1: q.T1, Width: q.Width}
	span := q.T1 - q.T0
	col := func(t int64) int { return int((t - q.T0) * int64(q.Width) / span) }
	colStart := func(c int) int64 { return q.T0 + (int64(c)*span+int64(q.Width)-1)/int64(q.Width) }
	for li := range tr.Lanes {
		l := &tr.Lanes[li]
		for d, es := range l.depths {
			me := l.maxEnd[d]
			j := sort.Search(len(es), func(k int) bool { return me[k] > q.T0 })
			var run *Merged
			for j < len(es) {
				i := es[j]
				s, e := ev.TS[i], ev.End(int(i))
				if s >= q.T1 {
					break
				}
				v.Visited++
				if e <= q.T0 { // ends are not sorted when one event outlasts the next
					j++
					continue
				}
				if (e-s)*int64(q.Width) >= span {
					v.Slices = append(v.Slices, Slice{li, d, i})
					run = nil
					j++
					continue
				}
				c := max(0, col(s))
				if run != nil && run.Col1 >= c-1 {
					run.Col1 = max(run.Col1, c)
					run.Events++
				} else {
					v.Merged = append(v.Merged, Merged{li, d, c, c, 1})
					run = &v.Merged[len(v.Merged)-1]
				}
				// skip the rest of this column: the next event starting in a later one
				next := colStart(c + 1)
				k := j + 1
				if k < len(es) && ev.TS[es[k]] < next {
					k = j + 1 + sort.Search(len(es)-j-1, func(x int) bool { return ev.TS[es[j+1+x]] >= next })
					// events of one depth do not overlap: of those skipped, only the
					// last can end after the column, and so be a pixel wide
					if x := es[k-1]; (ev.End(int(x))-ev.TS[x])*int64(q.Width) >= span {
						k--
					}
					run.Events += k - j - 1
				}
				j = k
			}
		}
	}
	return v, nil
}

// MemCurve is a GPU's allocated and reserved bytes over the trace, from
// the profiler's [memory] events (profile_memory=True).
type MemCurve struct {
	Device              int32
	TS                  []int64 // ns, sorted
	Allocated, Reserved *Pyramid
}

// memCurves builds the GPU memory curves of t.
func memCurves(t *kineto.Trace) []MemCurve {
	by := map[int32][]int{}
	for i, m := range t.Memory {
		if m.DeviceType == 1 {
			by[m.DeviceID] = append(by[m.DeviceID], i)
		}
	}
	var out []MemCurve
	for d, idx := range by {
		sort.SliceStable(idx, func(a, b int) bool { return t.Memory[idx[a]].TS < t.Memory[idx[b]].TS })
		c := MemCurve{Device: d, TS: make([]int64, len(idx))}
		al, re := make([]int64, len(idx)), make([]int64, len(idx))
		for k, i := range idx {
			c.TS[k], al[k], re[k] = t.Memory[i].TS, t.Memory[i].TotalAllocated, t.Memory[i].TotalReserved
		}
		c.Allocated, c.Reserved = NewPyramid(al), NewPyramid(re)
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b MemCurve) int { return cmp.Compare(a.Device, b.Device) })
	return out
}

// CurvePoint is one column of a memory curve: min/max over the events in
// it; Events is 0 for a column without events (the value carries over).
type CurvePoint struct {
	AllocMin, AllocMax, ResMin, ResMax int64
	Events                             int
}

// Curve returns curve c over [t0, t1) in width columns.
func (c *MemCurve) Curve(t0, t1 int64, width int) []CurvePoint {
	out := make([]CurvePoint, width)
	span := t1 - t0
	var last CurvePoint
	if k := sort.Search(len(c.TS), func(k int) bool { return c.TS[k] >= t0 }) - 1; k >= 0 {
		a, r := c.Allocated.raw[k], c.Reserved.raw[k]
		last = CurvePoint{a, a, r, r, 0}
	}
	for col := 0; col < width; col++ {
		a, b := t0+int64(col)*span/int64(width), t0+int64(col+1)*span/int64(width)
		lo := sort.Search(len(c.TS), func(k int) bool { return c.TS[k] >= a })
		hi := sort.Search(len(c.TS), func(k int) bool { return c.TS[k] >= b })
		if hi <= lo {
			p := last
			p.AllocMin, p.ResMin, p.Events = p.AllocMax, p.ResMax, 0
			out[col] = p
			continue
		}
		p := CurvePoint{Events: hi - lo}
		p.AllocMin, p.AllocMax = c.Allocated.MinMax(lo, hi)
		p.ResMin, p.ResMax = c.Reserved.MinMax(lo, hi)
		out[col] = p
		a2, r2 := c.Allocated.raw[hi-1], c.Reserved.raw[hi-1]
		last = CurvePoint{a2, a2, r2, r2, 0}
	}
	return out
}
