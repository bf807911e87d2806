package snapshot

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/ptscope/ptscope/internal/input"
	"github.com/ptscope/ptscope/internal/pickle"
	"github.com/ptscope/ptscope/internal/spillmem"
)

// ReadFile reads a snapshot file (pickle or JSON; gzip, xz or zstd
// compressed or not). Errors name the file and the byte offset.
func ReadFile(path string) (*Snapshot, error) { return ReadFileWith(path, ReadOptions{}) }

// ReadOptions control where a snapshot's trace is kept.
type ReadOptions struct {
	// Arena, when set, holds the trace columns (and the decoder's tables
	// as large as them) in its spill file instead of the heap, so that a
	// snapshot larger than memory is read with bounded resident memory;
	// the analyses of the snapshot place their own columns there too
	// (Snapshot.Arena). The arena must outlive every use of the snapshot.
	Arena *spillmem.Arena
}

// ReadFileWith is ReadFile with options.
func ReadFileWith(path string, o ReadOptions) (*Snapshot, error) {
	input.Track(path)
	if s, ok, err := readMapped(path, o.Arena); ok && path != "-" {
		if err != nil {
			return nil, fmt.Errorf("%s: %w", input.Name(path), err)
		}
		return s, nil
	}
	r, err := input.Open(path)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	hint := 0
	if r.Compression == input.None {
		if st, err := os.Stat(path); err == nil && st.Mode().IsRegular() && st.Size() < 1<<40 {
			hint = int(st.Size())
		}
	}
	s, err := readIn(r, hint, runtime.GOMAXPROCS(0), o.Arena)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", input.Name(path), err)
	}
	if r.Compression != input.None {
		s.Format += " (" + string(r.Compression) + ")"
	}
	return s, nil
}

// Read decodes a snapshot from an uncompressed stream.
func Read(r io.Reader) (*Snapshot, error) {
	return read(r, 0, runtime.GOMAXPROCS(0))
}

// read decodes a snapshot; size is the input size when known (0 if not).
// Pickles of protocol 4 and 5 are read into memory and decoded with up to
// workers goroutines; workers 0 forces the streaming sequential decoder.
func read(r io.Reader, size, workers int) (*Snapshot, error) { return readIn(r, size, workers, nil) }

// readIn is read with the trace columns in arena (nil: the heap).
func readIn(r io.Reader, size, workers int, arena *spillmem.Arena) (*Snapshot, error) {
	if l, ok := r.(interface{ Len() int }); ok && size == 0 {
		size = l.Len() // bytes.Reader, bytes.Buffer, strings.Reader
	}
	cr := &countingReader{r: r}
	br := bufio.NewReaderSize(cr, 1<<16)
	head, _ := br.Peek(3)
	if workers > 0 && len(head) >= 2 && head[0] == 0x80 && head[1] >= 4 {
		data, err := readPickle(br, size, arena)
		if err != nil {
			return nil, err
		}
		return readPickleBytesIn(data, workers, false, arena)
	}
	b := newBuilder(arena)
	var root pickle.Value
	var err error
	switch {
	case len(head) == 0:
		return nil, errors.New("offset 0: empty file, expected a pickle or JSON snapshot")
	case isPickle(head):
		p, _ := pickle.Protocol(head)
		b.s.Format = "pickle protocol " + strconv.Itoa(p)
		root, err = pickle.Decode(br, b.pickleOptions())
	default:
		t := bytes.TrimLeft(head, " \t\r\n")
		if len(t) > 0 && (t[0] == '{' || t[0] == '[' || t[0] == 0xef) || len(t) == 0 {
			b.s.Format = "json"
			root, err = decodeJSON(br, b.onDict, b.onList)
		} else {
			return nil, fmt.Errorf("offset 0: byte 0x%02x: not a snapshot (expected a pickle of protocol 0-5, or JSON)", head[0])
		}
	}
	if err != nil {
		return nil, err
	}
	if err := b.finish(root); err != nil {
		return nil, err
	}
	b.s.InputBytes = cr.n
	return b.s, nil
}

