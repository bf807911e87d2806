package export

import (
	"io"
	"strconv"

	"github.com/ptscope/ptscope/internal/memory"
	"github.com/ptscope/ptscope/internal/snapshot"
)

// PerfettoOptions tune the Chrome trace JSON of a snapshot.
type PerfettoOptions struct {
	// MaxPoints bounds the points of each counter track. A longer series
	// keeps, per bucket of entries, the entries of its lowest and highest
	// value, so that every peak survives; 0 means DefaultMaxPoints.
	MaxPoints int
}

// DefaultMaxPoints is the default bound on a counter track's points: a
// 1M-entry snapshot becomes a file of some tens of MB that the Perfetto UI
// opens in seconds.
const DefaultMaxPoints = 100_000

// PerfettoSummary says what a Perfetto export holds.
type PerfettoSummary struct {
	Devices  int
	Counters int // counter events
	Slices   int // steps, phases and annotations
	Instants int // peak and out-of-memory markers
	Thinned  bool
}

// Chrome trace threads of a device's process.
const (
	tidSteps = 1 + iota
	tidPhases
	tidAnnotations
	tidEvents
)

// WritePerfetto writes the memory of the given devices as a Chrome trace
// JSON (Trace Event Format) that ui.perfetto.dev and chrome://tracing open:
// one process per device with counter tracks of allocated and reserved
// bytes and of allocated bytes by category, steps, phases and
// record_function annotations as slices, and the peak and out-of-memory
// events as instants. Times are the snapshot's own (microseconds since the
// Unix epoch); a trace recorded without times uses one microsecond per
// entry, which the process name says.
func WritePerfetto(w io.Writer, ms []*Memory, o PerfettoOptions) (*PerfettoSummary, error) {
	if o.MaxPoints <= 0 {
		o.MaxPoints = DefaultMaxPoints
	}
	j := newJSONW(w)
	sum := &PerfettoSummary{Devices: len(ms)}
	j.raw(`{"displayTimeUnit":"ms","otherData":{"tool":"ptscope","source":`)
	src := ""
	if len(ms) > 0 {
		src = ms[0].Path
	}
	j.str(src)
	j.raw("},\"traceEvents\":[\n")
	first := true
	ev := func() {
		if !first {
			j.raw(",\n")
		}
		first = false
	}
	for _, m := range ms {
		pw := &perfettoDevice{j: j, m: m, pid: int64(m.Device) + 1, ev: ev, sum: sum}
		pw.write(o)
	}
	j.raw("\n]}\n")
	return sum, j.flush()
}

type perfettoDevice struct {
	j   *jsonw
	m   *Memory
	pid int64
	ev  func()
	sum *PerfettoSummary
}

func (p *perfettoDevice) head(ph, name string, tid int64, ts int64) {
	p.ev()
	j := p.j
	j.raw(`{"ph":"`)
	j.raw(ph)
	j.raw(`","name":`)
	j.str(name)
	j.raw(`,"pid":`)
	j.int(p.pid)
	j.raw(`,"tid":`)
	j.int(tid)
	j.raw(`,"ts":`)
	j.int(ts)
}

func (p *perfettoDevice) meta(name string, tid int64, value string) {
	p.ev()
	j := p.j
	j.raw(`{"ph":"M","name":"`)
	j.raw(name)
	j.raw(`","pid":`)
	j.int(p.pid)
	j.raw(`,"tid":`)
	j.int(tid)
	j.raw(`,"args":{"name":`)
	j.str(value)
	j.raw("}}")
}

func (p *perfettoDevice) write(o PerfettoOptions) {
	m := p.m
	name := "CUDA memory, device " + strconv.Itoa(m.Device)
	if !m.Snap.Trace(m.Device).HasTime {
		name += " (no times recorded: 1 us per trace entry)"
	}
	p.meta("process_name", 0, name)
	p.meta("thread_name", tidSteps, "steps")
	p.meta("thread_name", tidPhases, "phases")
	p.meta("thread_name", tidAnnotations, "record_function")
	p.meta("thread_name", tidEvents, "events")
	p.counters(o.MaxPoints)
	p.steps()
	p.phases()
	p.annotations()
	p.instants()
}

