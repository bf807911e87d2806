package pickle

import (
	"math"
	"strconv"
	"strings"
)

// Opcodes (Lib/pickletools.py).
const (
	opMark           = '('
	opStop           = '.'
	opPop            = '0'
	opPopMark        = '1'
	opDup            = '2'
	opFloat          = 'F'
	opInt            = 'I'
	opBinint         = 'J'
	opBinint1        = 'K'
	opLong           = 'L'
	opBinint2        = 'M'
	opNone           = 'N'
	opPersid         = 'P'
	opBinpersid      = 'Q'
	opReduce         = 'R'
	opString         = 'S'
	opBinstring      = 'T'
	opShortBinstring = 'U'
	opUnicode        = 'V'
	opBinunicode     = 'X'
	opAppend         = 'a'
	opBuild          = 'b'
	opGlobal         = 'c'
	opDict           = 'd'
	opEmptyDict      = '}'
	opAppends        = 'e'
	opGet            = 'g'
	opBinget         = 'h'
	opInst           = 'i'
	opLongBinget     = 'j'
	opList           = 'l'
	opEmptyList      = ']'
	opObj            = 'o'
	opPut            = 'p'
	opBinput         = 'q'
	opLongBinput     = 'r'
	opSetitem        = 's'
	opTuple          = 't'
	opEmptyTuple     = ')'
	opSetitems       = 'u'
	opBinfloat       = 'G'

	opProto           = 0x80
	opNewobj          = 0x81
	opExt1            = 0x82
	opExt2            = 0x83
	opExt4            = 0x84
	opTuple1          = 0x85
	opTuple2          = 0x86
	opTuple3          = 0x87
	opNewtrue         = 0x88
	opNewfalse        = 0x89
	opLong1           = 0x8a
	opLong4           = 0x8b
	opBinbytes        = 'B'
	opShortBinbytes   = 'C'
	opShortBinunicode = 0x8c
	opBinunicode8     = 0x8d
	opBinbytes8       = 0x8e
	opEmptySet        = 0x8f
	opAdditems        = 0x90
	opFrozenset       = 0x91
	opNewobjEx        = 0x92
	opStackGlobal     = 0x93
	opMemoize         = 0x94
	opFrame           = 0x95
	opBytearray8      = 0x96
	opNextBuffer      = 0x97
	opReadonlyBuffer  = 0x98
)

var opNames = map[byte]string{
	opMark: "MARK", opStop: "STOP", opPop: "POP", opPopMark: "POP_MARK", opDup: "DUP", opFloat: "FLOAT",
	opInt: "INT", opBinint: "BININT", opBinint1: "BININT1", opLong: "LONG", opBinint2: "BININT2",
	opNone: "NONE", opPersid: "PERSID", opBinpersid: "BINPERSID", opReduce: "REDUCE", opString: "STRING",
	opBinstring: "BINSTRING", opShortBinstring: "SHORT_BINSTRING", opUnicode: "UNICODE",
	opBinunicode: "BINUNICODE", opAppend: "APPEND", opBuild: "BUILD", opGlobal: "GLOBAL", opDict: "DICT",
	opEmptyDict: "EMPTY_DICT", opAppends: "APPENDS", opGet: "GET", opBinget: "BINGET", opInst: "INST",
	opLongBinget: "LONG_BINGET", opList: "LIST", opEmptyList: "EMPTY_LIST", opObj: "OBJ", opPut: "PUT",
	opBinput: "BINPUT", opLongBinput: "LONG_BINPUT", opSetitem: "SETITEM", opTuple: "TUPLE",
	opEmptyTuple: "EMPTY_TUPLE", opSetitems: "SETITEMS", opBinfloat: "BINFLOAT", opProto: "PROTO",
	opNewobj: "NEWOBJ", opExt1: "EXT1", opExt2: "EXT2", opExt4: "EXT4", opTuple1: "TUPLE1",
	opTuple2: "TUPLE2", opTuple3: "TUPLE3", opNewtrue: "NEWTRUE", opNewfalse: "NEWFALSE",
	opLong1: "LONG1", opLong4: "LONG4", opBinbytes: "BINBYTES", opShortBinbytes: "SHORT_BINBYTES",
	opShortBinunicode: "SHORT_BINUNICODE", opBinunicode8: "BINUNICODE8", opBinbytes8: "BINBYTES8",
	opEmptySet: "EMPTY_SET", opAdditems: "ADDITEMS", opFrozenset: "FROZENSET", opNewobjEx: "NEWOBJ_EX",
	opStackGlobal: "STACK_GLOBAL", opMemoize: "MEMOIZE", opFrame: "FRAME", opBytearray8: "BYTEARRAY8",
	opNextBuffer: "NEXT_BUFFER", opReadonlyBuffer: "READONLY_BUFFER",
}

