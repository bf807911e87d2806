package kineto

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"encoding/json"

	"github.com/ptscope/ptscope/internal/input"
	"github.com/ptscope/ptscope/internal/mapfile"
)

// Options tune the reader.
type Options struct {
	Workers    int // decoding goroutines; 0 means GOMAXPROCS
	ChunkBytes int // bytes read per batch; 0 means 1 MiB
	MaxEvent   int // largest event accepted; 0 means 16 MiB
	// Source is where files are opened and the memory budget the reading
	// is checked against (nil: the default budget).
	Source *input.Source

	// stdJSONOnly decodes every event with encoding/json (the decoder scanEvent
	// must agree with), for the differential tests.
	stdJSONOnly bool
}

func (o Options) withDefaults() Options {
	if o.Workers <= 0 {
		o.Workers = runtime.GOMAXPROCS(0)
	}
	if o.ChunkBytes <= 0 {
		o.ChunkBytes = 1 << 20
	}
	if o.MaxEvent <= 0 {
		o.MaxEvent = 16 << 20
	}
	o.Source = input.Or(o.Source)
	return o
}

// ReadFile reads a trace file (plain JSON, gzip, xz or zstd). A plain JSON
// regular file is mapped and cut in place (see mapFile), others are read.
func ReadFile(ctx context.Context, path string, opt Options) (*Trace, error) {
	var t *Trace
	var err error
	opt.Source = input.Or(opt.Source)
	if data, unmap, ok := mapFile(path); ok && input.Detect(data[:min(len(data), 6)]) == input.None {
		opt.Source.Track(path)
		t, err = readFrom(ctx, nil, data, func(lo, hi int64) { mapfile.DropPages(data, int(lo), int(hi)) }, opt)
		unmap()
	} else {
		if ok {
			unmap()
		}
		r, oerr := opt.Source.Open(path)
		if oerr != nil {
			return nil, oerr
		}
		defer r.Close()
		t, err = Read(ctx, r, opt)
	}
	if t != nil {
		t.Path = path
	}
	if err != nil {
		return t, fmt.Errorf("%s: %w", input.Name(path), err)
	}
	return t, nil
}

// Read reads a trace from r, which must already be decompressed. A damaged
// or truncated input that still held events gives a trace whose Damage says
// what was lost, and a nil error; an input with no usable event gives an
// error naming the byte offset.
func Read(ctx context.Context, r io.Reader, opt Options) (*Trace, error) {
	return readFrom(ctx, r, nil, nil, opt)
}

// readBytes reads a trace held in memory (a mapped file): as Read, but the
// batches are cut out of data without a copy. Nothing decoded refers to
// data, which may be unmapped once it returns. If data is a mapping whose
// file is cut short meanwhile, the fault becomes an error.
func readBytes(ctx context.Context, data []byte, opt Options) (*Trace, error) {
	return readFrom(ctx, nil, data, nil, opt)
}

// readFrom reads from r, or from data when it is not nil; release (if not
// nil) is told each range of data decoded, which nothing reads again.
func readFrom(ctx context.Context, r io.Reader, data []byte, release func(lo, hi int64), opt Options) (*Trace, error) {
	t := &Trace{Strings: []string{""}}
	m := newMerger(t)
	err := decode(ctx, r, data, release, opt, t, func(p *part) error {
		m.add(p)
		return nil
	}, m.finish)
	if err != nil {
		return nil, err
	}
	return t, nil
}

