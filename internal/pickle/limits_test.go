package pickle

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"unsafe"
)

// TestValueIsTwoWords holds the representation to two words: a stack or a
// list of N values costs 16N bytes (a hostile pickle of 16M pushes must fit
// in a few hundred MB, as in Python).
func TestValueIsTwoWords(t *testing.T) {
	if n := unsafe.Sizeof(Value{}); n != 16 {
		t.Fatalf("Value is %d bytes, want 16", n)
	}
}

// TestValueRoundTrips checks every kind through the compact representation,
// including the values whose bits look like another kind's.
func TestValueRoundTrips(t *testing.T) {
	big1 := decodeLong([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 1})
	for _, c := range []struct {
		v    Value
		kind Kind
		str  string
	}{
		{None(), KindNone, "None"},
		{Bool(true), KindBool, "True"},
		{Int(-1), KindInt, "-1"},
		{Int(int64(KindList) << kindShift), KindInt, "648518346341351424"}, // an int whose top byte is a kind
		{scalar(KindUint, math.MaxUint64), KindUint, "18446744073709551615"},
		{Float(1.5), KindFloat, "1.5"},
		{Str(""), KindString, `""`},
		{Str("héllo"), KindString, `"héllo"`},
		{bytesValue(nil), KindBytes, `b""`},
		{bytesValue([]byte("ab")), KindBytes, `b"ab"`},
		{big1, KindBigInt, "4722366482869645213696"},
		{NewList(Int(1), Str("a")), KindList, `[1, "a"]`},
		{NewDict(Str("k"), None()), KindDict, `{"k": None}`},
		{globalValue(&Global{Module: "m", Name: "n"}), KindGlobal, "m.n"},
		{Handle(7), KindHandle, "<handle 7>"},
	} {
		if c.v.Kind() != c.kind || c.v.String() != c.str {
			t.Errorf("%s: kind %s, String %s", c.str, c.v.Kind(), c.v.String())
		}
	}
	if s, ok := Str("abc").Str(); !ok || s != "abc" {
		t.Errorf("Str round trip: %q", s)
	}
	if b, ok := bytesValue([]byte{1, 2}).Bytes(); !ok || !bytes.Equal(b, []byte{1, 2}) {
		t.Errorf("Bytes round trip: %v", b)
	}
	if h, ok := Int(7).Handle(); ok {
		t.Errorf("an int is not a handle (%d)", h)
	}
	if Int(0).IsNone() || !None().IsNone() {
		t.Error("IsNone")
	}
}

func pushes(op byte, n int) []byte {
	b := []byte{opProto, 4}
	b = append(b, bytes.Repeat([]byte{op}, n)...)
	return append(b, opStop)
}

func u64le(n uint64) []byte { return binary.LittleEndian.AppendUint64(nil, n) }

// TestLimits checks each limit on a small generated input: the error is
// an *Error at the opcode that broke it, naming the limit.
func TestLimits(t *testing.T) {
	opts := Options{MaxString: 100, MaxValues: 1000, MaxDigits: 50, LimitNote: "set by a test"}
	reduceArgs := []byte{opProto, 4, opMark}
	for i := 0; i < 1001; i++ {
		reduceArgs = append(reduceArgs, opNone)
	}
	for _, c := range []struct {
		name string
		in   []byte
		off  int64
		want string
	}{
		{"string", append(append([]byte{opProto, 4, opBinunicode8}, u64le(101)...), bytes.Repeat([]byte{'a'}, 101)...), 2,
			"BINUNICODE8: argument of 101 bytes exceeds the limit of 100 bytes (set by a test)"},
		{"bytes", append([]byte{opProto, 4, opBinbytes, 200, 0, 0, 0}, bytes.Repeat([]byte{'a'}, 200)...), 2,
			"argument of 200 bytes exceeds the limit"},
		{"length lie in memory", append([]byte{opProto, 4, opBinunicode8}, u64le(50)...), 2, "input ends at offset 11, 50 more bytes expected"},
		{"stack", pushes(opNone, 1<<20+10), 1 << 20, "values on the stack exceed the limit of 1000 (set by a test)"},
		{"marks", pushes(opMark, 1<<20+10), 1 << 20, "open MARKs exceed the limit of 1000"},
		{"container", append(append([]byte{opProto, 4, opEmptyList}, reduceArgs[2:]...), opAppends, opStop), 1005, "APPENDS: container of 1001 items exceeds the limit of 1000"},
		{"digits INT", append(append([]byte{opProto, 2, opInt}, bytes.Repeat([]byte{'1'}, 51)...), '\n', '.'), 2,
			"INT: integer of 51 digits exceeds the limit of 50 digits (Python's sys.int_max_str_digits)"},
		{"digits LONG", append(append([]byte{opProto, 2, opLong, '-'}, bytes.Repeat([]byte{'1'}, 51)...), 'L', '\n', '.'), 2, "LONG: integer of 51 digits"},
	} {
		for _, stream := range []bool{false, true} {
			var err error
			if stream {
				_, err = Decode(bytes.NewReader(c.in), opts)
			} else {
				_, err = DecodeBytes(c.in, opts)
			}
			var pe *Error
			if !errors.As(err, &pe) || pe.Offset != c.off || !strings.Contains(err.Error(), c.want) {
				if stream && c.name == "length lie in memory" && err != nil && strings.Contains(err.Error(), "input ends") {
					continue // streams learn the truth by reading
				}
				t.Errorf("%s (stream %v): %v, want offset %d and %q", c.name, stream, err, c.off, c.want)
			}
		}
	}
	// Python's default digit limit, and a number just under it.
	ok := append(append([]byte{opProto, 2, opLong}, bytes.Repeat([]byte{'9'}, DefaultMaxDigits)...), 'L', '\n', '.')
	if _, err := DecodeBytes(ok, Options{}); err != nil {
		t.Errorf("%d digits: %v", DefaultMaxDigits, err)
	}
}

