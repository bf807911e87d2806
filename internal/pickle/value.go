// Package pickle decodes Python pickles (protocols 0-5, as written by Python's
// pickler and by TorchScript's C++ pickler) into inert values.
//
// Nothing in a pickle is ever executed: GLOBAL, STACK_GLOBAL, REDUCE, BUILD,
// INST, OBJ and NEWOBJ produce Object values that only record what the pickle
// asked for. TorchScript's wrappers torch.jit._pickle.restore_type_tag and
// build_{int,double,bool,tensor}list are unwrapped to their first argument.
//
// Containers are pointers, so lists and dicts referenced several times through
// the memo stay shared (and recursive ones stay recursive). Ints are stored in
// the Value itself: decoding an int never allocates.
//
// Hooks (Options.OnDict, Options.OnList) let a caller that knows the schema turn
// a container into a compact Handle as soon as it is complete; the decoder then
// replaces it on the stack and in the memo and reuses its storage. This is what
// keeps million-entry allocator snapshots small and fast.
package pickle

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"unsafe"
)

// Kind is the type of a Value.
type Kind uint8

// Value kinds.
const (
	KindNone   Kind = iota
	KindBool        // Bool()
	KindInt         // fits in int64: Int()
	KindUint        // in [2^63, 2^64): Uint()
	KindBigInt      // anything wider: BigInt()
	KindFloat       // Float()
	KindString      // Str()
	KindBytes       // Bytes()
	KindTuple       // List() (immutable by convention)
	KindList        // List()
	KindDict        // Dict()
	KindSet         // List() (set or frozenset items)
	KindGlobal      // Global(): a class or function reference, never resolved
	KindObject      // Object(): the inert record of REDUCE/NEWOBJ/INST/OBJ/BUILD
	KindHandle      // Handle(): a value produced by a hook
	kindMark        // internal: a MARK on the stack
)