// isPickle: the head opens a pickle, of any protocol (a lone 0x80 still
// goes to the decoder, which names the protocol byte it lacks).
func isPickle(head []byte) bool {
	_, ok := pickle.Protocol(head)
	return ok || head[0] == 0x80
}

// pickleOptions are the decoder's hooks and limits.
func (b *builder) pickleOptions() pickle.Options {
	return pickle.Options{OnDict: b.onDict, OnList: b.onList, OnExtend: b.onExtend,
		MaxString: input.MaxString(), MaxValues: input.MaxValues(), LimitNote: input.BudgetNote(),
		Check: func(off int64) error { input.Progress(off); return input.CheckMemory() }}
}

// readPickle reads a pickle to its STOP into memory (up to half the memory
// budget), checking its opcodes as they arrive: a stream that goes wrong
// (a decompression bomb behind a valid header, garbage, a length that lies)
// is refused at its offset, before the rest of it is inflated. The check
// runs on a goroutine of its own, a few reads behind the decompressor, so
// that it costs no time on two cores. size is the input size when known
// (0 if not).
//
// With an arena, the pickle is held in it (the limit stays half the budget,
// now of disk rather than memory, against decompression bombs).
func readPickle(r io.Reader, size int, arena *spillmem.Arena) ([]byte, error) {
	limit := input.MaxInMemory()
	sc := newScanAhead(pickle.NewScanner(pickle.Options{MaxString: input.MaxString(), LimitNote: input.BudgetNote()}))
	checked := 0
	data, err := readAllFuncIn(r, spillmem.MakeCap[byte](arena, 0, size+1), arena, func(buf []byte) error {
		if int64(len(buf)) > limit {
			return fmt.Errorf("offset %d: the decompressed pickle passes %d bytes, half the memory budget (%s)",
				len(buf), limit, input.BudgetNote())
		}
		if err := sc.feed(buf); err != nil {
			return err
		}
		if len(buf)-checked >= 16<<20 {
			checked = len(buf)
			if err := input.CheckMemory(); err != nil {
				return fmt.Errorf("offset %d: %w", len(buf), err)
			}
		}
		return nil
	})
	if serr := sc.wait(); err == nil || err == errStop {
		err = serr
	}
	switch {
	case err == nil || err == errStop:
		return data, nil
	case errors.As(err, new(*pickle.Error)):
		// The decoder's own message for the first bad opcode, which may
		// come before the one the scanner stopped at.
		b := newBuilder(nil)
		derr := func() error { _, err := pickle.DecodeBytes(data, b.pickleOptions()); return err }()
		if derr != nil && !truncation(derr) {
			return nil, derr
		}
		if derr != nil && truncation(derr) {
			// The decoder reads on where the scanner stopped (frames whose
			// lengths lie, say): read the rest unchecked, as before.
			data, err = readAllFuncIn(r, data, arena, func(buf []byte) error {
				if int64(len(buf)) > limit {
					return fmt.Errorf("offset %d: the decompressed pickle passes %d bytes, half the memory budget (%s)",
						len(buf), limit, input.BudgetNote())
				}
				return nil
			})
			if err == nil {
				return data, nil
			}
			return nil, fmt.Errorf("offset %d: %w", len(data), err)
		}
		return nil, err
	}
	return nil, fmt.Errorf("offset %d: %w", len(data), err)
}

// scanAhead runs a pickle.Scanner on its own goroutine over the growing
// input. feed hands it the input read so far and returns the scanner's
// error, or errStop once it saw STOP, as soon as it knows; wait waits for it
// to catch up and returns the same.
type scanAhead struct {
	jobs chan []byte
	done chan struct{}
	err  atomic.Pointer[error]
}

func newScanAhead(sc *pickle.Scanner) *scanAhead {
	a := &scanAhead{jobs: make(chan []byte, 4), done: make(chan struct{})}
	go func() {
		defer close(a.done)
		for buf := range a.jobs {
			if a.err.Load() != nil {
				continue // drain
			}
			err := sc.Feed(buf)
			if err == nil && sc.Done() {
				err = errStop
			}
			if err != nil {
				a.err.Store(&err)
			}
		}
	}()
	return a
}

