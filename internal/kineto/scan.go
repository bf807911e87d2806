package kineto

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"strings"
)

// scanEvent is the decoder's fast path: one pass over the bytes of one event
// object that parses the fields ptscope reads into ev (its slices point
// into data), skipping all other keys and values, and keeps in raw the text
// of the fields check quotes. It gives what go-json's decode of data into a
// wireEvent and view give, or it returns false and the caller decodes data
// with go-json, which either reports the error or applies the rules
// scanEvent leaves to it. scanEvent returns false for
//   - anything but strict JSON (RFC 8259) of one object and whitespace;
//   - a key with an escape or a byte outside ASCII;
//   - a key that names a field only by case folding ("Ts", "BYTES");
//   - an "args" value that is neither an object nor null;
//   - values nested deeper than maxDepth.
//
// Nothing else: every event of the real traces is decoded here. A
// duplicate key replaces the field's value, and a second "args" object adds
// to the first, as in go-json.
//
// ev must hold what the previous call left (or be zero): st says which of
// its args to clear.
func scanEvent(data []byte, ev *rawEvent, raw *rawRefs, st *scanState) bool {
	ev.Ph, ev.Cat, ev.Name = rawStr{}, rawStr{}, rawStr{}
	ev.Pid, ev.Tid, ev.ID = idVal{}, idVal{}, idVal{}
	ev.Ts, ev.Dur = timeVal{}, timeVal{}
	st.clear(&ev.Args)
	*raw = rawRefs{}
	i := skipWS(data, 0)
	if i >= len(data) || data[i] != '{' {
		return false
	}
	i = skipWS(data, i+1)
	if i < len(data) && data[i] == '}' {
		return skipWS(data, i+1) == len(data)
	}
	for {
		k, j := eventKeys.key(data, i, st)
		if j < 0 {
			return false
		}
		i = j
		switch k {
		case evPh:
			i = scanStr(data, i, &ev.Ph)
		case evCat:
			i = scanStr(data, i, &ev.Cat)
		case evName:
			i = scanStr(data, i, &ev.Name)
		case evPid:
			i = scanID(data, i, &ev.Pid)
		case evTid:
			i = scanID(data, i, &ev.Tid)
		case evID:
			i = scanID(data, i, &ev.ID)
		case evTs:
			i = scanTime(data, i, &ev.Ts, &raw.ts)
		case evDur:
			i = scanTime(data, i, &ev.Dur, &raw.dur)
		case evArgs:
			switch {
			case i < len(data) && data[i] == '{':
				i = scanArgs(data, i, &ev.Args, raw, st)
			case bytes.HasPrefix(data[i:], litNull):
				i += len(litNull)
			default:
				return false
			}
		default:
			i = skipValue(data, i, 1)
		}
		if i < 0 {
			return false
		}
		i = skipWS(data, i)
		if i >= len(data) {
			return false
		}
		switch data[i] {
		case ',':
			i = skipWS(data, i+1)
		case '}':
			return skipWS(data, i+1) == len(data)
		default:
			return false
		}
	}
}

// rawRefs is the text of the fields check quotes (nil when absent).
type rawRefs struct {
	ts, dur, memBytes []byte
}

// scanState is what scanEvent keeps from event to event: which args of
// the rawEvent it fills are set, and the keys of no field it has checked.
type scanState struct {
	args  uint32 // bit k: arg k (argExternalID...)
	other [128]otherKey
}

// otherKey is a plain key of at most 16 bytes that names no field exactly
// nor by folding, by its first and last eight bytes (as keyWord loads
// them, overlapping for 9 to 15 bytes; w1 = w0 up to 8): "Ev Idx",
// "Python id", "Concrete Inputs" need no check again.
type otherKey struct {
	w0, w1 uint64
	n      int
	table  *keyTable
}

// all marks every arg set, as view sets them.
func (st *scanState) all() { st.args = 1<<argCount - 1 }

func (st *scanState) clear(a *rawArgs) {
	for m := st.args; m != 0; m &= m - 1 {
		a.set(bits.TrailingZeros32(m), nil)
	}
	st.args = 0
}

// scanStr parses the value at data[i] as toStr does.
func scanStr(data []byte, i int, dst *rawStr) int {
	if i < len(data) && data[i] == '"' {
		end, esc := scanString(data, i)
		if end >= 0 {
			*dst = rawStr{b: data[i+1 : end-1], escaped: esc, ok: true}
		}
		return end
	}
	end := skipValue(data, i, 1)
	if end >= 0 {
		*dst = toStr(data[i:end])
	}
	return end
}

// scanID parses the value at data[i] as toID does.
func scanID(data []byte, i int, dst *idVal) int {
	if v, end, ok := scanInt(data, i); ok {
		*dst = idVal{n: v, ok: true}
		return end
	}
	end := skipValue(data, i, 1)
	if end >= 0 {
		*dst = toID(data[i:end])
	}
	return end
}