var kindNames = [...]string{"None", "bool", "int", "int", "int", "float", "str", "bytes", "tuple", "list", "dict", "set", "global", "object", "handle", "mark"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Value is one decoded pickle value. The zero Value is None.
//
// A Value is two words, so that a stack or a list of N values costs 16N
// bytes (Python's cost 8N; a hostile pickle of a million pushes must not
// cost a gigabyte). p is nil for None, the address of tags[k] for the
// kinds held in n alone (bool, ints, float, handle, empty str and bytes),
// and otherwise the object itself: a *List, *Dict, *Global, *Object or
// *big.Int, or the first byte of a string or bytes whose length is in n.
// For those, n's top byte is the kind. p is an unsafe.Pointer rather than
// an interface so that the kind need not take a third word; it only ever
// holds pointers to live Go objects of the type the kind names, so the
// garbage collector sees everything a Value keeps alive.
type Value struct {
	p unsafe.Pointer
	n uint64
}

// tags gives the scalar kinds an address each: Value.p == &tags[k].
var tags [kindMark + 1]byte

const (
	kindShift = 56
	lenMask   = 1<<32 - 1 // string and bytes lengths (bits 0-31 of n)
	refShift  = 32        // interned strings: permanent memo ref + 1 (bits 32-55)
	refMask   = 1<<24 - 1
)

func scalar(k Kind, n uint64) Value { return Value{p: unsafe.Pointer(&tags[k]), n: n} }

func object(k Kind, p unsafe.Pointer) Value { return Value{p: p, n: uint64(k) << kindShift} }

func listValue(k Kind, l *List) Value { return object(k, unsafe.Pointer(l)) }

func dictValue(x *Dict) Value { return object(KindDict, unsafe.Pointer(x)) }

func globalValue(g *Global) Value { return object(KindGlobal, unsafe.Pointer(g)) }

func objectValue(o *Object) Value { return object(KindObject, unsafe.Pointer(o)) }

func bigValue(x *big.Int) Value { return object(KindBigInt, unsafe.Pointer(x)) }

// strValue makes a str value; ref is a permanent memo ref plus one (0 if none).
func strValue(s string, ref uint64) Value {
	if len(s) == 0 {
		return scalar(KindString, ref<<refShift)
	}
	return Value{p: unsafe.Pointer(unsafe.StringData(s)), n: uint64(KindString)<<kindShift | ref<<refShift | uint64(len(s))}
}

func bytesValue(b []byte) Value {
	if len(b) == 0 {
		return scalar(KindBytes, 0)
	}
	return Value{p: unsafe.Pointer(unsafe.SliceData(b)), n: uint64(KindBytes)<<kindShift | uint64(len(b))}
}

// is reports whether v is of scalar kind k (one comparison).
func (v Value) is(k Kind) bool { return v.p == unsafe.Pointer(&tags[k]) }

func (v Value) str() string {
	n := int(v.n & lenMask)
	if n == 0 {
		return ""
	}
	return unsafe.String((*byte)(v.p), n)
}

func (v Value) strRef() uint64 { return v.n >> refShift & refMask }

func (v Value) bytes() []byte {
	n := int(v.n & lenMask)
	if n == 0 {
		return []byte{}
	}
	return unsafe.Slice((*byte)(v.p), n)
}

func (v Value) list() *List   { return (*List)(v.p) }
func (v Value) dict() *Dict   { return (*Dict)(v.p) }
func (v Value) big() *big.Int { return (*big.Int)(v.p) }

// List holds the items of a list, tuple or set.
type List struct {
	Items []Value
	memo  int32 // memo slot, -1 if none
	flags uint8
}

// Dict holds a dict's keys and values in insertion order (Keys[i] -> Vals[i]).
// Later duplicate keys are appended; Get returns the last one, as Python would.
type Dict struct {
	Keys  []Value
	Vals  []Value
	memo  int32
	flags uint8
}

const (
	flagShared    = 1 << iota // referenced again through the memo: never converted or reused
	flagMultiMemo             // memoized under more than one slot
	flagDeclined              // a hook declined it at declineAt items or more: not offered again
)

// Global is a reference to module.name (a class or function). It is never imported.
type Global struct {
	Module, Name string
}

// Object is what a pickle asked to construct: Callable(Args...) then BUILD(State).
type Object struct {
	Callable Value
	Args     []Value
	Kwargs   Value
	State    Value
}

// Constructors, used by hooks and tests.

// None returns the None value.
func None() Value { return Value{} }

// Bool returns a bool value.
func Bool(b bool) Value {
	if b {
		return scalar(KindBool, 1)
	}
	return scalar(KindBool, 0)
}

// Int returns an int value.
func Int(i int64) Value { return scalar(KindInt, uint64(i)) }

// Float returns a float value.
func Float(f float64) Value { return scalar(KindFloat, math.Float64bits(f)) }

// Str returns a string value.
func Str(s string) Value { return strValue(s, 0) }

// Handle returns a hook-defined handle value. Handles below 2^56 are stored
// compactly in the memo.
func Handle(h uint64) Value { return scalar(KindHandle, h) }

// NewList returns a list value over items.
func NewList(items ...Value) Value { return listValue(KindList, &List{Items: items, memo: -1}) }

// NewDict returns a dict value from alternating keys and values.
func NewDict(kv ...Value) Value {
	d := &Dict{memo: -1}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Keys = append(d.Keys, kv[i])
		d.Vals = append(d.Vals, kv[i+1])
	}
	return dictValue(d)
}

// Kind returns the kind of v.
func (v Value) Kind() Kind {
	if v.p == nil {
		return KindNone
	}
	if d := uintptr(v.p) - uintptr(unsafe.Pointer(&tags)); d < uintptr(len(tags)) {
		return Kind(d)
	}
	return Kind(v.n >> kindShift)
}

// IsNone reports whether v is None.
func (v Value) IsNone() bool { return v.p == nil }

// Int returns v as an int64 when v is an int (or bool) that fits.
func (v Value) Int() (int64, bool) {
	switch v.Kind() {
	case KindInt:
		return int64(v.n), true
	case KindBool:
		return int64(v.n), true
	case KindBigInt:
		b := v.big()
		if b.IsInt64() {
			return b.Int64(), true
		}
	}
	return 0, false
}

