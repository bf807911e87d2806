package perf

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"

	"github.com/ptscope/ptscope/internal/kineto"
	"github.com/ptscope/ptscope/internal/units"
)

// The streaming path analyses a trace too large to hold (docs/trace.md,
// "Traces larger than memory"): it decodes the JSON once, writing every
// event as a binary record to a temporary folder and keeping only what the
// whole trace decides (step markers, launches, facts); it then finds the
// steps' bounds, cuts the steps into windows of about StreamOptions.WindowEvents events,
// routes each record to the files of the windows that need it, and
// analyses the windows one after another, merging their results into the
// report the whole trace would give. Memory holds a window or two, the
// launches' correlation ids and the merged tables.

// StreamOptions tune the streamed analysis.
type StreamOptions struct {
	// Path is the trace's path (its Rank's Path); Name is how messages
	// name it (printable).
	Path, Name string
	// WindowEvents is the number of events a window holds (the caller
	// derives it from its memory budget; tests make it small).
	WindowEvents int64
	// Notify, when set, is told how the trace is analysed.
	Notify func(string)
}

// launchRef is a runtime call that launches GPU work: its correlation id
// and span.
type launchRef struct{ corr, ts, end int64 }

// launchTable finds a GPU event's launch by correlation id; among calls of
// one id, the last in file order (as the whole-trace analysis does).
type launchTable []launchRef

func (l launchTable) sort() {
	slices.SortStableFunc(l, func(a, b launchRef) int {
		switch {
		case a.corr < b.corr:
			return -1
		case a.corr > b.corr:
			return 1
		}
		return 0
	})
}

func (l launchTable) find(corr int64) (launchRef, bool) {
	if corr < 0 {
		return launchRef{}, false
	}
	k := sort.Search(len(l), func(i int) bool { return l[i].corr > corr }) - 1
	if k >= 0 && l[k].corr == corr {
		return l[k], true
	}
	return launchRef{}, false
}

// batchSpan is the start times of one batch of events: the weight of a
// window is estimated from them, spreading each batch evenly.
type batchSpan struct {
	s, e int64
	n    int64
}

func weightOf(spans []batchSpan) func(from, to int64) int64 {
	return func(from, to int64) int64 {
		var w float64
		for _, b := range spans {
			if b.e < from || b.s >= to {
				continue
			}
			if b.e == b.s {
				w += float64(b.n)
				continue
			}
			lo, hi := max(b.s, from), min(b.e, to)
			w += float64(b.n) * float64(hi-lo) / float64(b.e-b.s)
		}
		return int64(w)
	}
}

// spill is a buffered record file.
type spill struct {
	f *os.File
	w *bufio.Writer
}

func newSpill(path string, size int) (*spill, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	return &spill{f: f, w: bufio.NewWriterSize(f, size)}, nil
}

func (s *spill) write(b []byte) error {
	_, err := s.w.Write(b)
	return err
}

func (s *spill) close() error {
	err := s.w.Flush()
	if cerr := s.f.Close(); err == nil {
		err = cerr
	}
	return err
}

// eachRecord calls fn with every record of a spill file, in order, and
// its offset in the file; it stops when ctx is done.
func eachRecord(ctx context.Context, path string, fn func(r kineto.Record, off int64) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 1<<20)
	var off, k int64
	for {
		h, err := br.Peek(4)
		if err == io.EOF && len(h) == 0 {
			return nil
		}
		if len(h) < 4 {
			return fmt.Errorf("%s: offset %d: truncated record", filepath.Base(path), off)
		}
		n := int(h[2]) | int(h[3])<<8
		rec, err := br.Peek(n)
		if err != nil || n < 4 {
			return fmt.Errorf("%s: offset %d: truncated record", filepath.Base(path), off)
		}
		if k++; k%(1<<16) == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if err := fn(kineto.Record(rec), off); err != nil {
			return err
		}
		br.Discard(n)
		off += int64(n)
	}
}