func (a *scanAhead) feed(buf []byte) error {
	if p := a.err.Load(); p != nil {
		return *p
	}
	a.jobs <- buf // blocks when the scanner is 4 reads behind
	return nil
}

func (a *scanAhead) wait() error {
	close(a.jobs)
	<-a.done
	if p := a.err.Load(); p != nil {
		return *p
	}
	return nil
}

// errStop ends readAllFuncIn early without an error.
var errStop = errors.New("stop")

// truncation reports whether err is the decoder reaching the end of its input.
func truncation(err error) bool {
	var pe *pickle.Error
	return errors.As(err, &pe) && (strings.HasPrefix(pe.Msg, "input ends") || strings.HasPrefix(pe.Msg, "expected a newline"))
}

// readMapped decodes a large uncompressed pickle (protocol 4 or 5) from a
// memory mapping of the file, in parallel; ok is false for other files.
func readMapped(path string, arena *spillmem.Arena) (s *Snapshot, ok bool, err error) {
	// Stat first: opening a FIFO a second time would block, and a stream
	// Find opened must be left for input.Open.
	if st, err := os.Stat(path); err != nil || !st.Mode().IsRegular() {
		return nil, false, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, false, nil
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() || st.Size() < 2*minRegion || st.Size() > 1<<40 {
		return nil, false, nil
	}
	var head [2]byte
	if _, err := f.ReadAt(head[:], 0); err != nil || head[0] != 0x80 || head[1] < 4 || head[1] > 5 {
		return nil, false, nil
	}
	populate := runtime.GOMAXPROCS(0)
	if arena != nil {
		populate = 0 // the pages come in as they are decoded, and go with the arena's
	}
	data, unmap, err := mapFile(f, int(st.Size()), populate)
	if err != nil {
		return nil, false, nil
	}
	defer unmap()
	if arena != nil {
		arena.Track(data)
		defer arena.Untrack(data) // before unmap
	}
	s, err = decodeMapped(data, arena)
	// The stretches' tables are garbage now, about as large as the
	// result; whether to collect them before more work piles up on top is
	// the caller's decision (the CLI does, as it runs with a high GOGC).
	return s, true, err
}

// decodeMapped decodes a mapped file; if the file is cut short meanwhile,
// touching the lost pages faults, which becomes an error here.
func decodeMapped(data []byte, arena *spillmem.Arena) (s *Snapshot, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if recover() != nil {
			s, err = nil, errors.New("the file changed (was cut short?) while it was read")
		}
	}()
	return readPickleBytesIn(data, runtime.GOMAXPROCS(0), true, arena)
}

// maxRead bounds one read of readAllFuncIn, so that check runs at least that
// often (with scanAhead's queue, a bomb is refused within a few of them).
const maxRead = 128 << 10

