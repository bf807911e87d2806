package snapshot

import (
	"encoding/binary"
	"fmt"
	"unsafe"

	"github.com/ptscope/ptscope/internal/input"
	"github.com/ptscope/ptscope/internal/pickle"
	"github.com/ptscope/ptscope/internal/spillmem"
)

// pickleOptions are the decoder's hooks and limits.
func (b *builder) pickleOptions() pickle.Options {
	return pickle.Options{OnDict: b.onDict, OnList: b.onList, OnExtend: b.onExtend,
		MaxString: b.src.MaxString(), MaxValues: b.src.MaxValues(), LimitNote: b.src.BudgetNote(),
		MaxHeldPerByte: maxHeldPerByte,
		Check:          func(off int64) error { b.src.Progress(off); return b.src.Check() }}
}

// maxHeldPerByte bounds the decoded values the pickle decoder holds, per
// byte of input (pickle.Options.MaxHeldPerByte). The hooks convert trace
// entries, frames, stacks and blocks as they complete, so a real snapshot
// holds about one byte of values per byte read (fixtures: 0.5 to 1.1;
// legacy blocks with history 4 to 5; segments of one block each, 8); a
// pickle of memoized empty lists holds 52, of empty dicts 80.
const maxHeldPerByte = 16

// Handles produced by the decoder hooks: bits 48-55 say what they index
// (handles below 2^56 cost the decoder's memo one word).
const (
	hFrame = 1 << 48
	hStack = 2 << 48
	hEntry = 3 << 48
	hBlock = 4 << 48
	hRun   = 5 << 48 // a list of trace entries (a device's trace)
	hLong  = 6 << 48 // a frames list of 1000 frames or more, still growing
	hMask  = 0xff << 48
)

// builder collects the snapshot while the pickle streams by.
type builder struct {
	src      *input.Source // the budget and progress of the input being read
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

	// Shared references cost once. PyTorch writes every trace entry,
	// segment and block as an object of its own; a pickle may reference
	// one object many times through its memo (a 2-byte BINGET each), and
	// each such reference would cost a whole row, segment or walk of a
	// stack. A second reference to an entry, segment or block is dropped
	// and counted invalid; a frames list met again is the same stack.
	inRun    bitset                   // rows placed in a run
	listIDs  map[*pickle.List]StackID // frames lists already interned
	seenSegs map[unsafe.Pointer]bool  // segment dicts and blocks lists read
	inSeg    bitset                   // block handles placed in a segment
	long     []longStack              // frames lists converted while they grew (hLong)
}

// bitset is a set of small non-negative ints.
type bitset []uint64

// testAndSet adds i and reports whether it was there.
func (s *bitset) testAndSet(i int) bool {
	for i>>6 >= len(*s) {
		*s = append(*s, make([]uint64, len(*s)+1)...)
	}
	w, bit := &(*s)[i>>6], uint64(1)<<(i&63)
	had := *w&bit != 0
	*w |= bit
	return had
}

// setRange adds [lo, hi).
func (s *bitset) setRange(lo, hi int) {
	for i := lo; i < hi; i++ {
		if i&63 == 0 && i+64 <= hi {
			s.testAndSet(i)
			(*s)[i>>6] = ^uint64(0)
			i += 63
			continue
		}
		s.testAndSet(i)
	}
}

// run is a list of trace entries: the rows [lo, hi) while they come in
// order, or explicit rows once they do not. Its items that referenced an
// entry already placed in a run were dropped (dups, the first at item
// firstDup; n counts every item).
type run struct {
	lo, hi   int
	rows     []int // nil while contiguous
	n        int
	dups     int
	firstDup int
}