// AnalyzeStream reads the trace r (already decompressed) and analyses it
// with bounded memory, giving the Rank that Analyze gives for the whole
// trace. A trace without ProfilerStep#N markers has no step to cut at: it
// is analysed whole, from its records. Errors and notices name the trace
// as so.Name; the spill files go to a temporary folder, removed at the end.
func AnalyzeStream(ctx context.Context, r io.Reader, ro kineto.Options, a Options, so StreamOptions) (*Rank, error) {
	dir, err := os.MkdirTemp("", "ptscope-trace-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	s := &streamRun{ctx: ctx, dir: dir, so: so, logPath: filepath.Join(dir, "events"), sidePath: filepath.Join(dir, "side")}
	// 1. decode once: every record to the log, GPU and memory records to
	// the side log, and what the whole trace decides
	facts, err := s.decode(r, ro)
	if err != nil {
		return nil, err
	}
	plan := newWindowPlan(facts, s.markers, a)
	if plan == nil {
		return s.whole(a)
	}
	// 2. the steps' bounds, from every GPU event and memory event
	if err := s.bounds(plan); err != nil {
		return nil, err
	}
	// 3. route every record to the windows that need it
	if err := s.route(plan); err != nil {
		return nil, err
	}
	// 4. analyse the windows, the next one read while one is analysed
	return s.analyse(plan)
}

// streamRun is the state of one streamed analysis between its passes.
type streamRun struct {
	ctx               context.Context
	dir               string
	so                StreamOptions
	logPath, sidePath string // every record; GPU and memory records

	header   *kineto.Trace // the trace without its events
	markers  []stepMarker
	launches launchTable
	weights  []batchSpan
	// need are the ops that own GPU events without a launch in the
	// trace, by External id (perf's link.go); corr 0 once found
	need map[int64]launchRef
}

// decode reads the trace once, writing the spill logs, and returns the
// facts the whole trace decides.
func (s *streamRun) decode(r io.Reader, ro kineto.Options) (*Facts, error) {
	ctx := s.ctx
	logF, err := newSpill(s.logPath, 1<<20)
	if err != nil {
		return nil, err
	}
	sideF, err := newSpill(s.sidePath, 1<<20)
	if err != nil {
		logF.close()
		return nil, err
	}
	fs := newFactScanner()
	var rec []byte
	header, err := kineto.Stream(ctx, r, ro, func(b *kineto.Trace, seq0 int64) error {
		fs.Add(b)
		ev := &b.Events
		rec = rec[:0]
		side := []byte(nil)
		bs := batchSpan{s: math.MaxInt64, e: math.MinInt64}
		for i := 0; i < ev.Len(); i++ {
			k := ev.Kind[i]
			n := len(rec)
			rec = kineto.AppendEvent(rec, b, i, seq0+int64(i), false)
			switch {
			case k.IsGPU():
				side = append(side, rec[n:]...)
			case k.IsLaunch() && ev.Corr[i] >= 0:
				s.launches = append(s.launches, launchRef{ev.Corr[i], ev.TS[i], ev.End(i)})
			}
			if isStepMarker(k, b.Name(i)) {
				s.markers = append(s.markers, stepMarker{Name: b.Name(i), TS: ev.TS[i], End: ev.End(i)})
			}
			bs.s, bs.e = min(bs.s, ev.TS[i]), max(bs.e, ev.TS[i])
			bs.n++
		}
		for i := range b.Memory {
			n := len(rec)
			rec = kineto.AppendMemory(rec, &b.Memory[i], true)
			side = append(side, rec[n:]...)
		}
		for i := range b.Flows {
			rec = kineto.AppendFlow(rec, &b.Flows[i])
		}
		if bs.n > 0 {
			s.weights = append(s.weights, bs)
		}
		if err := logF.write(rec); err != nil {
			return err
		}
		return sideF.write(side)
	})
	if cerr := logF.close(); err == nil {
		err = cerr
	}
	if cerr := sideF.close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.so.Name, err)
	}
	header.Path = s.so.Path
	s.header = header
	return fs.Facts(header), nil
}

// whole analyses a trace without steps to cut at, whole, from its records.
func (s *streamRun) whole(a Options) (*Rank, error) {
	if s.so.Notify != nil {
		s.so.Notify(fmt.Sprintf("%s: no ProfilerStep#N to cut the trace at: it is analysed whole, in memory", s.so.Name))
	}
	bl := kineto.NewBuilder(s.header)
	err := eachRecord(s.ctx, s.logPath, func(r kineto.Record, off int64) error { return bl.Add(r, off) })
	if err != nil {
		return nil, err
	}
	t, _, _ := bl.Trace()
	t.Damage = s.header.Damage
	return Analyze(t, a), nil
}

// gpuLaunch finds the launch of a GPU record.
func (s *streamRun) gpuLaunch(r kineto.Record) (bool, launchRef) {
	l, ok := s.launches.find(r.Corr())
	return ok, l
}

// extOp is the op that owns a GPU event without a launch.
func (s *streamRun) extOp(r kineto.Record) (launchRef, bool) {
	o, ok := s.need[r.Ext()]
	return o, ok && o.corr == 0
}