// TestCheckCalled checks that Options.Check runs as the input goes by and
// that its error stops decoding at the offset reached.
func TestCheckCalled(t *testing.T) {
	in := pushes(opNone, 3<<20)
	var offs []int64
	stop := errors.New("budget spent")
	_, err := DecodeBytes(in, Options{Check: func(off int64) error {
		offs = append(offs, off)
		if len(offs) == 2 {
			return stop
		}
		return nil
	}})
	if len(offs) != 2 || offs[0] != 1<<20 || offs[1] != 2<<20 || err == nil || !strings.Contains(err.Error(), "offset 2097152: NONE: budget spent") {
		t.Fatalf("checks at %v, err %v", offs, err)
	}
}

// TestManyPushesCompact measures the heap a stack of 4M pushes keeps: two
// words a value (Python: one), not the four words values used to take.
func TestManyPushesCompact(t *testing.T) {
	const n = 4 << 20
	in := append([]byte{opProto, 4}, bytes.Repeat([]byte{opNone}, n)...)
	d := newDecoder(nil, Options{})
	d.buf, d.eof = in, true
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if _, err := d.run(); err == nil || !strings.Contains(err.Error(), "input ends before STOP") {
		t.Fatalf("err = %v", err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	perValue := float64(after.HeapAlloc-before.HeapAlloc) / n
	if len(d.stack) != n || perValue > 20 {
		t.Fatalf("%d values keep %.1f bytes each, want at most 20", len(d.stack), perValue)
	}
	runtime.KeepAlive(d)
}

// TestReduceSharesArgs decodes a pickle that REDUCEs one memoized
// 10,000-item tuple 20,000 times: the arguments are shared, not copied (a
// copy each time would cost 3.2 GB here).
func TestReduceSharesArgs(t *testing.T) {
	b := []byte{opProto, 4, opGlobal}
	b = append(b, "builtins\nset\n"...)
	b = append(b, opMemoize, opMark, opMark)
	for i := 0; i < 10_000; i++ {
		b = append(b, opNone)
	}
	b = append(b, opList, opTuple, opMemoize, opPop, opPop, opMark)
	for i := 0; i < 20_000; i++ {
		b = append(b, opBinget, 0, opBinget, 1, opReduce)
	}
	b = append(b, opList, opStop)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	before := ms.TotalAlloc
	v, err := DecodeBytes(b, Options{})
	if err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&ms)
	l := v.List()
	if l == nil || len(l.Items) != 20_000 || l.Items[0].Kind() != KindSet || len(l.Items[0].List().Items) != 10_000 {
		t.Fatalf("decoded %v", v)
	}
	if alloc := ms.TotalAlloc - before; alloc > 64<<20 {
		t.Fatalf("decoding allocated %d MB", alloc>>20)
	}
}

// TestDeclinedNotOfferedAgain fills one dict with 100,000 SETITEMs: a hook
// that declines it is offered it at most declineAt times, not 100,000.
func TestDeclinedNotOfferedAgain(t *testing.T) {
	b := []byte{opProto, 4, opEmptyDict}
	for i := 0; i < 100_000; i++ {
		b = append(b, opBinint, byte(i), byte(i>>8), byte(i>>16), 0, opNone, opSetitem)
	}
	b = append(b, opStop)
	offers := 0
	v, err := DecodeBytes(b, Options{OnDict: func(d *Dict) (Value, bool) {
		offers++
		return Value{}, false
	}})
	if err != nil || v.Dict().Len() != 100_000 {
		t.Fatal(err)
	}
	if offers != declineAt {
		t.Fatalf("offered %d times, want %d", offers, declineAt)
	}
}

// TestScannerAgreesWithDecoder feeds the scanner the testdata pickles a
// byte at a time, whole, and damaged: valid ones pass and reach STOP, and
// where the scanner refuses, the decoder fails too.
func TestScannerAgreesWithDecoder(t *testing.T) {
	names, _ := filepath.Glob("testdata/*.pickle")
	if len(names) == 0 {
		t.Fatal("no testdata pickles")
	}
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		sc := NewScanner(Options{})
		for i := 1; i <= len(b); i++ {
			if err := sc.Feed(b[:i]); err != nil {
				t.Fatalf("%s: byte %d: %v", n, i, err)
			}
		}
		// STOP is seen where the scanner looks at opcodes, not inside
		// frames walked over (protocols 4 and 5).
		if framed := len(b) > 2 && b[2] == opFrame; !sc.Done() && !framed {
			t.Errorf("%s: scanner did not see STOP", n)
		}
		// Trailing garbage after a framed pickle is no error: the pickle
		// ended inside the last frame.
		sc = NewScanner(Options{})
		if err := sc.Feed(append(append([]byte(nil), b...), 0, 0, 0)); err != nil || !sc.Done() {
			t.Errorf("%s with trailing zeros: %v, done %v", n, err, sc.Done())
		}
	}
	for _, c := range []struct {
		in   []byte
		want string
	}{
		{[]byte{opProto, 4, 0}, "offset 2: opcode 0x00: unknown opcode 0x00"},
		{append(append([]byte{opProto, 4, opBinbytes8}, u64le(1<<40)...), 0), "offset 2: BINBYTES8: argument of 1099511627776 bytes exceeds the limit of 1073741824 bytes"},
		{append([]byte{opProto, 2, opLong}, bytes.Repeat([]byte{'1'}, 5000)...), ""},                                     // no newline yet: wait
		{append(append([]byte{opProto, 2, opLong}, bytes.Repeat([]byte{'1'}, 5000)...), '\n'), "integer of 5000 digits"}, // refused
		{append([]byte{opProto, 2, opGlobal}, bytes.Repeat([]byte{'m'}, 2<<20)...), "line longer than 1 MiB"},
		{append(append([]byte{opProto, 2, opGlobal}, bytes.Repeat([]byte{'m'}, 2<<20)...), "\nf\n."...), "line longer than 1 MiB"}, // whole: the decoder refuses it too
	} {
		err := NewScanner(Options{}).Feed(c.in)
		if (c.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), c.want) {
			t.Errorf("% x...: %v, want %q", c.in[:3], err, c.want)
		}
		if c.want != "" {
			if _, derr := DecodeBytes(c.in, Options{}); derr == nil {
				t.Errorf("% x...: the decoder accepts what the scanner refused", c.in[:3])
			}
		}
	}
	// Frames are walked header to header: garbage is caught at the first
	// frame it starts, or right after the last one.
	frame := func(body ...byte) []byte {
		return append(append([]byte{opFrame}, u64le(uint64(len(body)))...), body...)
	}
	good := append([]byte{opProto, 4}, frame(opEmptyDict, opMemoize, opMark, opShortBinunicode, 1, 'k', opNone, opSetitems)...)
	for _, c := range []struct {
		name string
		in   []byte
		want string
	}{
		{"zeros after a frame", append(append([]byte(nil), good...), 0, 0, 0, 0), "offset 19: opcode 0x00"},
		{"a frame of zeros", append(append([]byte(nil), good...), frame(0, 0, 0, 0)...), "offset 28: opcode 0x00"},
		{"a valid pickle, then zeros", append(append([]byte{opProto, 4}, frame(append(append([]byte(nil), good[11:]...), opStop)...)...), 0, 0), ""},
		// The decoder stops at a STOP anywhere in a frame: what follows it,
		// in the frame and after it, is not the pickle's (found by fuzzing).
		{"a STOP inside a frame, then garbage", append(append([]byte{opProto, 4}, frame(append(append([]byte(nil), good[11:]...), opStop, 0xc3, 0xc3)...)...), 0xc3), ""},
		// ... and a STOP in any frame walked over, whatever follows it.
		{"a STOP inside a frame, then a frame of garbage", append(append([]byte{opProto, 4}, frame(append(append([]byte(nil), good[11:]...), opStop)...)...), frame(0x37, 0x37)...), ""},
		{"a STOP inside a frame, a frame, then garbage", append(append(append([]byte{opProto, 4}, frame(append(append([]byte(nil), good[11:]...), opStop)...)...), good[2:]...), 0x37), ""},
		// The decoder does not hold opcodes to frames: one may run over a
		// frame's end, and the scanner then goes on opcode by opcode.
		{"an opcode over a frame's end", append(append([]byte{opProto, 4}, frame(opShortBinunicode, 3, 0x37)...), 0x37, 0x37, opStop), ""},
		{"an opcode over a frame's end, the rest to come", append(append([]byte{opProto, 4}, frame(opShortBinunicode, 3, 0x37)...), 0x37, 0x37), ""},
		{"an opcode over a frame's end, then garbage", append(append([]byte{opProto, 4}, frame(opShortBinunicode, 3, 0x37)...), 0x37, 0x37, 0x37), "offset 16: opcode 0x37"},
		{"no STOP, a frame, then garbage", append(append(append([]byte{opProto, 4}, good[2:]...), good[2:]...), 0x37), "offset 36: opcode 0x37"},
	} {
		sc := NewScanner(Options{})
		err := sc.Feed(c.in)
		if (c.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
		if _, derr := DecodeBytes(c.in, Options{}); err != nil && derr == nil {
			t.Errorf("%s: the decoder accepts what the scanner refused", c.name)
		}
	}
	// Bytes after STOP are not part of the pickle.
	sc := NewScanner(Options{})
	if err := sc.Feed([]byte{opProto, 4, opNone, opStop, 0, 0, 0}); err != nil || !sc.Done() {
		t.Errorf("after STOP: %v, done %v", err, sc.Done())
	}
}

