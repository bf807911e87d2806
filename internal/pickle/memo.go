package pickle

// memo is the pickle memo, kept small because Python's pickler memoizes
// every container and string: a million-entry snapshot has millions of
// slots. Each slot is one pointer-free word (so the garbage collector never
// scans the slots): small ints, bools, None and hook handles are stored in
// the word itself; everything else is an index into refs. Interned strings
// own a permanent ref shared by all their slots; other values own theirs
// and give it back when a hook replaces them, so converted containers leave
// one word behind. Slots live in fixed-size chunks and grow without copying.
type memo struct {
	chunks [][]uint64
	n      int // slots in use (highest index + 1)
	refs   []Value
	free   []uint32
}

const (
	memoChunk = 1 << 15

	tagShift   = 56
	payload    = 1<<tagShift - 1
	tagEmpty   = 0
	tagOwned   = 1 // refs index owned by this slot
	tagShared  = 2 // permanent refs index (interned string)
	tagHandle  = 3
	tagInt     = 4 // 56-bit signed
	tagNone    = 5
	tagBool    = 6
	maxPayload = payload
)

// permanent stores v in refs for good and returns its index plus one (the
// form kept in the n of interned strings), or 0 when that index does not
// fit there.
func (m *memo) permanent(v Value) uint64 {
	if len(m.refs) >= refMask {
		return 0
	}
	m.refs = append(m.refs, v)
	return uint64(len(m.refs))
}

func (m *memo) get(i int) (Value, bool) {
	if uint(i) >= uint(m.n) {
		return Value{}, false
	}
	w := m.chunks[uint(i)/memoChunk][uint(i)%memoChunk]
	switch w >> tagShift {
	case tagOwned, tagShared:
		return m.refs[uint32(w)], true
	case tagHandle:
		return scalar(KindHandle, w&payload), true
	case tagInt:
		return scalar(KindInt, uint64(int64(w<<8)>>8)), true
	case tagNone:
		return Value{}, true
	case tagBool:
		return scalar(KindBool, w&1), true
	}
	return Value{}, false
}

func (m *memo) set(i int, v Value) {
	for uint(i)/memoChunk >= uint(len(m.chunks)) {
		m.chunks = append(m.chunks, make([]uint64, memoChunk))
	}
	slot := &m.chunks[uint(i)/memoChunk][uint(i)%memoChunk]
	if *slot>>tagShift == tagOwned {
		r := uint32(*slot)
		m.refs[r] = Value{}
		m.free = append(m.free, r)
	}
	*slot = m.encode(v)
	if i >= m.n {
		m.n = i + 1
	}
}

func (m *memo) encode(v Value) uint64 {
	switch v.Kind() {
	case KindHandle:
		if v.n <= maxPayload {
			return tagHandle<<tagShift | v.n
		}
	case KindInt:
		if x := int64(v.n); x >= -1<<55 && x < 1<<55 {
			return tagInt<<tagShift | v.n&payload
		}
	case KindNone:
		return tagNone << tagShift
	case KindBool:
		return tagBool<<tagShift | v.n&1
	case KindString:
		if r := v.strRef(); r != 0 {
			return tagShared<<tagShift | (r - 1)
		}
	}
	var r uint32
	if k := len(m.free); k > 0 {
		r = m.free[k-1]
		m.free = m.free[:k-1]
		m.refs[r] = v
	} else {
		r = uint32(len(m.refs))
		m.refs = append(m.refs, v)
	}
	return tagOwned<<tagShift | uint64(r)
}