// counter writes one counter event: its args are the series values.
func (p *perfettoDevice) counter(name string, i int, keys []string, vals []int64) {
	p.head("C", name, 0, p.m.timeUS(i))
	j := p.j
	j.raw(`,"args":{`)
	for k := range keys {
		if k > 0 {
			j.raw(",")
		}
		j.str(keys[k])
		j.raw(":")
		j.int(vals[k])
	}
	j.raw("}}")
	p.sum.Counters++
}

func (p *perfettoDevice) counters(maxPoints int) {
	m := p.m
	t := &m.Replay.Timeline
	n := t.Len()
	if n == 0 {
		return
	}
	bytesKey := []string{"bytes"}
	v := make([]int64, 1)
	idx, thinned := samplePoints(t.Allocated, maxPoints)
	p.sum.Thinned = p.sum.Thinned || thinned
	for _, i := range idx {
		v[0] = t.Allocated[i]
		p.counter("allocated", i, bytesKey, v)
	}
	ridx, thinned := samplePoints(t.Reserved, maxPoints)
	p.sum.Thinned = p.sum.Thinned || thinned
	for _, i := range ridx {
		v[0] = t.Reserved[i]
		p.counter("reserved", i, bytesKey, v)
	}
	p.categories(idx)
}

// categories writes allocated bytes by category at the entries idx (those
// of the allocated track, so that the categories add up to it there).
func (p *perfettoDevice) categories(idx []int) {
	m := p.m
	r := m.Replay
	n := r.Timeline.Len()
	var used [256]bool
	var cur [256]int64
	// who[i] is the allocation entry i allocates (k+1) or frees (-(k+1)).
	who := make([]int32, n)
	for k := range r.Allocs {
		a := &r.Allocs[k]
		used[a.Category] = true
		if a.AllocIdx < 0 {
			cur[a.Category] += a.Size
		} else {
			who[a.AllocIdx] = int32(k + 1)
		}
		if a.FreeReqIdx >= 0 {
			who[a.FreeReqIdx] = -int32(k + 1)
		}
	}
	var keys []string
	var cats []memory.Category
	for _, c := range memory.Categories() {
		if used[c] {
			keys = append(keys, c.String())
			cats = append(cats, c)
		}
	}
	if len(keys) == 0 {
		return
	}
	vals := make([]int64, len(keys))
	next := 0
	for i := 0; i < n && next < len(idx); i++ {
		if k := who[i]; k > 0 {
			a := &r.Allocs[k-1]
			cur[a.Category] += a.Size
		} else if k < 0 {
			a := &r.Allocs[-k-1]
			cur[a.Category] -= a.Size
		}
		if i == idx[next] {
			for c, cat := range cats {
				vals[c] = cur[cat]
			}
			p.counter("allocated by category", i, keys, vals)
			next++
		}
	}
}

// samplePoints picks the entries that draw a series with at most limit
// points: every entry where the value changes (and the first and last)
// when they fit, else, per bucket of entries, those of the lowest and the
// highest value, in order. It reports whether it thinned the series.
func samplePoints(v []int64, limit int) ([]int, bool) {
	n := len(v)
	if n == 0 {
		return nil, false
	}
	changes := 1
	for i := 1; i < n; i++ {
		if v[i] != v[i-1] {
			changes++
		}
	}
	if changes+1 <= limit {
		out := make([]int, 0, changes+1)
		out = append(out, 0)
		for i := 1; i < n; i++ {
			if v[i] != v[i-1] {
				out = append(out, i)
			}
		}
		if out[len(out)-1] != n-1 {
			out = append(out, n-1)
		}
		return out, false
	}
	buckets := max(limit/2, 1)
	out := make([]int, 0, 2*buckets+1)
	for b := 0; b < buckets; b++ {
		lo, hi := b*n/buckets, (b+1)*n/buckets
		if lo >= hi {
			continue
		}
		mn, mx := lo, lo
		for i := lo + 1; i < hi; i++ {
			if v[i] < v[mn] {
				mn = i
			}
			if v[i] > v[mx] {
				mx = i
			}
		}
		if mn > mx {
			mn, mx = mx, mn
		}
		out = append(out, mn)
		if mx != mn {
			out = append(out, mx)
		}
	}
	if out[len(out)-1] != n-1 {
		out = append(out, n-1)
	}
	return out, true
}