// Stream reads a trace as Read does without keeping its events: it hands
// them to fn in batches, in file order, on one goroutine. A batch is a
// Trace holding the batch's events only, valid during the call; its string
// ids index the whole trace's Strings (the batch's Strings are those read
// so far), and seq0 is the index its first complete event has in the whole
// trace (the index Read's Events would give it). The returned Trace is the
// header: metadata, strings, threads, processes, damage and size, without
// events. An error from fn stops the reading and is returned.
func Stream(ctx context.Context, r io.Reader, opt Options, fn func(b *Trace, seq0 int64) error) (*Trace, error) {
	t := &Trace{Strings: []string{""}}
	m := newMerger(t)
	var seq0 int64
	err := decode(ctx, r, nil, nil, opt, t, func(p *part) error {
		// indices into the batch's own tables
		m.nGPU, m.nOps, m.nComms = 0, 0, 0
		t.Comms = t.Comms[:0]
		m.add(p)
		b := &Trace{Path: t.Path, Meta: t.Meta, Strings: t.Strings, Events: m.events[0], GPU: m.gpu[0], Ops: m.ops[0],
			Comms: t.Comms, Memory: m.mem[0], Flows: m.flows[0], Threads: t.Threads, Processes: t.Processes, PIDNames: t.PIDNames}
		m.events, m.gpu, m.ops, m.mem, m.flows = m.events[:0], m.gpu[:0], m.ops[:0], m.mem[:0], m.flows[:0]
		n := b.Events.Len()
		err := fn(b, seq0)
		seq0 += int64(n)
		return err
	}, func() { t.Comms = nil })
	if err != nil {
		return nil, err
	}
	return t, nil
}

// errFileChanged is what a fault on a mapped input becomes.
var errFileChanged = errors.New("the file changed (was cut short?) while it was read")

// inData says whether the panic e is a memory fault inside data.
func inData(e any, data []byte) bool {
	f, ok := e.(interface{ Addr() uintptr })
	if !ok || len(data) == 0 {
		return false
	}
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(data)))
	return f.Addr() >= lo && f.Addr()-lo < uintptr(len(data))
}

