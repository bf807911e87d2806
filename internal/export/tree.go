package export

import (
	"bufio"
	"encoding/binary"
	"io"
	"math"
	"strconv"

	"github.com/ptscope/ptscope/internal/snapshot"
)

// tree writes a document of dicts, lists and scalars in one of two
// encodings, so that the memory_viz export is the same data as JSON or as
// a pickle. Values are written in order: key then value inside a dict.
type tree interface {
	dict() // opens a dict value
	list() // opens a list value
	end()  // closes the innermost dict or list
	key(k string)
	int(v int64)
	uint(v uint64)
	str(s string)
	boolean(b bool)
	// frames writes a stack's frames as a list of {"filename", "line",
	// "name"} dicts, innermost first; each encoding writes a stack once.
	frames(id snapshot.StackID)
	flush() error
}

// jsonTree writes JSON. Lists nested at most three deep (the document's
// top lists and the trace of each device) put one item per line.
type jsonTree struct {
	j        *jsonw
	s        *snapshot.Snapshot
	open     []jsonOpen
	afterKey bool
	cache    map[snapshot.StackID][]byte
}

func newJSONTree(w io.Writer, s *snapshot.Snapshot) *jsonTree {
	return &jsonTree{j: newJSONW(w), s: s, cache: map[snapshot.StackID][]byte{}}
}

type jsonOpen struct {
	items bool   // the container has an item
	close string // "}" or "]"
}

// pre separates a value (or a key) from the previous item.
func (t *jsonTree) pre() {
	if t.afterKey {
		t.afterKey = false
		return
	}
	n := len(t.open)
	if n == 0 {
		return
	}
	if t.open[n-1].items {
		if n <= 3 {
			t.j.raw(",\n")
		} else {
			t.j.raw(",")
		}
	}
	t.open[n-1].items = true
}

func (t *jsonTree) dict() { t.pre(); t.j.raw("{"); t.open = append(t.open, jsonOpen{close: "}"}) }
func (t *jsonTree) list() { t.pre(); t.j.raw("["); t.open = append(t.open, jsonOpen{close: "]"}) }

func (t *jsonTree) end() {
	n := len(t.open)
	t.j.raw(t.open[n-1].close)
	t.open = t.open[:n-1]
}

func (t *jsonTree) key(k string) { t.pre(); t.j.str(k); t.j.raw(":"); t.afterKey = true }
func (t *jsonTree) int(v int64)  { t.pre(); t.j.int(v) }
func (t *jsonTree) uint(v uint64) {
	t.pre()
	t.j.uint(v)
}
func (t *jsonTree) str(s string) { t.pre(); t.j.str(s) }
func (t *jsonTree) boolean(b bool) {
	t.pre()
	t.j.raw(strconv.FormatBool(b))
}

func (t *jsonTree) frames(id snapshot.StackID) {
	t.pre()
	b, ok := t.cache[id]
	if !ok {
		b = []byte{'['}
		if int(id) < len(t.s.Stacks) {
			for k, fid := range t.s.Stacks[id] {
				f := &t.s.Frames[fid]
				if k > 0 {
					b = append(b, ',')
				}
				b = append(b, `{"filename":`...)
				b = appendJSONString(b, f.Filename)
				b = append(b, `,"line":`...)
				b = strconv.AppendInt(b, int64(f.Line), 10)
				b = append(b, `,"name":`...)
				b = appendJSONString(b, f.Name)
				b = append(b, '}')
			}
		}
		b = append(b, ']')
		t.cache[id] = b
	}
	t.j.bytes(b)
}

func (t *jsonTree) flush() error { t.j.raw("\n"); return t.j.flush() }

// Pickle opcodes (protocol 4) that the pickle tree writes: all of them are
// read by Python's unpickler and by MemoryViz.js's.
const (
	opProto      = 0x80
	opEmptyDict  = '}'
	opEmptyList  = ']'
	opMark       = '('
	opSetItems   = 'u'
	opAppends    = 'e'
	opMemoize    = 0x94
	opBinGet     = 'h'
	opLongBinGet = 'j'
	opBinInt1    = 'K'
	opBinInt2    = 'M'
	opBinInt     = 'J'
	opLong1      = 0x8a
	opShortUni   = 0x8c
	opBinUni     = 'X'
	opTrue       = 0x88
	opFalse      = 0x89
	opStop       = '.'
)

// pickleBatch is how many items a MARK holds before its APPENDS or
// SETITEMS, as Python's pickler does: MemoryViz.js spreads a mark's items
// into one call, which a million items would overflow.
const pickleBatch = 1000

// pickleTree writes a protocol 4 pickle. Strings, frame dicts and frame
// lists are memoized and written once, as PyTorch's own snapshots share
// them, so that a long trace stays about as small as the original.
type pickleTree struct {
	w      *bufio.Writer
	s      *snapshot.Snapshot
	err    error
	buf    []byte
	open   []pickleOpen
	memo   uint32
	strs   map[string]uint32
	frame  map[snapshot.FrameID]uint32
	stacks map[snapshot.StackID]uint32
}

type pickleOpen struct {
	dict bool
	n    int // items since the last MARK (pairs for a dict)
}

