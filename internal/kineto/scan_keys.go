package kineto

import (
	"encoding/binary"
	"strings"
)

// the fields of an event, by index in eventKeys
const (
	evPh = iota
	evCat
	evName
	evPid
	evTid
	evTs
	evDur
	evID
	evArgs
)

// keyTable finds the field a key names: exactly, or only by case folding
// (encoding/json decodes a key into the first field whose key
// folds to the same when none is the same). A key is hashed by its length
// and its first eight bytes loaded as one word, folded coarsely (c|0x20:
// keys equal but for case hash the same).
type keyTable struct {
	names  []string // by field index
	folded []string // the names in lower case
	slots  [256]keySlot
}

// keySlot holds the fields whose names have one keyHash (at most two:
// newKeyTable panics on a third, which a change of names would need a
// wider slot for).
type keySlot struct {
	w [2]uint64 // the names' keyWord
	n [2]int    // their lengths
	k [2]int8   // the fields, -1 for none
}

func newKeyTable(names ...string) *keyTable {
	t := &keyTable{names: names}
	for i := range t.slots {
		t.slots[i].k = [2]int8{-1, -1}
	}
	for k, n := range names {
		t.folded = append(t.folded, strings.ToLower(n))
		w := keyWord([]byte(n), 0, len(n))
		slot := &t.slots[keyHash(w, len(n))]
		j := 0
		if slot.k[0] >= 0 {
			j = 1
			if slot.k[1] >= 0 {
				panic("kineto: three keys in one keyTable slot")
			}
		}
		slot.w[j], slot.n[j], slot.k[j] = w, len(n), int8(k)
	}
	return t
}

// keyWord loads the first eight bytes of the n-byte key at data[i] (fewer
// bytes: zero above them).
func keyWord(data []byte, i, n int) uint64 {
	if i+8 <= len(data) {
		w := binary.LittleEndian.Uint64(data[i:])
		if n < 8 {
			w &= 1<<(8*uint(n)) - 1
		}
		return w
	}
	var w uint64
	for k := 0; k < n && k < 8; k++ {
		w |= uint64(data[i+k]) << (8 * k)
	}
	return w
}

func keyHash(w uint64, n int) uint8 {
	f := w | 0x2020202020202020
	if n < 8 {
		f &= 1<<(8*uint(n)) - 1
	}
	return uint8((f ^ uint64(n)) * 0x87C37B91114253D5 >> 56)
}

// exact returns the field the n-byte key at data[i] names exactly, or -1
// (a key that does is plain ASCII, as the names are);
// w and h are its keyWord and keyHash.
func (t *keyTable) exact(data []byte, i, n int, w uint64, h uint8) int {
	slot := &t.slots[h]
	for j := range 2 {
		if slot.w[j] == w && slot.n[j] == n && slot.k[j] >= 0 {
			c := slot.k[j]
			if n <= 8 || string(data[i+8:i+n]) == t.names[c][8:] {
				return int(c)
			}
		}
	}
	return -1
}

// folds reports whether the ASCII key, which names no field exactly,
// names one by case folding.
func (t *keyTable) folds(key []byte) bool {
	slot := &t.slots[keyHash(keyWord(key, 0, len(key)), len(key))]
	for _, c := range slot.k {
		if c >= 0 && asciiEqualFold(key, t.folded[c]) {
			return true
		}
	}
	return false
}

func lower(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

var (
	eventKeys = newKeyTable("ph", "cat", "name", "pid", "tid", "ts", "dur", "id", "args")
	// by arg index (argExternalID...)
	argKeys = newKeyTable("External id", "correlation", "device", "stream", "blocks per SM",
		"est. achieved occupancy %", "registers per thread", "shared memory", "grid", "block",
		"bytes", "Sequence number", "Fwd thread id", "Input Dims", "Input type", "name", "labels",
		"sort_index", "Device Type", "Device Id", "Addr", "Bytes", "Total Allocated", "Total Reserved",
		"Collective name", "dtype", "In msg nelems", "Out msg nelems", "Group size",
		"Process Group Name", "Seq", "wait_on_stream", "wait_on_cuda_event_record_corr_id",
		"memory bandwidth (GB/s)")
)

func asciiEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(b) {
		if lower(b[i]) != s[i] {
			return false
		}
	}
	return true
}

// key reads the key at data[i] and the colon after it: it returns the
// field the key names exactly (-1 for none) and the index of the value.
// next is -1 when there is no key, and for keys left to encoding/json: keys
// with an escape or bytes outside ASCII (it unescapes them and folds their
// runes) and keys that name a field only by case folding.
func (t *keyTable) key(data []byte, i int, st *scanState) (k, next int) {
	if i >= len(data) || data[i] != '"' {
		return -1, -1
	}
	s := i + 1
	e := findQuote(data, s)
	if e >= len(data) {
		return -1, -1
	}
	n := e - s
	w0 := keyWord(data, s, n)
	h := keyHash(w0, n)
	k = t.exact(data, s, n, w0, h)
	if k < 0 {
		// a key of no field: the quote found must close it, and it must
		// not name one by folding
		var o *otherKey
		w1 := w0
		if n <= 16 {
			if n > 8 {
				w1 = binary.LittleEndian.Uint64(data[e-8:])
			}
			o = &st.other[h&127]
			if o.w0 == w0 && o.w1 == w1 && o.n == n && o.table == t {
				goto colon
			}
		}
		if skipKeyPlain(data, s) != e || t.folds(data[s:e]) {
			return -1, -1
		}
		if o != nil {
			*o = otherKey{w0: w0, w1: w1, n: n, table: t}
		}
	}
colon:
	j := e + 1
	if j < len(data) && data[j] == ':' {
		j++
	} else {
		j = skipWS(data, j)
		if j >= len(data) || data[j] != ':' {
			return -1, -1
		}
		j++
	}
	if j < len(data) && data[j] == ' ' {
		j++
	}
	return k, skipWS(data, j)
}