// scanTime parses the value at data[i] as toTime does.
func scanTime(data []byte, i int, dst *timeVal, raw *[]byte) int {
	if ns, end, ok := scanMicros(data, i); ok {
		*raw = data[i:end:end]
		*dst = timeVal{ns: ns, ok: true}
		return end
	}
	end := skipValue(data, i, 1)
	if end >= 0 {
		*raw = data[i:end:end]
		*dst = toTime(*raw)
	}
	return end
}

// the args of rawArgs, by bit of scanState.args
const (
	argExternalID = iota
	argCorrelation
	argDevice
	argStream
	argBlocksPerSM
	argOccupancy
	argRegisters
	argSharedMem
	argGrid
	argBlock
	argCopyBytes
	argSeqNum
	argFwdThread
	argInputDims
	argInputType
	argMName
	argLabels
	argSortIndex
	argDeviceType
	argDeviceID
	argAddr
	argMemBytes
	argTotalAllocated
	argTotalReserved
	argCollective
	argDtype
	argInNelems
	argOutNelems
	argGroupSize
	argPGName
	argCommSeq
	argCount
)

// set parses the raw value v of arg k as view does (v nil: absent).
func (a *rawArgs) set(k int, v []byte) {
	switch k {
	case argExternalID:
		a.ExternalID = parseNum(v)
	case argCorrelation:
		a.Correlation = parseNum(v)
	case argDevice:
		a.Device = parseNum(v)
	case argStream:
		a.Stream = parseNum(v)
	case argBlocksPerSM:
		a.BlocksPerSM = parseNum(v)
	case argOccupancy:
		a.Occupancy = parseNum(v)
	case argRegisters:
		a.Registers = parseNum(v)
	case argSharedMem:
		a.SharedMem = parseNum(v)
	case argGrid:
		a.Grid = numArray(v, a.Grid[:0])
	case argBlock:
		a.Block = numArray(v, a.Block[:0])
	case argCopyBytes:
		a.CopyBytes = parseNum(v)
	case argSeqNum:
		a.SeqNum = parseNum(v)
	case argFwdThread:
		a.FwdThread = parseNum(v)
	case argInputDims:
		a.InputDims = rawJSONOf(v)
	case argInputType:
		a.InputType = rawJSONOf(v)
	case argMName:
		a.MName = toStr(v)
	case argLabels:
		a.Labels = toStr(v)
	case argSortIndex:
		a.SortIndex = parseNum(v)
	case argDeviceType:
		a.DeviceType = parseNum(v)
	case argDeviceID:
		a.DeviceID = parseNum(v)
	case argAddr:
		a.Addr = parseNum(v)
	case argMemBytes:
		a.MemBytes = parseNum(v)
	case argTotalAllocated:
		a.TotalAllocated = parseNum(v)
	case argTotalReserved:
		a.TotalReserved = parseNum(v)
	case argCollective:
		a.Collective = toStr(v)
	case argDtype:
		a.Dtype = toStr(v)
	case argInNelems:
		a.InNelems = parseNum(v)
	case argOutNelems:
		a.OutNelems = parseNum(v)
	case argGroupSize:
		a.GroupSize = parseNum(v)
	case argPGName:
		a.PGName = toStr(v)
	case argCommSeq:
		a.CommSeq = parseNum(v)
	}
}

// numArgs marks the args of type Num (setNum).
const numArgs = 1<<argExternalID | 1<<argCorrelation | 1<<argDevice | 1<<argStream |
	1<<argBlocksPerSM | 1<<argOccupancy | 1<<argRegisters | 1<<argSharedMem | 1<<argCopyBytes |
	1<<argSeqNum | 1<<argFwdThread | 1<<argSortIndex | 1<<argDeviceType | 1<<argDeviceID |
	1<<argAddr | 1<<argMemBytes | 1<<argTotalAllocated | 1<<argTotalReserved | 1<<argInNelems |
	1<<argOutNelems | 1<<argGroupSize | 1<<argCommSeq