// bounds finds the steps' bounds from every GPU and memory event, cuts
// the steps into windows and gives each window its context.
func (s *streamRun) bounds(plan *windowPlan) error {
	ctx := s.ctx
	s.launches.sort()
	s.need = map[int64]launchRef{}
	err := eachRecord(ctx, s.sidePath, func(r kineto.Record, _ int64) error {
		if r.Tag() == kineto.RecordMemory {
			plan.Memory(r.Memory())
			return nil
		}
		ok, l := s.gpuLaunch(r)
		plan.GPU(ok, l.ts, l.end, r.TS(), r.End())
		if x := r.Ext(); !ok && x > 0 {
			s.need[x] = launchRef{corr: -1}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if len(s.need) > 0 {
		err = eachRecord(ctx, s.logPath, func(r kineto.Record, _ int64) error {
			if r.Tag() == kineto.RecordEvent && isOp(r.Kind()) {
				if o, ok := s.need[r.Ext()]; ok && o.corr < 0 {
					s.need[r.Ext()] = launchRef{0, r.TS(), r.End()}
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	maxW := s.so.WindowEvents
	var total int64
	for _, b := range s.weights {
		total += b.n
	}
	maxW = max(maxW, total/maxWindows)
	plan.Cut(maxW, weightOf(s.weights))
	err = eachRecord(ctx, s.sidePath, func(r kineto.Record, _ int64) error {
		if r.Tag() == kineto.RecordEvent {
			ok, l := s.gpuLaunch(r)
			plan.Context(r.Device(), r.Seq(), ok, l.ts, r.TS(), r.End())
			if o, byExt := s.extOp(r); !ok && byExt {
				plan.Reach(r.TS(), r.End(), o.ts)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	plan.FinishContext()
	os.Remove(s.sidePath)
	if s.so.Notify != nil {
		s.so.Notify(fmt.Sprintf("%s: %s of JSON read, analysed in %d windows of its %d steps", s.so.Name,
			units.Bytes(s.header.Bytes), plan.Windows(), plan.Steps()))
	}
	return nil
}

// route writes every record to the files of the windows that need it:
// its owner's, and those it is context of.
func (s *streamRun) route(plan *windowPlan) error {
	nw := plan.Windows()
	wins := make([]*spill, nw)
	var err error
	for w := range wins {
		if wins[w], err = newSpill(filepath.Join(s.dir, fmt.Sprintf("w%d", w)), 256<<10); err != nil {
			for _, sp := range wins[:w] {
				sp.close()
			}
			return err
		}
	}
	var werr error
	put := func(w int, r kineto.Record, owned bool) {
		r.SetOwned(owned)
		if err := wins[w].write(r); err != nil && werr == nil {
			werr = err
		}
	}
	err = eachRecord(s.ctx, s.logPath, func(r kineto.Record, _ int64) error {
		switch r.Tag() {
		case kineto.RecordMemory:
			put(plan.HostOwner(r.TS()), r, true)
		case kineto.RecordFlow:
			plan.Overlaps(r.TS(), r.TS(), func(w int) { put(w, r, false) })
		default:
			ts, end := r.TS(), r.End()
			var owner int
			if r.Kind().IsGPU() {
				ok, l := s.gpuLaunch(r)
				if o, byExt := s.extOp(r); !ok && byExt {
					ok, l = true, o
				}
				owner = plan.GPUOwner(ok, l.ts, ts)
			} else {
				owner = plan.HostOwner(ts)
			}
			done := false
			plan.Overlaps(ts, end, func(w int) {
				if w == owner {
					done = true
				}
				put(w, r, w == owner)
			})
			if !done {
				put(owner, r, true)
			}
		}
		return werr
	})
	for _, sp := range wins {
		if cerr := sp.close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return err
	}
	os.Remove(s.logPath)
	s.launches = nil
	return nil
}

// analyse analyses the windows in order, merging their results, the next
// window read while one is analysed.
func (s *streamRun) analyse(plan *windowPlan) (*Rank, error) {
	nw := plan.Windows()
	m := plan.Merger()
	type built struct {
		t   *kineto.Trace
		own []bool
		seq []int64
		err error
	}
	next := make(chan built, 1)
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(next)
		for w := 0; w < nw; w++ {
			p := filepath.Join(s.dir, fmt.Sprintf("w%d", w))
			bl := kineto.NewBuilder(s.header)
			err := eachRecord(ctx, p, func(r kineto.Record, off int64) error { return bl.Add(r, off) })
			os.Remove(p)
			var b built
			b.t, b.own, b.seq = bl.Trace()
			if err != nil {
				b.err = fmt.Errorf("%s: window %d: %w", s.so.Name, w, err)
			}
			select {
			case next <- b:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	w := 0
	for b := range next {
		if b.err != nil {
			cancel()
			wg.Wait()
			return nil, b.err
		}
		if err := ctx.Err(); err != nil {
			cancel()
			wg.Wait()
			return nil, err
		}
		m.Add(plan.Analyze(w, b.t, b.own, b.seq))
		w++
	}
	wg.Wait()
	if w != nw {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		return nil, errors.New("streaming analysis stopped early")
	}
	return m.Rank(), nil
}

// maxWindows bounds the number of window files open at once.
const maxWindows = 512