// step executes one opcode. It reports done at STOP.
func (d *decoder) step(op byte) (bool, error) {
	switch op {
	// Hot opcodes first (the compiler builds a jump table either way).
	case opBinget:
		i, err := d.u8()
		if err != nil {
			return false, err
		}
		return false, d.memoGet(i)
	case opLongBinget:
		i, err := d.u32()
		if err != nil {
			return false, err
		}
		return false, d.memoGet(int(i))
	case opMemoize:
		v, err := d.top()
		if err != nil {
			return false, err
		}
		return false, d.memoPut(d.memo.n, *v)
	case opBinput:
		i, err := d.u8()
		if err != nil {
			return false, err
		}
		v, err := d.top()
		if err != nil {
			return false, err
		}
		return false, d.memoPut(i, *v)
	case opLongBinput:
		i, err := d.u32()
		if err != nil {
			return false, err
		}
		v, err := d.top()
		if err != nil {
			return false, err
		}
		return false, d.memoPut(int(i), *v)
	case opPut:
		b, err := d.line()
		if err != nil {
			return false, err
		}
		i, err := strconv.Atoi(string(b))
		if err != nil {
			return false, d.errf("bad memo index %q", cut(b))
		}
		v, err := d.top()
		if err != nil {
			return false, err
		}
		return false, d.memoPut(i, *v)
	case opGet:
		b, err := d.line()
		if err != nil {
			return false, err
		}
		i, err := strconv.Atoi(string(b))
		if err != nil {
			return false, d.errf("bad memo index %q", cut(b))
		}
		return false, d.memoGet(i)
	case opMark:
		d.mark()
	case opBinint1:
		i, err := d.u8()
		if err != nil {
			return false, err
		}
		d.push(Int(int64(i)))
	case opBinint2:
		i, err := d.u16()
		if err != nil {
			return false, err
		}
		d.push(Int(int64(i)))
	case opBinint:
		i, err := d.u32()
		if err != nil {
			return false, err
		}
		d.push(Int(int64(int32(i))))
	case opLong1:
		n, err := d.u8()
		if err != nil {
			return false, err
		}
		b, err := d.take(n)
		if err != nil {
			return false, err
		}
		d.push(decodeLong(b))
	case opLong4:
		n, err := d.u32()
		if err != nil {
			return false, err
		}
		if int32(n) < 0 {
			return false, d.errf("negative length")
		}
		b, err := d.take(int(n))
		if err != nil {
			return false, err
		}
		d.push(decodeLong(b))
	case opShortBinunicode, opBinunicode, opBinunicode8, opShortBinstring, opBinstring:
		n, err := d.argLen(op)
		if err != nil {
			return false, err
		}
		b, err := d.take(n)
		if err != nil {
			return false, err
		}
		d.push(d.str(b))
	case opEmptyDict:
		d.held += containerCost
		d.push(dictValue(d.newDict()))
	case opEmptyList:
		d.held += containerCost
		d.push(listValue(KindList, d.newList()))
	case opEmptyTuple:
		d.held += containerCost
		d.push(listValue(KindTuple, &List{memo: -1}))
	case opSetitems:
		items, err := d.popMark()
		if err != nil {
			return false, err
		}
		if len(items)%2 != 0 {
			return false, d.errf("odd number of items (%d) for SETITEMS", len(items))
		}
		t, err := d.top()
		if err != nil {
			return false, err
		}
		x := t.Dict()
		if x == nil {
			return false, d.errf("SETITEMS on a %s, expected a dict", t.Kind())
		}
		if err := d.fits(len(x.Keys), len(items)/2); err != nil {
			return false, err
		}
		d.held += valueCost * int64(len(items))
		for i := 0; i < len(items); i += 2 {
			x.Keys = append(x.Keys, items[i])
			x.Vals = append(x.Vals, items[i+1])
		}
		d.finishDict(x)
	case opSetitem:
		kv, err := d.popN(2)
		if err != nil {
			return false, err
		}
		k, v := kv[0], kv[1]
		t, err := d.top()
		if err != nil {
			return false, err
		}
		x := t.Dict()
		if x == nil {
			return false, d.errf("SETITEM on a %s, expected a dict", t.Kind())
		}
		if err := d.fits(len(x.Keys), 1); err != nil {
			return false, err
		}
		d.held += 2 * valueCost
		x.Keys = append(x.Keys, k)
		x.Vals = append(x.Vals, v)
		d.finishDict(x)
	case opAppends:
		items, err := d.popMark()
		if err != nil {
			return false, err
		}
		t, err := d.top()
		if err != nil {
			return false, err
		}
		if t.is(KindHandle) {
			return false, d.extend(t, items)
		}
		l := t.List()
		if l == nil || t.Kind() != KindList {
			return false, d.errf("APPENDS on a %s, expected a list", t.Kind())
		}
		if err := d.fits(len(l.Items), len(items)); err != nil {
			return false, err
		}
		d.held += valueCost * int64(len(items))
		l.Items = growAppend(l.Items, items...)
		d.finishList(l)
	case opAppend:
		v, err := d.pop()
		if err != nil {
			return false, err
		}
		t, err := d.top()
		if err != nil {
			return false, err
		}
		if t.is(KindHandle) {
			return false, d.extend(t, []Value{v})
		}
		l := t.List()
		if l == nil || t.Kind() != KindList {
			return false, d.errf("APPEND on a %s, expected a list", t.Kind())
		}
		if err := d.fits(len(l.Items), 1); err != nil {
			return false, err
		}
		d.held += valueCost
		l.Items = growAppend(l.Items, v)
		d.finishList(l)
	case opTuple2, opTuple3, opTuple1:
		items, err := d.popN(int(op-opTuple1) + 1)
		if err != nil {
			return false, err
		}
		d.held += containerCost + valueCost*int64(len(items))
		d.push(listValue(KindTuple, &List{Items: items, memo: -1}))
	case opTuple:
		items, err := d.popMark()
		if err != nil {
			return false, err
		}
		d.held += containerCost + valueCost*int64(len(items))
		d.push(listValue(KindTuple, &List{Items: append([]Value(nil), items...), memo: -1}))
	case opList:
		items, err := d.popMark()
		if err != nil {
			return false, err
		}
		d.held += containerCost + valueCost*int64(len(items))
		l := &List{Items: append([]Value(nil), items...), memo: -1}
		d.push(listValue(KindList, l))
		d.finishList(l)
	case opDict:
		items, err := d.popMark()
		if err != nil {
			return false, err
		}
		if len(items)%2 != 0 {
			return false, d.errf("odd number of items (%d) for DICT", len(items))
		}
		d.held += containerCost + valueCost*int64(len(items))
		x := &Dict{memo: -1}
		for i := 0; i < len(items); i += 2 {
			x.Keys = append(x.Keys, items[i])
			x.Vals = append(x.Vals, items[i+1])
		}
		d.push(dictValue(x))
		d.finishDict(x)
	case opNone:
		d.push(Value{})
	case opNewtrue:
		d.push(Bool(true))
	case opNewfalse:
		d.push(Bool(false))
	case opBinfloat:
		b, err := d.take(8)
		if err != nil {
			return false, err
		}
		u := uint64(b[0])<<56 | uint64(b[1])<<48 | uint64(b[2])<<40 | uint64(b[3])<<32 |
			uint64(b[4])<<24 | uint64(b[5])<<16 | uint64(b[6])<<8 | uint64(b[7])
		d.push(scalar(KindFloat, u))
	case opFrame:
		if _, err := d.u64(); err != nil {
			return false, err
		}
	case opProto:
		v, err := d.u8()
		if err != nil {
			return false, err
		}
		if v > 5 {
			return false, d.errf("unsupported protocol %d (expected 0 to 5)", v)
		}
	case opStop:
		return true, nil
	case opPop:
		if len(d.marks) > 0 && d.marks[len(d.marks)-1] == len(d.stack) {
			d.marks = d.marks[:len(d.marks)-1] // POP of a MARK
			return false, nil
		}
		_, err := d.pop()
		return false, err
	case opPopMark:
		_, err := d.popMark()
		return false, err
	case opDup:
		v, err := d.top()
		if err != nil {
			return false, err
		}
		markShared(*v)
		d.push(*v)
	case opFloat:
		b, err := d.line()
		if err != nil {
			return false, err
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(string(b)), 64)
		if err != nil {
			return false, d.errf("bad float %q", cut(b))
		}
		d.push(Float(f))
	case opInt:
		b, err := d.line()
		if err != nil {
			return false, err
		}
		switch string(b) {
		case "00":
			d.push(Bool(false))
		case "01":
			d.push(Bool(true))
		default:
			if err := d.digits(b); err != nil {
				return false, err
			}
			v, ok := parseTextInt(string(b))
			if !ok {
				return false, d.errf("bad int %q", cut(b))
			}
			d.push(v)
		}
	case opLong:
		b, err := d.line()
		if err != nil {
			return false, err
		}
		if err := d.digits(b); err != nil {
			return false, err
		}
		v, ok := parseTextInt(string(b))
		if !ok {
			return false, d.errf("bad long %q", cut(b))
		}
		d.push(v)
	case opString:
		b, err := d.line()
		if err != nil {
			return false, err
		}
		s := string(b)
		if len(s) >= 2 && (s[0] == '\'' || s[0] == '"') && s[len(s)-1] == s[0] {
			s = s[1 : len(s)-1]
		}
		if u, err := strconv.Unquote(`"` + strings.ReplaceAll(s, `"`, `\"`) + `"`); err == nil {
			s = u
		}
		d.push(Str(s))
	case opUnicode:
		b, err := d.line()
		if err != nil {
			return false, err
		}
		d.push(Str(unescapeRawUnicode(string(b))))
	case opBinbytes, opShortBinbytes, opBinbytes8, opBytearray8:
		n, err := d.argLen(op)
		if err != nil {
			return false, err
		}
		b, err := d.take(n)
		if err != nil {
			return false, err
		}
		d.held += int64(len(b))
		d.push(bytesValue(append([]byte(nil), b...)))
	case opEmptySet:
		d.held += containerCost
		d.push(listValue(KindSet, &List{memo: -1}))
	case opAdditems:
		items, err := d.popMark()
		if err != nil {
			return false, err
		}
		t, err := d.top()
		if err != nil {
			return false, err
		}
		if t.Kind() != KindSet {
			return false, d.errf("ADDITEMS on a %s, expected a set", t.Kind())
		}
		l := t.list()
		if err := d.fits(len(l.Items), len(items)); err != nil {
			return false, err
		}
		d.held += valueCost * int64(len(items))
		l.Items = growAppend(l.Items, items...)
	case opFrozenset:
		items, err := d.popMark()
		if err != nil {
			return false, err
		}
		d.held += containerCost + valueCost*int64(len(items))
		d.push(listValue(KindSet, &List{Items: append([]Value(nil), items...), memo: -1}))
	case opGlobal:
		mod, err := d.line()
		if err != nil {
			return false, err
		}
		m := string(mod)
		name, err := d.line()
		if err != nil {
			return false, err
		}
		d.push(d.global(m, string(name), len(m)+len(name)))
	case opStackGlobal:
		mn, err := d.popN(2)
		if err != nil {
			return false, err
		}
		mod, name := mn[0], mn[1]
		ms, ok1 := mod.Str()
		ns, ok2 := name.Str()
		if !ok1 || !ok2 {
			return false, d.errf("STACK_GLOBAL needs two strings, got %s and %s", mod.Kind(), name.Kind())
		}
		d.push(d.global(ms, ns, 0)) // the strings are the values' own
	case opReduce, opNewobj: // callable(*args) and cls.__new__(cls, *args): recorded alike
		ca, err := d.popN(2)
		if err != nil {
			return false, err
		}
		d.push(d.reduce(ca[0], tupleItems(ca[1]), Value{}))
	case opNewobjEx:
		cak, err := d.popN(3)
		if err != nil {
			return false, err
		}
		d.push(d.reduce(cak[0], tupleItems(cak[1]), cak[2]))
	case opBuild:
		state, err := d.pop()
		if err != nil {
			return false, err
		}
		t, err := d.top()
		if err != nil {
			return false, err
		}
		if o := t.Object(); o != nil {
			o.State = state
		} else {
			d.held += containerCost
			*t = objectValue(&Object{Callable: *t, State: state})
		}
	case opInst:
		mod, err := d.line()
		if err != nil {
			return false, err
		}
		m := string(mod)
		name, err := d.line()
		if err != nil {
			return false, err
		}
		items, err := d.popMark()
		if err != nil {
			return false, err
		}
		g := d.global(m, string(name), len(m)+len(name))
		d.held += valueCost * int64(len(items))
		d.push(d.reduce(g, append([]Value(nil), items...), Value{}))
	case opObj:
		items, err := d.popMark()
		if err != nil {
			return false, err
		}
		if len(items) == 0 {
			return false, d.errf("OBJ without a class")
		}
		d.held += valueCost * int64(len(items)-1)
		d.push(d.reduce(items[0], append([]Value(nil), items[1:]...), Value{}))
	case opPersid:
		b, err := d.line()
		if err != nil {
			return false, err
		}
		d.held += int64(len(b))
		d.push(d.persistent(Str(string(b))))
	case opBinpersid:
		v, err := d.pop()
		if err != nil {
			return false, err
		}
		d.push(d.persistent(v))
	case opExt1, opExt2, opExt4:
		var code int
		var err error
		switch op {
		case opExt1:
			code, err = d.u8()
		case opExt2:
			code, err = d.u16()
		default:
			var u uint32
			u, err = d.u32()
			code = int(u)
		}
		if err != nil {
			return false, err
		}
		n := strconv.Itoa(code)
		d.push(d.global("copyreg.extension", n, len(n)))
	case opNextBuffer:
		return false, d.errf("out-of-band buffers are not supported")
	case opReadonlyBuffer:
		if _, err := d.top(); err != nil {
			return false, err
		}
	default:
		return false, d.errf("unknown opcode 0x%02x (not a pickle, or corrupt)", op)
	}
	return false, nil
}

