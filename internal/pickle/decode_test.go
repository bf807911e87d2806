package pickle

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite golden files")

func load(t *testing.T, name string) Value {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	v, err := Decode(bytes.NewReader(b), Options{})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	// The in-memory path must agree with the streaming one.
	v2, err := DecodeBytes(b, Options{})
	if err != nil || v2.String() != v.String() {
		t.Fatalf("%s: DecodeBytes differs: %v", name, err)
	}
	return v
}

func TestNumbersAllProtocols(t *testing.T) {
	two63, _ := new(big.Int).SetString("9223372036854775808", 10)
	two70 := new(big.Int).Lsh(big.NewInt(1), 70)
	for p := 0; p <= 5; p++ {
		v := load(t, fmt.Sprintf("nums_p%d.pickle", p))
		items := v.List().Items
		ints := []int64{0, 1, -1, 255, 256, 65535, 65536, 1<<31 - 1, -1 << 31, 1<<47 + 5, 1<<63 - 1}
		for i, want := range ints {
			if got, ok := items[i].Int(); !ok || got != want {
				t.Errorf("p%d item %d = %v, want %d", p, i, items[i], want)
			}
		}
		if u, ok := items[11].Uint(); !ok || u != 1<<63 {
			t.Errorf("p%d 2^63 = %v", p, items[11])
		}
		if b, _ := items[11].BigInt(); b.Cmp(two63) != 0 {
			t.Errorf("p%d 2^63 as big = %v", p, b)
		}
		if u, ok := items[12].Uint(); !ok || u != 1<<64-1 {
			t.Errorf("p%d 2^64-1 = %v", p, items[12])
		}
		if b, ok := items[13].BigInt(); !ok || b.Cmp(two70) != 0 {
			t.Errorf("p%d 2^70 = %v", p, items[13])
		}
		if got, _ := items[14].Int(); got != -1<<40 {
			t.Errorf("p%d -2^40 = %v", p, items[14])
		}
		if got, ok := items[15].Int(); !ok || got != -1<<63 {
			t.Errorf("p%d -2^63 = %v", p, items[15])
		}
		if items[16].Kind() != KindBigInt || items[16].String() != "-9223372036854775809" {
			t.Errorf("p%d -2^63-1 = %v", p, items[16])
		}
		if f, _ := items[17].Float(); f != 1.5 {
			t.Errorf("p%d float = %v", p, items[17])
		}
		if f, _ := items[18].Float(); f != -0.25 {
			t.Errorf("p%d float = %v", p, items[18])
		}
		if b, ok := items[19].Bool(); !ok || !b || items[19].Kind() != KindBool {
			t.Errorf("p%d True = %v", p, items[19])
		}
		if b, ok := items[20].Bool(); !ok || b {
			t.Errorf("p%d False = %v", p, items[20])
		}
		if !items[21].IsNone() {
			t.Errorf("p%d None = %v", p, items[21])
		}
	}
}

func TestSharedStaysShared(t *testing.T) {
	for p := 0; p <= 5; p++ {
		v := load(t, fmt.Sprintf("shared_p%d.pickle", p))
		d := v.Dict()
		a, _ := d.Get("a")
		b, _ := d.Get("b")
		tt, _ := d.Get("t")
		bl := b.List().Items
		if a.List() != bl[0].List() || a.List() != bl[1].List() || a.List() != tt.List().Items[0].List() {
			t.Errorf("p%d: shared list was copied", p)
		}
		if len(a.List().Items) != 2 {
			t.Errorf("p%d: shared list lost items: %v", p, a)
		}
	}
}

func TestRecursive(t *testing.T) {
	for p := 0; p <= 5; p++ {
		v := load(t, fmt.Sprintf("recursive_p%d.pickle", p))
		l := v.List()
		if len(l.Items) != 1 || l.Items[0].List() != l {
			t.Errorf("p%d: recursive list not recursive", p)
		}
		if s := v.String(); len(s) > 1000 {
			t.Errorf("p%d: String of a recursive list is unbounded", p)
		}
	}
}

func TestStringsAndContainers(t *testing.T) {
	for p := 0; p <= 5; p++ {
		v := load(t, fmt.Sprintf("strings_p%d.pickle", p))
		it := v.List().Items
		if s, _ := it[0].Str(); s != "héllo ✓" {
			t.Errorf("p%d unicode = %q", p, s)
		}
		if p >= 3 {
			if b, ok := it[1].Bytes(); !ok || !bytes.Equal(b, []byte{0, 0xff}) {
				t.Errorf("p%d bytes = %v", p, it[1])
			}
		}
		want := 10
		if p == 0 || p == 4 {
			want = 70000
		}
		if s, _ := it[2].Str(); len(s) != want || strings.Trim(s, "x") != "" {
			t.Errorf("p%d long string has %d bytes", p, len(s))
		}
		c := load(t, fmt.Sprintf("containers_p%d.pickle", p)).Dict()
		if c.Len() != 4 {
			t.Fatalf("p%d: containers has %d keys", p, c.Len())
		}
		if c.Keys[0].Kind() != KindTuple || c.Vals[0].Kind() != KindSet || len(c.Vals[0].List().Items) != 2 {
			t.Errorf("p%d: tuple key / set value = %v: %v", p, c.Keys[0], c.Vals[0])
		}
		big, _ := c.Get("big")
		if n := len(big.List().Items); n != 2500 {
			t.Errorf("p%d: list of 2500 has %d items (APPENDS batches)", p, n)
		}
		if last, _ := big.List().Items[2499].Int(); last != 2499 {
			t.Errorf("p%d: last item %d", p, last)
		}
	}
}