// decode runs the reader: a splitter cuts the input (r, or data when it is
// held whole; release as readFrom's) into batches, workers decode them
// into parts, and sink gets the parts in file order; finish runs after the
// last one. It fills t's metadata and damage. It returns only once no
// goroutine of its own touches data any more.
func decode(ctx context.Context, r io.Reader, data []byte, release func(lo, hi int64), opt Options, t *Trace, sink func(p *part) error, finish func()) (err error) {
	opt = opt.withDefaults()
	var fault atomic.Bool
	// guard makes a fault on a mapping that shrank under us a panic of the
	// calling goroutine, recovered by the deferred call it returns.
	guard := func() func() {
		if data == nil {
			return func() {}
		}
		old := debug.SetPanicOnFault(true)
		return func() {
			debug.SetPanicOnFault(old)
			if e := recover(); e != nil {
				if !inData(e, data) {
					panic(e)
				}
				fault.Store(true)
			}
		}
	}
	defer func() {
		if fault.Load() {
			err = errFileChanged
		}
	}()
	warn := func(s string) {
		if len(t.Damage.Warnings) < 20 {
			t.Damage.Warnings = append(t.Damage.Warnings, s)
		}
	}
	var splitWarn []string
	s := &splitter{r: r, data: data, chunk: opt.ChunkBytes, maxEvent: opt.MaxEvent, maxHeader: 64 << 20, src: opt.Source,
		warn: func(m string) { splitWarn = append(splitWarn, m) }}
	if err := func() error { defer guard()(); return s.start() }(); err != nil || fault.Load() {
		return err
	}
	for _, w := range splitWarn {
		warn(w)
	}
	splitWarn = nil
	t.Meta.BareArray = s.bareArray
	s.startIndex() // the splitter's goroutine stops it

	batches := make(chan *batch, opt.Workers)
	parts := make(chan *part, opt.Workers)
	free := make(chan *part, 2*opt.Workers+2)
	for i := 0; i < cap(free); i++ {
		p := newPart()
		p.stdJSONOnly = opt.stdJSONOnly
		free <- p
	}
	ctx, cancel := context.WithCancel(ctx)
	splitDone := make(chan struct{})
	defer func() {
		// stop and wait for the goroutines (they may be reading data)
		cancel()
		for range parts {
		}
		<-splitDone
	}()
	var wg sync.WaitGroup
	for w := 0; w < opt.Workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range batches {
				p := b.part
				if !func() bool { defer guard()(); decodeBatch(b, p); return true }() {
					cancel()
					return
				}
				if release != nil {
					release(b.offset, b.offset+int64(len(b.buf)))
				}
				b.part = nil
				select {
				case parts <- p:
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	var splitErr error
	go func() {
		defer close(splitDone)
		defer close(batches)
		defer guard()()
		defer s.stopIndex()
		for {
			b, err := s.next()
			if err != nil {
				if err != io.EOF {
					splitErr = err
				}
				return
			}
			// a part from the pool bounds the batches in flight, so that
			// the merger always gets the one it waits for
			select {
			case b.part = <-free:
			case <-ctx.Done():
				return
			}
			select {
			case batches <- b:
			case <-ctx.Done():
				return
			}
		}
	}()
	go func() { wg.Wait(); close(parts) }()

	pending := map[int]*part{}
	nextSeq := 1
	var sinkErr error
	var nEvents, nMem int // complete and memory events kept
	for p := range parts {
		pending[p.seq] = p
		for sinkErr == nil {
			q, ok := pending[nextSeq]
			if !ok {
				break
			}
			delete(pending, nextSeq)
			nEvents += len(q.ev.TS)
			nMem += len(q.mem)
			sinkErr = sink(q)
			nextSeq++
			free <- q
		}
		if sinkErr != nil {
			cancel()
			for range parts {
			}
			return sinkErr
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	finish()
	t.Bytes = s.off
	for _, w := range splitWarn {
		warn(w)
	}
	t.Damage.Garbage += s.garbage
	t.Damage.Dropped += s.dropped
	if s.damaged > 0 {
		warn(fmt.Sprintf("%d strings held a raw newline (unescaped quote?); they were closed at the line end", s.damaged))
	}
	if t.Damage.Garbage > 0 {
		warn(fmt.Sprintf("%d stray bytes between events were skipped", t.Damage.Garbage))
	}
	if splitErr != nil {
		if !errors.Is(splitErr, errTruncated) {
			return splitErr
		}
		t.Damage.Truncated = true
	}
	if !s.bareArray && s.done && !t.Damage.Truncated && !bytes.HasSuffix(bytes.TrimSpace(s.tail), []byte("}")) {
		t.Damage.Truncated = true
		warn(fmt.Sprintf("offset %d: input truncated after the traceEvents array", s.off))
	}
	if err := parseMeta(t, s.header, s.tail); err != nil {
		warn("metadata: " + err.Error())
	}
	if d := t.Damage; d.Invalid > 0 {
		if n := nEvents + nMem; 2*d.Invalid > n {
			return fmt.Errorf("%d of %d events are invalid (first: %s): not a trace PyTorch wrote", d.Invalid, n, d.InvalidFirst)
		}
		warn(fmt.Sprintf("%d events had a field of the wrong type or an impossible value, read as 0 or dropped (first: %s)", d.Invalid, d.InvalidFirst))
	}
	if nEvents == 0 && nMem == 0 {
		if t.Damage.Truncated || t.Damage.Dropped > 0 {
			return fmt.Errorf("offset %d: no readable event (%d dropped, truncated=%v)", s.off, t.Damage.Dropped, t.Damage.Truncated)
		}
	}
	return nil
}

// merger appends parts to the trace in order, translating local string ids.
type merger struct {
	t      *Trace
	strIdx map[string]uint32
	pidIdx map[string]int32
	tr     []uint32
	trPid  []int32

	// pieces of the columns and tables, joined by finish
	events             []Events
	gpu                [][]GPUInfo
	ops                [][]OpInfo
	mem                [][]MemoryEvent
	flows              [][]Flow
	nGPU, nOps, nComms int32
}

// join concatenates pieces into one exactly sized slice, dropping each
// piece as soon as it is copied.
func join[T any](pieces [][]T) []T {
	n := 0
	for _, p := range pieces {
		n += len(p)
	}
	out := make([]T, 0, n)
	for i := range pieces {
		out = append(out, pieces[i]...)
		pieces[i] = nil
	}
	return out
}

// finish joins the pieces into the trace's columns, one column at a time.
func (m *merger) finish() {
	t, ev := m.t, m.events
	t.Events.TS = join(pick(ev, func(e *Events) *[]int64 { return &e.TS }))
	t.Events.Dur = join(pick(ev, func(e *Events) *[]int64 { return &e.Dur }))
	t.Events.Ext = join(pick(ev, func(e *Events) *[]int64 { return &e.Ext }))
	t.Events.Corr = join(pick(ev, func(e *Events) *[]int64 { return &e.Corr }))
	t.Events.Name = join(pick(ev, func(e *Events) *[]uint32 { return &e.Name }))
	t.Events.Cat = join(pick(ev, func(e *Events) *[]uint32 { return &e.Cat }))
	t.Events.PID = join(pick(ev, func(e *Events) *[]int32 { return &e.PID }))
	t.Events.TID = join(pick(ev, func(e *Events) *[]int32 { return &e.TID }))
	t.Events.Aux = join(pick(ev, func(e *Events) *[]int32 { return &e.Aux }))
	t.Events.Kind = join(pick(ev, func(e *Events) *[]Kind { return &e.Kind }))
	t.GPU, t.Ops, t.Memory, t.Flows = join(m.gpu), join(m.ops), join(m.mem), join(m.flows)
	m.events, m.gpu, m.ops, m.mem, m.flows = nil, nil, nil, nil, nil
}

// pick takes one column out of every piece (leaving nil behind, so that the
// piece can be collected once joined).
func pick[T any](ev []Events, f func(e *Events) *[]T) [][]T {
	out := make([][]T, len(ev))
	for i := range ev {
		p := f(&ev[i])
		out[i], *p = *p, nil
	}
	return out
}

func newMerger(t *Trace) *merger {
	return &merger{t: t, strIdx: map[string]uint32{"": 0}, pidIdx: map[string]int32{}}
}

func (m *merger) add(p *part) {
	t := m.t
	m.tr = m.tr[:0]
	for _, s := range p.strs {
		id, ok := m.strIdx[s]
		if !ok {
			id = uint32(len(t.Strings))
			t.Strings = append(t.Strings, s)
			m.strIdx[s] = id
		}
		m.tr = append(m.tr, id)
	}
	m.trPid = m.trPid[:0]
	for _, s := range p.pidStrs {
		id, ok := m.pidIdx[s]
		if !ok {
			id = StringPIDBase - int32(len(t.PIDNames))
			t.PIDNames = append(t.PIDNames, s)
			m.pidIdx[s] = id
		}
		m.trPid = append(m.trPid, id)
	}
	pid := func(v int32) int32 {
		if v <= StringPIDBase {
			return m.trPid[StringPIDBase-v]
		}
		return v
	}
	// each part is copied once into exactly sized pieces; finish joins the
	// pieces once, which copies far less than growing whole-trace columns
	pe := &p.ev
	n := len(pe.TS)
	k := Events{
		TS: slices.Clone(pe.TS), Dur: slices.Clone(pe.Dur), Kind: slices.Clone(pe.Kind),
		Ext: slices.Clone(pe.Ext), Corr: slices.Clone(pe.Corr),
		Name: make([]uint32, n), Cat: make([]uint32, n), PID: make([]int32, n), TID: make([]int32, n), Aux: make([]int32, n),
	}
	for i := 0; i < n; i++ {
		k.Name[i], k.Cat[i] = m.tr[pe.Name[i]], m.tr[pe.Cat[i]]
		k.PID[i], k.TID[i] = pid(pe.PID[i]), pid(pe.TID[i])
		v := pe.Aux[i]
		switch {
		case v < 0:
		case pe.Kind[i].HasGPUInfo():
			v += m.nGPU
		default:
			v += m.nOps
		}
		k.Aux[i] = v
	}
	m.events = append(m.events, k)
	gpu := slices.Clone(p.gpu)
	for i := range gpu {
		if gpu[i].Comm >= 0 {
			gpu[i].Comm += m.nComms
		}
	}
	ops := slices.Clone(p.ops)
	for i := range ops {
		o := &ops[i]
		if o.Comm >= 0 {
			o.Comm += m.nComms
		}
		o.Shape, o.Types = m.tr[o.Shape], m.tr[o.Types]
	}
	m.gpu, m.ops = append(m.gpu, gpu), append(m.ops, ops)
	m.nGPU, m.nOps = m.nGPU+int32(len(gpu)), m.nOps+int32(len(ops))
	for _, c := range p.comms {
		c.Collective, c.Dtype, c.PGName = m.tr[c.Collective], m.tr[c.Dtype], m.tr[c.PGName]
		t.Comms = append(t.Comms, c)
	}
	m.nComms = int32(len(t.Comms))
	mem := slices.Clone(p.mem)
	for i := range mem {
		mem[i].PID, mem[i].TID = pid(mem[i].PID), pid(mem[i].TID)
	}
	flows := slices.Clone(p.flows)
	for i := range flows {
		flows[i].PID, flows[i].TID = pid(flows[i].PID), pid(flows[i].TID)
	}
	m.mem, m.flows = append(m.mem, mem), append(m.flows, flows)
	for _, th := range p.threads {
		th.PID, th.TID = pid(th.PID), pid(th.TID)
		t.Threads = append(t.Threads, th)
	}
	for _, pr := range p.procs {
		pr.PID = pid(pr.PID)
		t.Processes = append(t.Processes, pr)
	}
	t.Damage.Repaired += p.damage.Repaired
	t.Damage.Dropped += p.damage.Dropped
	if t.Damage.Invalid == 0 {
		t.Damage.InvalidFirst = p.damage.InvalidFirst
	}
	t.Damage.Invalid += p.damage.Invalid
	for _, w := range p.damage.Warnings {
		if len(t.Damage.Warnings) < 20 {
			t.Damage.Warnings = append(t.Damage.Warnings, w)
		}
	}
}

type rawMeta struct {
	SchemaVersion       Num          `json:"schemaVersion"`
	DeviceProperties    []Device     `json:"deviceProperties"`
	DistributedInfo     *Distributed `json:"distributedInfo"`
	TraceName           string       `json:"traceName"`
	BaseTimeNanoseconds rawJSON      `json:"baseTimeNanoseconds"`
	DisplayTimeUnit     string       `json:"displayTimeUnit"`
	WithStack           Num          `json:"with_stack"`
	RecordShapes        Num          `json:"record_shapes"`
	ProfileMemory       Num          `json:"profile_memory"`
}

var rankRE = regexp.MustCompile(`"rank"\s*:\s*(\d+)`)

// parseMeta decodes the top-level keys around the events array.
func parseMeta(t *Trace, header, tail []byte) error {
	if t.Meta.BareArray || len(header) == 0 {
		return nil
	}
	var doc bytes.Buffer
	doc.Write(header)
	doc.WriteString(`"traceEvents":null`)
	tl := bytes.TrimSpace(tail)
	if len(tl) == 0 {
		doc.WriteString("}") // truncated: close the object
	} else {
		doc.Write(tl)
	}
	var rm rawMeta
	err := json.Unmarshal(doc.Bytes(), &rm)
	if err != nil {
		// fall back to the header alone, then to HTA's rank regexp
		doc.Reset()
		doc.Write(header)
		doc.WriteString(`"traceEvents":null}`)
		rm = rawMeta{}
		if err2 := json.Unmarshal(doc.Bytes(), &rm); err2 != nil {
			if mm := rankRE.FindSubmatch(append(header, tail...)); mm != nil {
				var r int
				fmt.Sscan(string(mm[1]), &r)
				t.Meta.Distributed = &Distributed{Rank: r}
			}
			return err2
		}
	}
	t.Meta.SchemaVersion = int(rm.SchemaVersion.I)
	t.Meta.Devices = rm.DeviceProperties
	t.Meta.Distributed = rm.DistributedInfo
	t.Meta.TraceName = rm.TraceName
	t.Meta.DisplayTimeUnit = rm.DisplayTimeUnit
	t.Meta.WithStack = rm.WithStack.I != 0
	t.Meta.RecordShapes = rm.RecordShapes.I != 0
	t.Meta.ProfileMemory = rm.ProfileMemory.I != 0
	if n := parseNum(bytes.TrimSpace(rm.BaseTimeNanoseconds)); n.OK {
		t.Meta.BaseTimeNS = n.I
	}
	if err != nil {
		return fmt.Errorf("keys after traceEvents unreadable: %s", shortErr(err))
	}
	return nil
}