// global makes a Global and charges it to held: its allocation and the
// newBytes of strings made for it (0 where they are decoded values, charged
// already).
func (d *decoder) global(module, name string, newBytes int) Value {
	d.held += containerCost + int64(newBytes)
	return globalValue(&Global{Module: module, Name: name})
}

// persistent is the object a persistent id stands for, charged to held
// (the object, its callable and its one argument).
func (d *decoder) persistent(id Value) Value {
	d.held += 2*containerCost + valueCost
	return objectValue(&Object{
		Callable: globalValue(&Global{Module: "pickle", Name: "persistent_load"}),
		Args:     []Value{id},
	})
}

// unescapeRawUnicode decodes the raw-unicode-escape text of the UNICODE
// opcode: bytes are Latin-1 code points, \uXXXX and \UXXXXXXXX escapes the rest.
func unescapeRawUnicode(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) && (s[i+1] == 'u' || s[i+1] == 'U') {
			n := 4
			if s[i+1] == 'U' {
				n = 8
			}
			if i+2+n <= len(s) {
				if r, err := strconv.ParseUint(s[i+2:i+2+n], 16, 32); err == nil && r <= math.MaxInt32 {
					b.WriteRune(rune(r))
					i += 1 + n
					continue
				}
			}
		}
		b.WriteRune(rune(s[i]))
	}
	return b.String()
}