// addRow adds the entry at row to r, unless a run already holds it.
func (b *builder) addRow(r *run, row int) {
	k := r.n
	r.n++
	if b.inRun.testAndSet(row) {
		if r.dups == 0 {
			r.firstDup = k
		}
		r.dups++
		return
	}
	r.add(row)
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
// heap), read within src's limits (nil: the default ones).
func newBuilder(arena *spillmem.Arena, src *input.Source) *builder {
	b := &builder{
		src:      input.Or(src),
		s:        &Snapshot{Stacks: [][]FrameID{nil}, Strings: []string{""}, Streams: []int64{0}, arena: arena},
		frameIDs: map[Frame]FrameID{},
		stackIDs: map[string]StackID{"": 0},
		strIDs:   map[string]uint32{"": 0},
		streams:  map[int64]uint32{0: 0},
	}
	b.entries.arena = arena
	return b
}

func (b *builder) str(s string) uint32 { return intern(b.strIDs, &b.s.Strings, s) }

// intern returns k's id in ids, giving a new k the next index of tab (where
// it is appended). The builder and the parallel reader's workers keep their
// strings, streams and frames this way.
func intern[K comparable](ids map[K]uint32, tab *[]K, k K) uint32 {
	if id, ok := ids[k]; ok {
		return id
	}
	id := uint32(len(*tab))
	*tab = append(*tab, k)
	ids[k] = id
	return id
}

func (b *builder) stream(v pickle.Value) uint32 {
	n, _ := v.Int()
	if u, ok := v.Uint(); ok && n == 0 {
		n = int64(u)
	}
	return b.streamID(n)
}

func (b *builder) streamID(n int64) uint32 { return intern(b.streams, &b.s.Streams, n) }

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
		}
		for _, it := range l.Items {
			h, _ := it.Handle()
			b.addRow(&r, int(h&^hMask))
		}
		b.runs = append(b.runs, r)
		return pickle.Handle(hRun | uint64(len(b.runs)-1)), true
	case hFrame:
		if len(l.Items) >= 1000 {
			// More APPENDS may follow: gather the frame ids as they come
			// (4 bytes each, at most maxStackFrames kept) instead of
			// keeping the list (16 bytes a frame, however many).
			b.long = append(b.long, longStack{id: -1})
			h := uint64(len(b.long) - 1)
			b.extendLong(h, l.Items)
			return pickle.Handle(hLong | h), true
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

// longStack is a frames list converted while it grew (hLong): its frame
// ids up to maxStackFrames, how many frames it had, and its stack once
// interned (-1 before).
type longStack struct {
	ids []FrameID
	n   int
	id  int64
}

// extendLong adds the frames among items to long stack h (other items are
// skipped, as stackOf skips them).
func (b *builder) extendLong(h uint64, items []pickle.Value) {
	ls := &b.long[h]
	for _, it := range items {
		var id FrameID
		if fh, ok := it.Handle(); ok && fh&hMask == hFrame {
			id = FrameID(fh &^ hMask)
		} else if fd := it.Dict(); fd != nil {
			id = b.frame(fd)
		} else {
			continue
		}
		if ls.n++; len(ls.ids) < maxStackFrames {
			ls.ids = append(ls.ids, id)
		}
	}
}

// longStackID interns long stack h once.
func (b *builder) longStackID(h uint64) StackID {
	ls := &b.long[h]
	if ls.id < 0 {
		b.ids = append(b.ids[:0], ls.ids...)
		if ls.n > maxStackFrames {
			n := ls.n
			b.s.InvalidStacks.add(-1, func() string {
				return fmt.Sprintf("a stack of %d frames (cut to the innermost %d)", n, maxStackFrames)
			})
		}
		ls.id, ls.ids = int64(b.internStack()), nil
	}
	return StackID(ls.id)
}

// onExtend appends more trace entries to a run, or frames to a long stack.
func (b *builder) onExtend(h uint64, items []pickle.Value) bool {
	if h&hMask == hLong && int(h&^hMask) < len(b.long) && b.long[h&^hMask].id < 0 {
		b.extendLong(h&^hMask, items)
		return true
	}
	if h&hMask != hRun || int(h&^hMask) >= len(b.runs) {
		return false
	}
	r := &b.runs[h&^hMask]
	for _, it := range items {
		e, ok := it.Handle()
		if !ok || e&hMask != hEntry {
			if d := it.Dict(); d != nil && classify(d)&kAction != 0 {
				b.addRow(r, b.addEntry(d))
				continue
			}
			return false
		}
		b.addRow(r, int(e&^hMask))
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

func (b *builder) frameID(f Frame) FrameID { return intern(b.frameIDs, &b.s.Frames, f) }

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

// maxStackFrames is the most frames a stack keeps: a Python stack is at
// most its recursion limit (1000) deep, with C++ frames (stacks="all") a
// few times that; real snapshots hold stacks of up to about 120 frames.
// A longer stack is cut to its innermost frames and counted invalid.
const maxStackFrames = 4096

// internStack interns the frame ids in b.ids as a stack.
func (b *builder) internStack() StackID {
	if n := len(b.ids); n > maxStackFrames {
		b.s.InvalidStacks.add(-1, func() string {
			return fmt.Sprintf("a stack of %d frames (cut to the innermost %d)", n, maxStackFrames)
		})
		b.ids = b.ids[:maxStackFrames]
	}
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
	if h, ok := v.Handle(); ok && h&hMask == hLong && int(h&^hMask) < len(b.long) {
		return b.longStackID(h &^ hMask)
	}
	if l := v.List(); l != nil && len(l.Items) > 0 {
		if id, ok := b.listIDs[l]; ok {
			return id // a shared frames list: walked once
		}
		id := b.stackOf(l)
		if b.listIDs == nil {
			b.listIDs = map[*pickle.List]StackID{}
		}
		b.listIDs[l] = id
		return id
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