// TestMaxHeldPerByte: a pickle of 2M memoized empty lists in a list (2
// bytes each, about 100 bytes of values each) is refused once the values
// pass 16 bytes per byte of input beyond the slack, and the count is what
// its heap costs: within 2x of the measured heap growth.
func TestMaxHeldPerByte(t *testing.T) {
	const n = 2 << 20
	in := []byte{opProto, 4, opEmptyList, opMark}
	for i := 0; i < n; i++ {
		in = append(in, opEmptyList, opMemoize)
	}
	in = append(in, opAppends, opStop)
	heldWithinHeap(t, in) // no bound: decoded
	_, err := DecodeBytes(in, Options{MaxHeldPerByte: 16})
	var pe *Error
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), "more than 16 bytes a byte") || pe.Offset > 3<<20 {
		t.Fatalf("err = %v", err)
	}
}

// TestHeldCountsEveryConstructor: the opcodes that make a Global or an
// Object outside the container opcodes (EXT1, BINPERSID, PERSID,
// STACK_GLOBAL, GLOBAL, INST) are charged to held too: for a pickle of
// 1M of each kept alive in a list, held is within 2x of the heap the
// decoded values take.
func TestHeldCountsEveryConstructor(t *testing.T) {
	const n = 1 << 20
	line := func(s string) []byte { return append([]byte(s), '\n') }
	cases := map[string]struct {
		prefix, item []byte
	}{
		"EXT1":         {nil, []byte{opExt1, 200}},
		"BINPERSID":    {nil, []byte{opNone, opBinpersid}},
		"PERSID":       {nil, append([]byte{opPersid}, line("a-persistent-id-of-some-length")...)},
		"STACK_GLOBAL": {[]byte{opShortBinunicode, 5, 't', 'o', 'r', 'c', 'h', opMemoize, opShortBinunicode, 4, 'S', 'i', 'z', 'e', opMemoize, opPop, opPop}, []byte{opBinget, 0, opBinget, 1, opStackGlobal}},
		"GLOBAL":       {nil, append(append([]byte{opGlobal}, line("collections")...), line("OrderedDict")...)},
		"INST":         {nil, append(append([]byte{opMark, opNone, opInst}, line("collections")...), line("OrderedDict")...)},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			in := append([]byte{opProto, 4, opEmptyList}, c.prefix...)
			in = append(in, opMark)
			for i := 0; i < n; i++ {
				in = append(in, c.item...)
			}
			in = append(in, opAppends, opStop)
			heldWithinHeap(t, in)
		})
	}
}

// heldWithinHeap decodes in without bounds and holds the decoder's held
// count to within 2x of the heap its values take.
func heldWithinHeap(t *testing.T, in []byte) {
	t.Helper()
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	d := newDecoder(nil, Options{})
	d.buf, d.eof = in, true
	if _, err := d.run(); err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	heap := int64(after.HeapAlloc - before.HeapAlloc)
	if d.held < heap/2 || d.held > 2*heap {
		t.Errorf("held %d MiB, heap grew %d MiB", d.held>>20, heap>>20)
	}
	runtime.KeepAlive(d)
}