// A pickle that would run os.system when loaded by Python only yields an
// inert record here.
func TestEvilReduceIsInert(t *testing.T) {
	for _, name := range []string{"evil_p4.pickle", "evil_p0.pickle"} {
		v := load(t, name)
		s := v.String()
		if !strings.Contains(s, "system") || !strings.Contains(s, "echo pwned") {
			t.Errorf("%s: expected an inert record of the call, got %s", name, s)
		}
		if _, err := os.Stat("/tmp/ptscope_pwned"); err == nil {
			t.Fatal("the evil pickle ran a command")
		}
	}
}

func TestTorchScriptUnwrap(t *testing.T) {
	v := load(t, "torchscript_p2.pickle")
	d := v.Dict()
	if d == nil {
		t.Fatalf("restore_type_tag not unwrapped: %v", v)
	}
	a, _ := d.Get("a")
	if a.Kind() != KindList || len(a.List().Items) != 2 {
		t.Errorf("build_intlist not unwrapped: %v", a)
	}
	b, _ := d.Get("b")
	if u, ok := b.Uint(); !ok || u != 1<<63 {
		t.Errorf("8-byte LONG1 with the top bit set = %v", b)
	}
	if n, _ := b.Int(); n != -1<<63 && b.Kind() == KindInt {
		t.Errorf("int64 view = %d", n)
	}
}

func TestBytearrayP5(t *testing.T) {
	v := load(t, "bytearray_p5.pickle")
	if s := v.String(); !strings.Contains(s, "abc") {
		t.Errorf("bytearray = %s", s)
	}
}

// Hooks replace containers on the stack and in the memo.
func TestHooksReplaceEverywhere(t *testing.T) {
	b, _ := os.ReadFile(filepath.Join("testdata", "shared_p4.pickle"))
	var lists int
	v, err := Decode(bytes.NewReader(b), Options{OnList: func(l *List) (Value, bool) {
		if len(l.Items) == 2 && l.Items[1].Kind() == KindString {
			lists++
			return Handle(42), true
		}
		return Value{}, false
	}})
	if err != nil {
		t.Fatal(err)
	}
	d := v.Dict()
	a, _ := d.Get("a")
	bb, _ := d.Get("b")
	if h, ok := a.Handle(); !ok || h != 42 || lists != 1 {
		t.Fatalf("a = %v (hook ran %d times)", a, lists)
	}
	for _, it := range bb.List().Items {
		if h, ok := it.Handle(); !ok || h != 42 {
			t.Errorf("memo reference not replaced: %v", it)
		}
	}
}

func TestErrors(t *testing.T) {
	good, _ := os.ReadFile(filepath.Join("testdata", "shared_p4.pickle"))
	cases := map[string][]byte{
		"empty":     {},
		"truncated": good[:len(good)/2],
		"no stop":   good[:len(good)-1],
		"bad op":    {0x80, 0x04, 0xff},
		"proto 9":   {0x80, 0x09, '.'},
		"underflow": {0x80, 0x04, 's', '.'},
		"bad memo":  {0x80, 0x04, 'h', 0x05, '.'},
		"huge str":  {0x80, 0x04, 0x8d, 0xff, 0xff, 0xff, 0xff, 0x0f, 0, 0, 0},
		"huge memo": {0x80, 0x04, 'N', 'r', 0xff, 0xff, 0xff, 0x7f, '.'},
		"text json": []byte(`{"a": 1}`),
	}
	for name, in := range cases {
		_, err := Decode(bytes.NewReader(in), Options{})
		var pe *Error
		if err == nil || !errors.As(err, &pe) {
			t.Errorf("%s: err = %v, want *Error", name, err)
			continue
		}
		if !strings.Contains(err.Error(), "offset") {
			t.Errorf("%s: error without offset: %v", name, err)
		}
	}
	_, err := Decode(bytes.NewReader(good[:40]), Options{})
	if err == nil || !strings.Contains(err.Error(), "input ends") {
		t.Errorf("truncation message: %v", err)
	}
}