// Uint returns v as a uint64 when v is a non-negative int below 2^64, or a
// negative int64 reinterpreted in two's complement (as C++ writers do for
// pointers stored in int64).
func (v Value) Uint() (uint64, bool) {
	switch v.Kind() {
	case KindInt, KindUint, KindBool:
		return v.n, true
	case KindBigInt:
		b := v.big()
		if b.IsUint64() {
			return b.Uint64(), true
		}
	}
	return 0, false
}

// BigInt returns v as a big.Int for any int kind.
func (v Value) BigInt() (*big.Int, bool) {
	switch v.Kind() {
	case KindInt, KindBool:
		return big.NewInt(int64(v.n)), true
	case KindUint:
		return new(big.Int).SetUint64(v.n), true
	case KindBigInt:
		return v.big(), true
	}
	return nil, false
}

// Float returns v as a float64 for floats and ints.
func (v Value) Float() (float64, bool) {
	switch v.Kind() {
	case KindFloat:
		return math.Float64frombits(v.n), true
	case KindInt, KindBool:
		return float64(int64(v.n)), true
	case KindUint:
		return float64(v.n), true
	case KindBigInt:
		f, _ := new(big.Float).SetInt(v.big()).Float64()
		return f, true
	}
	return 0, false
}

// Bool returns v as a bool (bools and ints).
func (v Value) Bool() (bool, bool) {
	switch v.Kind() {
	case KindBool, KindInt, KindUint:
		return v.n != 0, true
	}
	return false, false
}

// Str returns v as a string (str, and bytes decoded as UTF-8).
func (v Value) Str() (string, bool) {
	switch v.Kind() {
	case KindString:
		return v.str(), true
	case KindBytes:
		return string(v.bytes()), true
	}
	return "", false
}

// Bytes returns the content of a bytes value.
func (v Value) Bytes() ([]byte, bool) {
	if v.Kind() == KindBytes {
		return v.bytes(), true
	}
	return nil, false
}

// List returns the items of a list, tuple or set, or nil.
func (v Value) List() *List {
	switch v.Kind() {
	case KindList, KindTuple, KindSet:
		return v.list()
	}
	return nil
}

// Dict returns the dict, or nil.
func (v Value) Dict() *Dict {
	if v.Kind() == KindDict {
		return v.dict()
	}
	return nil
}

// Global returns the global reference, or nil.
func (v Value) Global() *Global {
	if v.Kind() == KindGlobal {
		return (*Global)(v.p)
	}
	return nil
}

// Object returns the inert object record, or nil.
func (v Value) Object() *Object {
	if v.Kind() == KindObject {
		return (*Object)(v.p)
	}
	return nil
}

// Handle returns the hook handle.
func (v Value) Handle() (uint64, bool) { return v.n, v.is(KindHandle) }

// Get returns the value of the last string key equal to key.
func (d *Dict) Get(key string) (Value, bool) {
	for i := len(d.Keys) - 1; i >= 0; i-- {
		if k := d.Keys[i]; k.Kind() == KindString && k.str() == key {
			return d.Vals[i], true
		}
	}
	return Value{}, false
}

// Len returns the number of entries.
func (d *Dict) Len() int { return len(d.Keys) }

// String renders v in a Python-like form within 4 KiB (Format).
func (v Value) String() string { return v.Format(4096) }

// Format renders v in a Python-like form in at most about max bytes,
// whatever v holds: containers deeper than 8 levels print as "...", only
// their first 20 items print, a container met again (shared through the
// memo, or recursive) prints as "[...]" (its items count once), long
// strings and ints are cut, and the output stops at max. The work is
// bounded by max as well: a value that holds a list shared 20 ways, 8
// levels deep (20^8 items unshared) costs what its first max bytes cost.
func (v Value) Format(max int) string {
	p := printer{max: max}
	p.format(v, 0)
	return p.b.String()
}

// printer is the state of one Format.
type printer struct {
	b    strings.Builder
	max  int
	cut  bool                    // the output reached max and ends in "..."
	seen map[unsafe.Pointer]bool // containers printed (or being printed)
}

// Limits of Format besides its size.
const (
	formatDepth = 8
	formatItems = 20
)

// full reports whether the output reached max, ending it with "..." the
// first time.
func (p *printer) full() bool {
	if p.cut {
		return true
	}
	if p.b.Len() >= p.max {
		p.b.WriteString("...")
		p.cut = true
	}
	return p.cut
}