// extend appends items to a list that a hook turned into handle t.
func (d *decoder) extend(t *Value, items []Value) error {
	if d.opts.OnExtend == nil {
		return d.errf("APPENDS on a converted list")
	}
	if !d.opts.OnExtend(t.n, items) {
		return d.errf("APPENDS items do not fit the converted list")
	}
	return nil
}

// fits checks that a container of n items can take k more.
func (d *decoder) fits(n, k int) error {
	if n+k > d.opts.MaxValues {
		return d.limitf("container of %d items exceeds the limit of %d", n+k, d.opts.MaxValues)
	}
	return nil
}

// digits refuses text integers longer than Options.MaxDigits: Go's decimal
// conversion is quadratic, so a line of a million digits would cost
// seconds, and Python refuses them too (ValueError: Exceeds the limit
// (4300 digits) for integer string conversion).
func (d *decoder) digits(b []byte) error {
	n := 0
	for _, c := range b {
		if c >= '0' && c <= '9' {
			n++
		}
	}
	if n > d.opts.MaxDigits {
		return d.errf("integer of %d digits exceeds the limit of %d digits (Python's sys.int_max_str_digits)", n, d.opts.MaxDigits)
	}
	return nil
}

// cut shortens an argument quoted in an error message.
func cut(b []byte) []byte {
	if len(b) > 40 {
		return append(append([]byte(nil), b[:40]...), "..."...)
	}
	return b
}