func TestGoldenStrings(t *testing.T) {
	names, _ := filepath.Glob("testdata/*_p4.pickle")
	var out strings.Builder
	for _, n := range names {
		v := load(t, filepath.Base(n))
		s := v.String()
		if len(s) > 300 {
			s = s[:300] + "..."
		}
		fmt.Fprintf(&out, "%s: %s\n", filepath.Base(n), s)
	}
	golden := filepath.Join("testdata", "p4.golden")
	if *update {
		os.WriteFile(golden, []byte(out.String()), 0o644)
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if out.String() != string(want) {
		t.Errorf("golden mismatch (run with -update after checking):\n%s", out.String())
	}
}

// Protocol recognises what Python's pickle.dumps writes for a dict or a
// list at every protocol, and nothing that opens JSON or text.
func TestProtocol(t *testing.T) {
	for _, c := range []struct {
		head string
		p    int
		ok   bool
	}{
		{"(dp0\nVsegments", 0, true},
		{"(lp0\n(dp1\n", 0, true},
		{"}q\x00(X\x08\x00\x00\x00", 1, true},
		{"]q\x00(}q\x01(", 1, true},
		{"\x80\x02}q\x00", 2, true},
		{"\x80\x05\x95", 5, true},
		{"\x80\x06", 0, false},
		{"(", 0, false},
		{"{\"segments\"", 0, false},
		{"[{\"ph\"", 0, false},
		{"(x", 0, false},
		{"", 0, false},
	} {
		p, ok := Protocol([]byte(c.head))
		if p != c.p || ok != c.ok {
			t.Errorf("%q: %d %v, want %d %v", c.head, p, ok, c.p, c.ok)
		}
	}
	// the package's own test pickles of every protocol
	for p := 0; p <= 5; p++ {
		b, err := os.ReadFile(filepath.Join("testdata", "containers_p"+strconv.Itoa(p)+".pickle"))
		if err != nil {
			t.Fatal(err)
		}
		if got, ok := Protocol(b); !ok || got != p {
			t.Errorf("containers_p%d.pickle: %d %v", p, got, ok)
		}
	}
}

// Hooks see whole dicts at every protocol: protocol 0 fills a dict one
// SETITEM at a time, so its containers are offered once decoded. Each dict
// a recording hook is offered is one of the dicts of the decoded value
// (never a partial one), and every one of them is offered.
func TestHooksSeeWholeDicts(t *testing.T) {
	for _, name := range []string{"containers", "shared", "strings", "nums"} {
		for p := 0; p <= 5; p++ {
			file := fmt.Sprintf("%s_p%d.pickle", name, p)
			whole := map[string]bool{}
			var walk func(v Value, depth int)
			walk = func(v Value, depth int) {
				if depth > 8 {
					return
				}
				if d := v.Dict(); d != nil {
					whole[v.String()] = true
					for _, x := range d.Vals {
						walk(x, depth+1)
					}
				}
				if l := v.List(); l != nil {
					for _, x := range l.Items {
						walk(x, depth+1)
					}
				}
			}
			walk(load(t, file), 0)
			b, err := os.ReadFile(filepath.Join("testdata", file))
			if err != nil {
				t.Fatal(err)
			}
			seen := map[string]bool{}
			_, err = Decode(bytes.NewReader(b), Options{OnDict: func(d *Dict) (Value, bool) {
				s := dictValue(d).String()
				if !whole[s] {
					t.Errorf("%s: offered %s, not a dict of the pickle", file, s)
				}
				seen[s] = true
				return Value{}, false
			}})
			if err != nil || len(seen) != len(whole) {
				t.Errorf("%s: %v; offered %d of %d dicts", file, err, len(seen), len(whole))
			}
		}
	}
}

// TestFormatBounded: a value that holds a list shared 20 ways, 8 levels
// deep (20^8 items when unshared), and one that holds a 10 MB string and a
// 40,000-bit int, print within Format's size, quickly.
func TestFormatBounded(t *testing.T) {
	v := Str("leaf")
	for i := 0; i < 8; i++ {
		items := make([]Value, 20)
		for j := range items {
			items[j] = v
		}
		v = NewList(items...)
	}
	start := time.Now()
	s := NewDict(Str("x"), v).String()
	if len(s) > 4096+64 || time.Since(start) > time.Second {
		t.Errorf("shared list: %d bytes in %v", len(s), time.Since(start))
	}
	if !strings.HasPrefix(s, `{"x": [[[[[[[["leaf", "leaf"`) || !strings.Contains(s, "[...]") {
		t.Errorf("shared list: %.120s", s)
	}
	huge := new(big.Int).Lsh(big.NewInt(1), 40_000)
	s = NewList(Str(strings.Repeat("a", 10<<20)), bigValue(huge)).Format(100)
	if len(s) > 200 || !strings.HasSuffix(s, "...") {
		t.Errorf("long string: %d bytes: %.200s", len(s), s)
	}
	if s := NewList(bigValue(huge)).Format(100); s != "[<int of 40001 bits>]" {
		t.Errorf("big int: %s", s)
	}
}