// setNum sets arg k, one of numArgs, to n.
func (a *rawArgs) setNum(k int, n Num) {
	switch k {
	case argExternalID:
		a.ExternalID = n
	case argCorrelation:
		a.Correlation = n
	case argDevice:
		a.Device = n
	case argStream:
		a.Stream = n
	case argBlocksPerSM:
		a.BlocksPerSM = n
	case argOccupancy:
		a.Occupancy = n
	case argRegisters:
		a.Registers = n
	case argSharedMem:
		a.SharedMem = n
	case argCopyBytes:
		a.CopyBytes = n
	case argSeqNum:
		a.SeqNum = n
	case argFwdThread:
		a.FwdThread = n
	case argSortIndex:
		a.SortIndex = n
	case argDeviceType:
		a.DeviceType = n
	case argDeviceID:
		a.DeviceID = n
	case argAddr:
		a.Addr = n
	case argMemBytes:
		a.MemBytes = n
	case argTotalAllocated:
		a.TotalAllocated = n
	case argTotalReserved:
		a.TotalReserved = n
	case argInNelems:
		a.InNelems = n
	case argOutNelems:
		a.OutNelems = n
	case argGroupSize:
		a.GroupSize = n
	case argCommSeq:
		a.CommSeq = n
	}
}

// scanArgs scans the args object at data[i] ('{') into a, returning the
// index after it or -1.
func scanArgs(data []byte, i int, a *rawArgs, raw *rawRefs, st *scanState) int {
	i = skipWS(data, i+1)
	if i < len(data) && data[i] == '}' {
		return i + 1
	}
	for {
		k, j := argKeys.key(data, i, st)
		if j < 0 {
			return -1
		}
		var end int
		if k >= 0 && numArgs&(1<<k) != 0 {
			if v, e, ok := scanInt(data, j); ok {
				a.setNum(k, Num{I: v, F: float64(v), OK: true, Int: true})
				end = e
				goto set
			}
		}
		if j < len(data) && data[j] == '"' {
			end = skipString(data, j)
		} else {
			end = skipValue(data, j, 2)
		}
		if end < 0 {
			return -1
		}
		if k >= 0 {
			a.set(k, data[j:end:end])
		}
	set:
		if k >= 0 {
			st.args |= 1 << k
			if k == argMemBytes {
				raw.memBytes = data[j:end:end]
			}
		}
		i = skipWS(data, end)
		if i >= len(data) {
			return -1
		}
		switch data[i] {
		case ',':
			i = skipWS(data, i+1)
		case '}':
			return i + 1
		default:
			return -1
		}
	}
}

// key reads the key at data[i] and the colon after it: it returns the
// field the key names exactly (-1 for none) and the index of the value.
// next is -1 when there is no key, and for keys left to go-json: keys
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

// scanInt parses the plain JSON integer at data[i] (at most 18 digits,
// no fraction or exponent) as parseNum does; ok is false for any other
// value, which the caller parses the general way.
func scanInt(data []byte, i int) (v int64, end int, ok bool) {
	j := i
	if j < len(data) && data[j] == '-' {
		j++
	}
	d := j
	for j < len(data) && data[j]-'0' <= 9 {
		v = v*10 + int64(data[j]-'0')
		j++
	}
	if n := j - d; n == 0 || n > 18 || n > 1 && data[d] == '0' {
		return 0, 0, false
	}
	if j < len(data) && (data[j] == '.' || data[j] == 'e' || data[j] == 'E') {
		return 0, 0, false
	}
	if d > i {
		v = -v
	}
	return v, j, true
}

// scanMicros parses the JSON number of microseconds at data[i] into
// nanoseconds as ParseMicros does, for the plain forms (at most 15 digits
// before the point and 3 after it, no exponent); ok is false for any
// other value, which the caller parses the general way.
func scanMicros(data []byte, i int) (ns int64, end int, ok bool) {
	j := i
	if j < len(data) && data[j] == '-' {
		j++
	}
	d := j
	var v int64
	for j < len(data) && data[j]-'0' <= 9 {
		v = v*10 + int64(data[j]-'0')
		j++
	}
	if n := j - d; n == 0 || n > 15 || n > 1 && data[d] == '0' {
		return 0, 0, false
	}
	scale := int64(1000)
	if j < len(data) && data[j] == '.' {
		j++
		f := j
		for j < len(data) && data[j]-'0' <= 9 && j-f < 3 {
			v = v*10 + int64(data[j]-'0')
			scale /= 10
			j++
		}
		if j == f {
			return 0, 0, false
		}
	}
	if j < len(data) && (data[j]-'0' <= 9 || data[j] == '.' || data[j] == 'e' || data[j] == 'E') {
		return 0, 0, false
	}
	v *= scale
	if d > i {
		v = -v
	}
	return v, j, true
}

var (
	litNull  = []byte("null")
	litTrue  = []byte("true")
	litFalse = []byte("false")
)

// keyPlain marks the bytes of a key scanKey reads itself: printable ASCII
// but the quote and the backslash. strPlain marks the bytes of a string
// value that need no look: all but the quote, the backslash and control
// characters (bytes outside ASCII are kept as they are, as go-json keeps
// them in a raw value).
var keyPlain, strPlain [256]bool