func (p *printer) write(s string) {
	if !p.full() {
		p.b.WriteString(s)
	}
}

// again reports whether the container at ptr was printed before, and
// marks it printed.
func (p *printer) again(ptr unsafe.Pointer) bool {
	if p.seen == nil {
		p.seen = map[unsafe.Pointer]bool{}
	}
	if p.seen[ptr] {
		return true
	}
	p.seen[ptr] = true
	return false
}

// room is how many more bytes of a string may print (at least 16, so that
// a cut string still shows its start).
func (p *printer) room() int { return max(p.max-p.b.Len(), 16) }

func (p *printer) format(v Value, depth int) {
	if p.full() {
		return
	}
	k := v.Kind()
	if depth > formatDepth && (k >= KindTuple && k <= KindSet || k == KindObject) {
		p.write("...")
		return
	}
	switch k {
	case KindNone:
		p.write("None")
	case KindBool:
		if v.n != 0 {
			p.write("True")
		} else {
			p.write("False")
		}
	case KindInt:
		p.write(strconv.FormatInt(int64(v.n), 10))
	case KindUint:
		p.write(strconv.FormatUint(v.n, 10))
	case KindBigInt:
		// Decimal conversion is quadratic in the digits: a huge LONG4
		// prints as its size.
		if bits := v.big().BitLen(); bits > 4*p.room() {
			p.write("<int of " + strconv.Itoa(bits) + " bits>")
		} else {
			p.write(v.big().String())
		}
	case KindFloat:
		p.write(strconv.FormatFloat(math.Float64frombits(v.n), 'g', -1, 64))
	case KindString:
		s := v.str()
		if n := p.room(); len(s) > n {
			p.write(strconv.Quote(s[:n]) + "...")
		} else {
			p.write(strconv.Quote(s))
		}
	case KindBytes:
		bs := v.bytes()
		if n := p.room(); len(bs) > n {
			p.write(fmt.Sprintf("b%q...", bs[:n]))
		} else {
			p.write(fmt.Sprintf("b%q", bs))
		}
	case KindList, KindTuple, KindSet:
		open, end := "[", "]"
		if v.Kind() == KindTuple {
			open, end = "(", ")"
		} else if v.Kind() == KindSet {
			open, end = "{", "}"
		}
		if p.again(v.p) {
			p.write(open + "..." + end)
			return
		}
		p.write(open)
		for i, it := range v.list().Items {
			if i > 0 {
				p.write(", ")
			}
			if i >= formatItems {
				p.write("...")
				break
			}
			p.format(it, depth+1)
			if p.cut {
				return
			}
		}
		p.write(end)
	case KindDict:
		d := v.dict()
		if p.again(v.p) {
			p.write("{...}")
			return
		}
		p.write("{")
		for i := range d.Keys {
			if i > 0 {
				p.write(", ")
			}
			if i >= formatItems {
				p.write("...")
				break
			}
			p.format(d.Keys[i], depth+1)
			p.write(": ")
			p.format(d.Vals[i], depth+1)
			if p.cut {
				return
			}
		}
		p.write("}")
	case KindGlobal:
		g := (*Global)(v.p)
		name := g.Module + "." + g.Name
		if n := p.room(); len(name) > n {
			name = name[:n]
		}
		q := strconv.Quote(name) // escaped, printed without the quotes
		p.write(q[1 : len(q)-1])
	case KindObject:
		if p.again(v.p) {
			p.write("<object ...>")
			return
		}
		o := (*Object)(v.p)
		p.format(o.Callable, depth+1)
		p.write("(")
		for i, a := range o.Args {
			if i > 0 {
				p.write(", ")
			}
			if i >= formatItems {
				p.write("...")
				break
			}
			p.format(a, depth+1)
		}
		p.write(")")
		if !o.State.IsNone() {
			p.write(".__setstate__(")
			p.format(o.State, depth+1)
			p.write(")")
		}
	case KindHandle:
		p.write("<handle " + strconv.FormatUint(v.n, 10) + ">")
	default:
		p.write("<mark>")
	}
}