// slice writes a complete event from entry lo's time to entry hi's.
func (p *perfettoDevice) slice(name string, tid int64, ts, end int64, args func()) {
	p.head("X", name, tid, ts)
	j := p.j
	j.raw(`,"dur":`)
	j.int(max(end-ts, 0))
	if args != nil {
		j.raw(`,"args":{`)
		args()
		j.raw("}")
	}
	j.raw("}")
	p.sum.Slices++
}

func (p *perfettoDevice) steps() {
	m := p.m
	if m.Phases == nil {
		return
	}
	hasTime := m.Snap.Trace(m.Device).HasTime
	for k, st := range m.Phases.Steps {
		ts, end := st.StartUS, st.EndUS
		if !hasTime {
			ts, end = int64(st.Start), int64(st.End)
		}
		p.slice(st.Name, tidSteps, ts, end, func() {
			j := p.j
			j.raw(`"step":`)
			j.int(int64(k))
			j.raw(`,"first_entry":`)
			j.int(int64(st.Start))
			j.raw(`,"last_entry":`)
			j.int(int64(st.End - 1))
			j.raw(`,"peak_allocated_bytes":`)
			j.int(st.Peak)
			j.raw(`,"end_allocated_bytes":`)
			j.int(st.EndAllocated)
			if st.Partial {
				j.raw(`,"partial":true`)
			}
		})
	}
}

// phases writes each run of entries in one phase (forward, backward,
// optimizer, ...) as a slice up to the next run's first entry.
func (p *perfettoDevice) phases() {
	m := p.m
	if m.Phases == nil {
		return
	}
	of := m.Phases.Of
	n := len(of)
	for lo := 0; lo < n; {
		hi := lo + 1
		for hi < n && of[hi] == of[lo] {
			hi++
		}
		if of[lo] != memory.PhaseUnknown {
			end := m.timeUS(hi - 1)
			if hi < n {
				end = m.timeUS(hi)
			}
			p.slice(of[lo].String(), tidPhases, m.timeUS(lo), end, func() {
				p.j.raw(`"first_entry":`)
				p.j.int(int64(lo))
				p.j.raw(`,"last_entry":`)
				p.j.int(int64(hi - 1))
			})
		}
		lo = hi
	}
}

// annotations writes record_function START/END pairs of the device.
func (p *perfettoDevice) annotations() {
	m := p.m
	s := m.Snap
	if !s.Trace(m.Device).HasTime {
		return
	}
	for _, r := range memory.AnnotationRanges(s, m.Device) {
		if !r.Open {
			p.slice(r.Name, tidAnnotations, r.StartUS, r.EndUS, nil)
		}
	}
}

func (p *perfettoDevice) instant(name string, i int, args func()) {
	p.head("i", name, tidEvents, p.m.timeUS(i))
	j := p.j
	j.raw(`,"s":"p","args":{"entry":`)
	j.int(int64(i))
	args()
	j.raw("}}")
	p.sum.Instants++
}

func (p *perfettoDevice) instants() {
	m := p.m
	if m.Peak >= 0 && m.Peak < m.Entries() {
		t := &m.Replay.Timeline
		p.instant("peak allocated", m.Peak, func() {
			p.j.raw(`,"allocated_bytes":`)
			p.j.int(t.Allocated[m.Peak])
			p.j.raw(`,"reserved_bytes":`)
			p.j.int(t.Reserved[m.Peak])
		})
	}
	tr := m.Snap.Trace(m.Device)
	for i, a := range tr.Action {
		if a == snapshot.ActionOOM {
			p.instant("out of memory", i, func() {
				p.j.raw(`,"requested_bytes":`)
				p.j.int(tr.Size[i])
				p.j.raw(`,"device_free_bytes":`)
				p.j.uint(tr.Addr[i])
			})
		}
	}
}