func newPickleTree(w io.Writer, s *snapshot.Snapshot) *pickleTree {
	t := &pickleTree{w: bufio.NewWriterSize(w, 1<<16), s: s, strs: map[string]uint32{},
		frame: map[snapshot.FrameID]uint32{}, stacks: map[snapshot.StackID]uint32{}}
	t.op(opProto, 4)
	return t
}

func (t *pickleTree) op(b ...byte) {
	if t.err == nil {
		_, t.err = t.w.Write(b)
	}
}

// pre counts a list item, closing a full batch first (dict items are
// counted by key).
func (t *pickleTree) pre() {
	n := len(t.open)
	if n == 0 || t.open[n-1].dict {
		return
	}
	o := &t.open[n-1]
	if o.n == pickleBatch {
		t.op(opAppends, opMark)
		o.n = 0
	}
	o.n++
}

func (t *pickleTree) dict() {
	t.pre()
	t.op(opEmptyDict, opMark)
	t.open = append(t.open, pickleOpen{dict: true})
}

func (t *pickleTree) list() {
	t.pre()
	t.op(opEmptyList, opMark)
	t.open = append(t.open, pickleOpen{})
}

func (t *pickleTree) end() {
	n := len(t.open)
	if t.open[n-1].dict {
		t.op(opSetItems)
	} else {
		t.op(opAppends)
	}
	t.open = t.open[:n-1]
}

func (t *pickleTree) key(k string) {
	o := &t.open[len(t.open)-1]
	if o.n == pickleBatch {
		t.op(opSetItems, opMark)
		o.n = 0
	}
	o.n++
	t.string(k)
}

func (t *pickleTree) memoize() uint32 {
	t.op(opMemoize)
	t.memo++
	return t.memo - 1
}

func (t *pickleTree) get(i uint32) {
	if i < 256 {
		t.op(opBinGet, byte(i))
		return
	}
	t.buf = binary.LittleEndian.AppendUint32(append(t.buf[:0], opLongBinGet), i)
	t.op(t.buf...)
}

func (t *pickleTree) int(v int64) {
	t.pre()
	t.intValue(v)
}

func (t *pickleTree) intValue(v int64) {
	switch {
	case v >= 0 && v < 256:
		t.op(opBinInt1, byte(v))
	case v >= 0 && v < 65536:
		t.op(opBinInt2, byte(v), byte(v>>8))
	case v >= math.MinInt32 && v <= math.MaxInt32:
		t.buf = binary.LittleEndian.AppendUint32(append(t.buf[:0], opBinInt), uint32(int32(v)))
		t.op(t.buf...)
	default:
		// LONG1: the shortest little-endian two's complement
		b := binary.LittleEndian.AppendUint64(nil, uint64(v))
		for len(b) > 1 && ((b[len(b)-1] == 0 && b[len(b)-2] < 0x80) || (b[len(b)-1] == 0xff && b[len(b)-2] >= 0x80)) {
			b = b[:len(b)-1]
		}
		t.op(append([]byte{opLong1, byte(len(b))}, b...)...)
	}
}

func (t *pickleTree) uint(v uint64) {
	if v <= math.MaxInt64 {
		t.int(int64(v))
		return
	}
	t.pre()
	b := append(binary.LittleEndian.AppendUint64(nil, v), 0)
	t.op(append([]byte{opLong1, byte(len(b))}, b...)...)
}

func (t *pickleTree) str(s string) { t.pre(); t.string(s) }

// string writes s, or a reference to it when it was written before.
func (t *pickleTree) string(s string) {
	if i, ok := t.strs[s]; ok {
		t.get(i)
		return
	}
	if len(s) < 256 {
		t.op(opShortUni, byte(len(s)))
	} else {
		t.buf = binary.LittleEndian.AppendUint32(append(t.buf[:0], opBinUni), uint32(len(s)))
		t.op(t.buf...)
	}
	if t.err == nil {
		_, t.err = t.w.WriteString(s)
	}
	t.strs[s] = t.memoize()
}

func (t *pickleTree) boolean(b bool) {
	t.pre()
	if b {
		t.op(opTrue)
	} else {
		t.op(opFalse)
	}
}

func (t *pickleTree) frames(id snapshot.StackID) {
	t.pre()
	if i, ok := t.stacks[id]; ok {
		t.get(i)
		return
	}
	t.op(opEmptyList, opMark)
	if int(id) < len(t.s.Stacks) {
		for k, fid := range t.s.Stacks[id] {
			if k > 0 && k%pickleBatch == 0 {
				t.op(opAppends, opMark)
			}
			if i, ok := t.frame[fid]; ok {
				t.get(i)
				continue
			}
			f := &t.s.Frames[fid]
			t.op(opEmptyDict, opMark)
			t.string("filename")
			t.string(f.Filename)
			t.string("line")
			t.intValue(int64(f.Line))
			t.string("name")
			t.string(f.Name)
			t.op(opSetItems)
			t.frame[fid] = t.memoize()
		}
	}
	t.op(opAppends)
	t.stacks[id] = t.memoize()
}

func (t *pickleTree) flush() error {
	t.op(opStop)
	if t.err == nil {
		t.err = t.w.Flush()
	}
	return t.err
}