func init() {
	for c := 0x20; c < 0x80; c++ {
		keyPlain[c] = c != '"' && c != '\\'
	}
	for c := 0x20; c < 0x100; c++ {
		strPlain[c] = c != '"' && c != '\\'
	}
}

// skipWS returns the index of the first byte at or after i that is not
// JSON whitespace.
func skipWS(data []byte, i int) int {
	for i < len(data) {
		if c := data[i]; c > ' ' || c != ' ' && c != '\n' && c != '\r' && c != '\t' {
			return i
		}
		i++
	}
	return i
}

// skipValue returns the index after the JSON value at data[i], or -1 when
// it is not one (or nests deeper than maxDepth, depth counting the
// enclosing levels).
func skipValue(data []byte, i, depth int) int {
	if i >= len(data) {
		return -1
	}
	switch c := data[i]; c {
	case '"':
		return skipString(data, i)
	case '{':
		if depth >= maxDepth {
			return -1
		}
		i = skipWS(data, i+1)
		if i < len(data) && data[i] == '}' {
			return i + 1
		}
		for {
			if i >= len(data) || data[i] != '"' {
				return -1
			}
			if i = skipString(data, i); i < 0 {
				return -1
			}
			i = skipWS(data, i)
			if i >= len(data) || data[i] != ':' {
				return -1
			}
			if i = skipValue(data, skipWS(data, i+1), depth+1); i < 0 {
				return -1
			}
			i = skipWS(data, i)
			if i >= len(data) {
				return -1
			}
			switch data[i] {
			case ',':
				i = skipWS(data, i+1)
			case '}':
				return i + 1
			default:
				return -1
			}
		}
	case '[':
		if depth >= maxDepth {
			return -1
		}
		i = skipWS(data, i+1)
		if i < len(data) && data[i] == ']' {
			return i + 1
		}
		for {
			if i = skipValue(data, i, depth+1); i < 0 {
				return -1
			}
			i = skipWS(data, i)
			if i >= len(data) {
				return -1
			}
			switch data[i] {
			case ',':
				i = skipWS(data, i+1)
			case ']':
				return i + 1
			default:
				return -1
			}
		}
	case 'n':
		return skipLit(data, i, litNull)
	case 't':
		return skipLit(data, i, litTrue)
	case 'f':
		return skipLit(data, i, litFalse)
	default:
		if c == '-' || c >= '0' && c <= '9' {
			return skipNumber(data, i)
		}
		return -1
	}
}

func skipLit(data []byte, i int, lit []byte) int {
	if !bytes.HasPrefix(data[i:], lit) {
		return -1
	}
	return i + len(lit)
}

// skipString returns the index after the string at data[i] ('"'), or -1
// for a string that is not closed, holds a control character or an
// invalid escape.
func skipString(data []byte, i int) int {
	end, _ := scanString(data, i)
	return end
}

// scanString is skipString that also tells whether the string holds an
// escape.
func scanString(data []byte, i int) (end int, escaped bool) {
	i++
	for {
		i = skipStrPlain(data, i)
		if i >= len(data) {
			return -1, false
		}
		switch data[i] {
		case '"':
			return i + 1, escaped
		case '\\':
			escaped = true
			if i+1 >= len(data) {
				return -1, false
			}
			switch data[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(data) {
					return -1, false
				}
				for _, h := range data[i+2 : i+6] {
					if !isHex(h) {
						return -1, false
					}
				}
				i += 6
			default:
				return -1, false
			}
		default: // a control character
			return -1, false
		}
	}
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// skipNumber returns the index after the JSON number at data[i], or -1.
func skipNumber(data []byte, i int) int {
	if data[i] == '-' {
		i++
	}
	switch {
	case i >= len(data):
		return -1
	case data[i] == '0':
		i++
	case data[i] >= '1' && data[i] <= '9':
		i = skipDigits(data, i+1)
	default:
		return -1
	}
	if i < len(data) && data[i] == '.' {
		j := skipDigits(data, i+1)
		if j == i+1 {
			return -1
		}
		i = j
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		i++
		if i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		j := skipDigits(data, i)
		if j == i {
			return -1
		}
		i = j
	}
	return i
}

func skipDigits(data []byte, i int) int {
	for i < len(data) && data[i] >= '0' && data[i] <= '9' {
		i++
	}
	return i
}

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
// (go-json, as encoding/json, decodes a key into the first field whose key
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

// lookup returns the index of the field that the n-byte ASCII key at
// data[i] names exactly, else -1; folded reports a key that names a field
// only by case folding.
func (t *keyTable) lookup(data []byte, i, n int) (k int, folded bool) {
	w := keyWord(data, i, n)
	if k := t.exact(data, i, n, w, keyHash(w, n)); k >= 0 {
		return k, false
	}
	return -1, t.folds(data[i : i+n])
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
		"Process Group Name", "Seq")
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