// readAllFuncIn reads r to its end, appending to buf (grown in arena; nil:
// the heap), calling check with the bytes read so far after each read; an
// error from check stops it (the bytes read are returned with the error).
func readAllFuncIn(r io.Reader, buf []byte, arena *spillmem.Arena, check func([]byte) error) ([]byte, error) {
	for reads := 0; ; reads++ {
		spillmem.PollSparse(arena, reads) // every 32 MiB
		if len(buf) == cap(buf) {
			nb := spillmem.MakeCap[byte](arena, len(buf), 2*cap(buf)+64<<10) // double: append grows large slices by 1.25x
			for lo := 0; lo < len(buf); lo += 16 << 20 {
				copy(nb[lo:], buf[lo:min(lo+16<<20, len(buf))])
				arena.Poll() // a spilled copy maps both halves' pages
			}
			buf = nb
		}
		n, err := r.Read(buf[len(buf):min(cap(buf), len(buf)+maxRead)])
		buf = buf[:len(buf)+n]
		if n > 0 {
			if cerr := check(buf); cerr != nil {
				return buf, cerr
			}
		}
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// readPickleBytes decodes an in-memory pickle: in parallel when workers > 1
// and the file is large, else (and whenever the parallel reader fails, so
// that errors are the sequential reader's) sequentially.
func readPickleBytes(data []byte, workers int, mapped bool) (*Snapshot, error) {
	return readPickleBytesIn(data, workers, mapped, nil)
}

// readPickleBytesIn is readPickleBytes with the trace columns in arena.
func readPickleBytesIn(data []byte, workers int, mapped bool, arena *spillmem.Arena) (*Snapshot, error) {
	if workers >= 1 && len(data) >= 2*minRegion {
		s, env, err := readPickleParallelArena(data, workers, minRegion, mapped, arena)
		if err == nil {
			return s, nil
		}
		// Until the first region is merged the parallel reader is the
		// sequential decoder: its error is the sequential reader's, and
		// decoding again would double the time and memory a bad file costs.
		if err != errMerge && env != nil && env.regions == 0 {
			return nil, err
		}
		runtime.GC() // the failed attempt's tables, before the second one grows its own
	}
	b := newBuilder(arena)
	b.s.Format = "pickle protocol " + strconv.Itoa(int(data[1]))
	root, err := pickle.DecodeBytes(data, b.pickleOptions())
	if err != nil {
		return nil, err
	}
	if err := b.finish(root); err != nil {
		return nil, err
	}
	b.s.InputBytes = int64(len(data))
	return b.s, nil
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// Handles produced by the decoder hooks: bits 48-55 say what they index
// (handles below 2^56 cost the decoder's memo one word).
const (
	hFrame = 1 << 48
	hStack = 2 << 48
	hEntry = 3 << 48
	hBlock = 4 << 48
	hRun   = 5 << 48 // a list of trace entries (a device's trace)
	hMask  = 0xff << 48
)

// builder collects the snapshot while the pickle streams by.
type builder struct {
	s        *Snapshot
	frameIDs map[Frame]FrameID
	stackIDs map[string]StackID
	strIDs   map[string]uint32
	streams  map[int64]uint32
	key      []byte
	ids      []FrameID

	// All trace entries in file order; split per device in finish.
	entries Trace
	blocks  []rawBlock
	runs    []run
	bad     []badRow // entries with a field of the wrong type, in row order
	badAt   map[int]badRow
}

// run is a list of trace entries: the rows [lo, hi) while they come in
// order, or explicit rows once they do not.
type run struct {
	lo, hi int
	rows   []int // nil while contiguous
}

func (r *run) add(row int) {
	if r.rows == nil {
		if r.hi == r.lo || row == r.hi {
			if r.hi == r.lo {
				r.lo = row
			}
			r.hi = row + 1
			return
		}
		for i := r.lo; i < r.hi; i++ {
			r.rows = append(r.rows, i)
		}
	}
	r.rows = append(r.rows, row)
}

type rawBlock struct {
	Block
	hasAddress bool
	history    pickle.Value
	sizeBad    bool // the size had the wrong type (sizeKind)
	sizeKind   pickle.Kind
}

// newBuilder starts a snapshot whose trace columns go to arena (nil: the
// heap).
func newBuilder(arena *spillmem.Arena) *builder {
	b := &builder{
		s:        &Snapshot{Stacks: [][]FrameID{nil}, Strings: []string{""}, Streams: []int64{0}, arena: arena},
		frameIDs: map[Frame]FrameID{},
		stackIDs: map[string]StackID{"": 0},
		strIDs:   map[string]uint32{"": 0},
		streams:  map[int64]uint32{0: 0},
	}
	b.entries.arena = arena
	return b
}

func (b *builder) str(s string) uint32 {
	if id, ok := b.strIDs[s]; ok {
		return id
	}
	id := uint32(len(b.s.Strings))
	b.s.Strings = append(b.s.Strings, s)
	b.strIDs[s] = id
	return id
}

func (b *builder) stream(v pickle.Value) uint32 {
	n, _ := v.Int()
	if u, ok := v.Uint(); ok && n == 0 {
		n = int64(u)
	}
	return b.streamID(n)
}

func (b *builder) streamID(n int64) uint32 {
	if id, ok := b.streams[n]; ok {
		return id
	}
	id := uint32(len(b.s.Streams))
	b.s.Streams = append(b.s.Streams, n)
	b.streams[n] = id
	return id
}

// Key bits for classifying dicts by the keys they hold.
const (
	kAction = 1 << iota
	kState
	kSize
	kFilename
	kLine
	kName
	kBlocks
	kOther
)

func keyBit(k string) int {
	switch k {
	case "action":
		return kAction
	case "state":
		return kState
	case "size":
		return kSize
	case "filename":
		return kFilename
	case "line":
		return kLine
	case "name":
		return kName
	case "blocks":
		return kBlocks
	}
	return kOther
}

func classify(d *pickle.Dict) int {
	m := 0
	for _, k := range d.Keys {
		if s, ok := k.Str(); ok {
			m |= keyBit(s)
		}
	}
	return m
}

// onDict converts frames, trace entries and blocks as soon as they are built.
func (b *builder) onDict(d *pickle.Dict) (pickle.Value, bool) {
	m := classify(d)
	switch {
	case m&kAction != 0:
		return pickle.Handle(hEntry | uint64(b.addEntry(d))), true
	case m&(kFilename|kLine|kName) == kFilename|kLine|kName && m&(kAction|kState|kSize|kBlocks) == 0:
		return pickle.Handle(hFrame | uint64(b.frame(d))), true
	case m&(kState|kSize) == kState|kSize && m&kBlocks == 0:
		b.blocks = append(b.blocks, b.block(d))
		return pickle.Handle(hBlock | uint64(len(b.blocks)-1)), true
	}
	return pickle.Value{}, false
}

// onList interns a complete list of frames as a stack, and turns a list of
// trace entries (a device's trace) into a run of rows.
func (b *builder) onList(l *pickle.List) (pickle.Value, bool) {
	if len(l.Items) == 0 {
		return pickle.Value{}, false
	}
	h0, _ := l.Items[0].Handle()
	switch h0 & hMask {
	case hEntry:
		var r run
		for _, it := range l.Items {
			h, ok := it.Handle()
			if !ok || h&hMask != hEntry {
				return pickle.Value{}, false
			}
			r.add(int(h &^ hMask))
		}
		b.runs = append(b.runs, r)
		return pickle.Handle(hRun | uint64(len(b.runs)-1)), true
	case hFrame:
		if len(l.Items) >= 1000 {
			return pickle.Value{}, false // more APPENDS may follow
		}
		for _, it := range l.Items {
			h, ok := it.Handle()
			if !ok || h&hMask != hFrame {
				return pickle.Value{}, false
			}
		}
		return pickle.Handle(hStack | uint64(b.stackOf(l))), true
	}
	return pickle.Value{}, false
}

// onExtend appends more trace entries to a run.
func (b *builder) onExtend(h uint64, items []pickle.Value) bool {
	if h&hMask != hRun || int(h&^hMask) >= len(b.runs) {
		return false
	}
	r := &b.runs[h&^hMask]
	for _, it := range items {
		e, ok := it.Handle()
		if !ok || e&hMask != hEntry {
			if d := it.Dict(); d != nil && classify(d)&kAction != 0 {
				r.add(b.addEntry(d))
				continue
			}
			return false
		}
		r.add(int(e &^ hMask))
	}
	return true
}

func (b *builder) frame(d *pickle.Dict) FrameID {
	var f Frame
	for i, k := range d.Keys {
		ks, _ := k.Str()
		switch ks {
		case "filename":
			f.Filename, _ = d.Vals[i].Str()
		case "name":
			f.Name, _ = d.Vals[i].Str()
		case "line":
			n, _ := d.Vals[i].Int()
			f.Line = int(n)
		}
	}
	return b.frameID(f)
}

func (b *builder) frameID(f Frame) FrameID {
	if id, ok := b.frameIDs[f]; ok {
		return id
	}
	id := FrameID(len(b.s.Frames))
	b.s.Frames = append(b.s.Frames, f)
	b.frameIDs[f] = id
	return id
}

// stackOf interns a frames list whose items are frame handles or frame dicts.
func (b *builder) stackOf(l *pickle.List) StackID {
	b.ids = b.ids[:0]
	b.key = b.key[:0]
	for _, it := range l.Items {
		var id FrameID
		if h, ok := it.Handle(); ok && h&hMask == hFrame {
			id = FrameID(h &^ hMask)
		} else if fd := it.Dict(); fd != nil {
			id = b.frame(fd)
		} else {
			continue
		}
		b.ids = append(b.ids, id)
	}
	return b.internStack()
}

// internStack interns the frame ids in b.ids as a stack.
func (b *builder) internStack() StackID {
	b.key = b.key[:0]
	for _, id := range b.ids {
		b.key = binary.LittleEndian.AppendUint32(b.key, id)
	}
	if id, ok := b.stackIDs[string(b.key)]; ok {
		return id
	}
	id := StackID(len(b.s.Stacks))
	b.s.Stacks = append(b.s.Stacks, append([]FrameID(nil), b.ids...))
	b.stackIDs[string(b.key)] = id
	return id
}

// stack returns the stack id of a "frames" value in any form.
func (b *builder) stack(v pickle.Value) StackID {
	if h, ok := v.Handle(); ok && h&hMask == hStack {
		return StackID(h &^ hMask)
	}
	if l := v.List(); l != nil && len(l.Items) > 0 {
		return b.stackOf(l)
	}
	return 0
}

func (b *builder) addEntry(d *pickle.Dict) int {
	t := &b.entries
	var (
		action         Action
		addr           uint64
		size, timeUS   int64
		stream, cc, um uint32
		stack          StackID
		bad            = badRow{field: fOther}
		ok             bool
	)
	wrong := func(f uint8, v pickle.Value) {
		if bad.field == fOther {
			bad.field, bad.kind = f, v.Kind()
		}
	}
	for i, k := range d.Keys {
		ks, _ := k.Str()
		v := d.Vals[i]
		switch ks {
		case "action":
			var s string
			if s, ok = v.Str(); !ok {
				wrong(fAction, v)
			}
			action = ParseAction(s)
		case "addr", "device_free":
			if addr, ok = v.Uint(); !ok {
				wrong(fAddr, v)
			}
		case "size":
			if size, ok = v.Int(); !ok {
				wrong(fSize, v)
			}
		case "stream":
			if _, ok = v.Uint(); !ok {
				wrong(fStream, v)
			}
			stream = b.stream(v)
		case "time_us":
			if timeUS, ok = v.Int(); !ok {
				wrong(fTime, v)
			}
			t.HasTime = true
		case "frames":
			switch v.Kind() {
			case pickle.KindNone, pickle.KindList, pickle.KindHandle:
			default:
				wrong(fFrames, v)
			}
			stack = b.stack(v)
		case "compile_context":
			if s, _ := v.Str(); s != "N/A" {
				cc = b.str(s)
			}
		case "user_metadata":
			s, _ := v.Str()
			um = b.str(s)
		}
	}
	r := t.appendRow(row{action, addr, size, timeUS, stream, stack, cc, um})
	if bad.field != fOther {
		bad.row = r
		b.bad = append(b.bad, bad)
	}
	return r
}

// badRow is a trace entry read with a field of the wrong type (the
// parallel reader's workers leave such entries to this builder).
type badRow struct {
	row   int
	field uint8 // fAction, fAddr...
	kind  pickle.Kind
}

var fieldNames = [...]string{fAction: "action", fAddr: "addr", fSize: "size", fStream: "stream", fTime: "time_us", fFrames: "frames"}

// row is one trace entry on its way into the columns.
type row struct {
	action       Action
	addr         uint64
	size, timeUS int64
	stream       uint32
	stack        StackID
	cc, um       uint32
}

// appendRow appends r to every column (growing them together) and returns
// its index.
func (t *Trace) appendRow(r row) int {
	if len(t.Action) == cap(t.Action) {
		t.grow()
	}
	t.Action = append(t.Action, r.action)
	t.Addr = append(t.Addr, r.addr)
	t.Size = append(t.Size, r.size)
	t.Stream = append(t.Stream, r.stream)
	t.TimeUS = append(t.TimeUS, r.timeUS)
	t.Stack = append(t.Stack, r.stack)
	t.CompileContext = append(t.CompileContext, r.cc)
	t.UserMetadata = append(t.UserMetadata, r.um)
	return len(t.Action) - 1
}

// window makes t's columns empty views of dst's spare capacity [off,
// off+n): appends fill dst in place up to n rows, and move to arrays of
// their own past that. The parallel reader's workers decode into windows
// so that the merge need not copy their rows.
func (t *Trace) window(dst *Trace, off, n int) {
	hi := off + n
	t.Action, t.Addr, t.Size = dst.Action[off:off:hi], dst.Addr[off:off:hi], dst.Size[off:off:hi]
	t.Stream, t.TimeUS, t.Stack = dst.Stream[off:off:hi], dst.TimeUS[off:off:hi], dst.Stack[off:off:hi]
	t.CompileContext, t.UserMetadata = dst.CompileContext[off:off:hi], dst.UserMetadata[off:off:hi]
}

// inWindow reports whether t's rows lie in dst's arrays starting at row off
// (t was a window of dst that never outgrew it). The columns only ever move
// together (growTo), so the first one tells.
func (t *Trace) inWindow(dst *Trace, off int) bool {
	n := t.Len()
	return n == 0 || off+n <= cap(dst.Action) && &t.Action[0] == &dst.Action[:off+1][off]
}

// rowAt returns entry i.
func (t *Trace) rowAt(i int) row {
	return row{t.Action[i], t.Addr[i], t.Size[i], t.TimeUS[i], t.Stream[i], t.Stack[i], t.CompileContext[i], t.UserMetadata[i]}
}

func parseState(s string) BlockState {
	switch s {
	case "active_allocated":
		return BlockActiveAllocated
	case "active_pending_free", "active_awaiting_free":
		return BlockActivePendingFree
	}
	return BlockInactive
}

func (b *builder) block(d *pickle.Dict) rawBlock {
	var r rawBlock
	for i, k := range d.Keys {
		ks, _ := k.Str()
		v := d.Vals[i]
		switch ks {
		case "address":
			r.Address, r.hasAddress = v.Uint()
		case "size":
			var ok bool
			if r.Size, ok = v.Int(); !ok {
				r.sizeBad, r.sizeKind = true, v.Kind()
			}
		case "requested_size":
			r.RequestedSize, _ = v.Int()
		case "state":
			s, _ := v.Str()
			r.State = parseState(s)
		case "frames":
			r.Stack = b.stack(v)
		case "history":
			r.history = v
		}
	}
	if h := r.history.List(); h != nil && len(h.Items) > 0 {
		// Legacy 2.0 blocks: the newest history entry comes first.
		if hd := h.Items[0].Dict(); hd != nil {
			if rs, ok := hd.Get("real_size"); ok && r.RequestedSize == 0 {
				r.RequestedSize, _ = rs.Int()
			}
			if fr, ok := hd.Get("frames"); ok && r.Stack == 0 {
				r.Stack = b.stack(fr)
			}
		}
	}
	if r.RequestedSize == 0 && r.State != BlockInactive {
		r.RequestedSize = r.Size
	}
	r.history = pickle.Value{}
	return r
}

// grow doubles the capacity of every column at once.
func (t *Trace) grow() { t.growTo(max(2*cap(t.Action), 1024)) }

// growTo sets the capacity of every column to n.
func (t *Trace) growTo(n int) {
	a := t.arena
	t.Action = append(spillmem.MakeCap[Action](a, 0, n), t.Action...)
	t.Addr = append(spillmem.MakeCap[uint64](a, 0, n), t.Addr...)
	t.Size = append(spillmem.MakeCap[int64](a, 0, n), t.Size...)
	t.Stream = append(spillmem.MakeCap[uint32](a, 0, n), t.Stream...)
	t.TimeUS = append(spillmem.MakeCap[int64](a, 0, n), t.TimeUS...)
	t.Stack = append(spillmem.MakeCap[StackID](a, 0, n), t.Stack...)
	t.CompileContext = append(spillmem.MakeCap[uint32](a, 0, n), t.CompileContext...)
	t.UserMetadata = append(spillmem.MakeCap[uint32](a, 0, n), t.UserMetadata...)
}