// growAppend appends doubling the capacity, so long lists copy their items
// about once in total instead of about four times with append's 1.25x growth.
func growAppend(s []Value, items ...Value) []Value {
	if n := len(s) + len(items); n > cap(s) {
		ns := make([]Value, len(s), max(2*cap(s), n, 4))
		copy(ns, s)
		s = ns
	}
	return append(s, items...)
}

// argLen reads the length that prefixes the argument of a string or bytes
// opcode: one byte for the SHORT_ forms, four for the classic ones (signed
// for BINSTRING), eight for the protocol-4/5 ones.
func (d *decoder) argLen(op byte) (int, error) {
	switch op {
	case opShortBinunicode, opShortBinstring, opShortBinbytes:
		return d.u8()
	case opBinunicode, opBinstring, opBinbytes:
		n, err := d.u32()
		if err != nil {
			return 0, err
		}
		if op == opBinstring && int32(n) < 0 {
			return 0, d.errf("negative length")
		}
		return int(n), nil
	}
	return d.length64()
}

// popN removes the top n values (in stack order, deepest first) without
// crossing a MARK. The result is a copy.
func (d *decoder) popN(n int) ([]Value, error) {
	k := len(d.stack)
	if k < n || (len(d.marks) > 0 && d.marks[len(d.marks)-1] > k-n) {
		return nil, d.errf("stack underflow")
	}
	out := append([]Value(nil), d.stack[k-n:]...)
	d.stack = d.stack[:k-n]
	return out, nil
}
