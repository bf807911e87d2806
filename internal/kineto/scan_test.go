package kineto

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	json "github.com/goccy/go-json"

	"github.com/ptscope/ptscope/internal/input"
	"github.com/ptscope/ptscope/internal/testfixture"
)

// scanAgrees checks scanEvent against go-json's decode of the same bytes
// and view: when scanEvent decodes an event, go-json must decode it too,
// into the same event and the same text of the fields check quotes. It
// returns whether scanEvent decoded it. st and ev carry what the previous
// event left, as in decodeBatch.
func scanAgrees(t testing.TB, data []byte, ev *rawEvent, st *scanState) bool {
	t.Helper()
	var raw rawRefs
	if !scanEvent(data, ev, &raw, st) {
		st.all()
		return false
	}
	var w wireEvent
	if err := json.Unmarshal(data, &w); err != nil {
		t.Fatalf("scanEvent decoded %q, go-json refuses it: %v", data, err)
	}
	var g rawEvent
	w.view(&g)
	if d := valueDiff(reflect.ValueOf(*ev), reflect.ValueOf(g), "event"); d != "" {
		t.Fatalf("%q: %s", data, d)
	}
	graw := rawRefs{ts: w.Ts, dur: w.Dur, memBytes: w.Args.MemBytes}
	if d := valueDiff(reflect.ValueOf(raw), reflect.ValueOf(graw), "raw"); d != "" {
		t.Fatalf("%q: %s", data, d)
	}
	return true
}

// valueDiff names the first field whose value differs between a and b
// (nil and empty slices are equal, NaN equals NaN).
func valueDiff(a, b reflect.Value, path string) string {
	switch a.Kind() {
	case reflect.Struct:
		for i := 0; i < a.NumField(); i++ {
			if d := valueDiff(a.Field(i), b.Field(i), path+"."+a.Type().Field(i).Name); d != "" {
				return d
			}
		}
		return ""
	case reflect.Slice:
		if a.Len() != b.Len() {
			return fmt.Sprintf("%s: %d elements, go-json %d", path, a.Len(), b.Len())
		}
		for i := 0; i < a.Len(); i++ {
			if d := valueDiff(a.Index(i), b.Index(i), fmt.Sprintf("%s[%d]", path, i)); d != "" {
				return d
			}
		}
		return ""
	case reflect.Float64:
		if x, y := a.Float(), b.Float(); x != y && !(math.IsNaN(x) && math.IsNaN(y)) {
			return fmt.Sprintf("%s: %v, go-json %v", path, x, y)
		}
		return ""
	case reflect.Bool:
		if a.Bool() != b.Bool() {
			return fmt.Sprintf("%s: %v, go-json %v", path, a.Bool(), b.Bool())
		}
		return ""
	case reflect.Int64:
		if a.Int() != b.Int() {
			return fmt.Sprintf("%s: %v, go-json %v", path, a.Int(), b.Int())
		}
		return ""
	case reflect.Uint8:
		if a.Uint() != b.Uint() {
			return fmt.Sprintf("%s: %q, go-json %q", path, byte(a.Uint()), byte(b.Uint()))
		}
		return ""
	}
	return fmt.Sprintf("%s: kind %s not compared", path, a.Kind())
}

func TestScanEvent(t *testing.T) {
	for _, c := range []struct {
		in   string
		scan bool // scanEvent decodes it itself
	}{
		{oneOp, true},
		{`{}`, true},
		{" \n{ } \t", true},
		{`{"ph":"X","ts":1.5e3,"dur":-0.0,"pid":"Spans","tid":"0x1f","id":18446744073709551616,"name":"a\"b\u00e9\\","cat":null}`, true},
		{`{"name": "täst ✓", "args": {"grid": [1, "2", null, 3.5], "block": [], "Input Dims": [[4096, 50257], [], [[1]]], "Input type": ["float", "", "ScalarList"]}}`, true},
		{`{"args": {"Call stack": "a.py(1): f;\nb.py(2): g", "nested": {"x": [true, false, null, {"y": -1E+2}]}, "Bytes": "N/A", "bytes": 5}}`, true},
		{`{"args": null, "ts": 1}`, true},
		{`{"ts": 1, "ts": 2, "args": {"device": 1}, "args": {"stream": 7}, "args": null}`, true},
		{`{"ph": {"a": 1}, "cat": [1], "name": 12, "pid": true, "ts": "12.5"}`, true},
		{"{\"name\": \"\xff\xfe\", \"cat\": \"\xe2\x82\", \"args\": {\"x\": \"\xc0\", \"dtype\": \"\x7f\"}}", true}, // bytes that are not UTF-8 are kept
		{`{"name": "\ud800\u0000\uDFFF", "args": {"labels": "\ud83d\ude00", "": 1}}`, true},
		{`{"args": {"a": 1e999, "b": -0.0e-0, "c": [[[[]]]], "d": {}}, "ts": 1e999, "dur": 123456789012345678901234567890}`, true},
		{`{"External id": 3, "Ts": 5, "NAME": "x"}`, false}, // folded keys: go-json's rules
		{`{"args": {"BYTES": 5}}`, false},
		{`{"args": {"Device": 5}}`, false},
		{`{"p\u0068": "X"}`, false}, // escaped key
		{`{"ｔｓ": 1}`, false},        // key outside ASCII
		{`{"args": "x"}`, false},
		{`{"args": [1]}`, false},
		{`{"ts": N/A}`, false},
		{`{"ts": NaN}`, false},
		{`{"ts": 01}`, false},
		{`{"ts": 1.}`, false},
		{`{"ts": .5}`, false},
		{`{"ts": 1e}`, false},
		{`{"ts": +1}`, false},
		{`{"name": "a` + "\t" + `b"}`, false}, // raw control character
		{`{"name": "a\xb"}`, false},
		{`{"name": "a\u12"}`, false},
		{`{"ts": 1,}`, false},
		{`{"ts": 1 "dur": 2}`, false},
		{`{"ts" 1}`, false},
		{`{"ts": 1}}`, false},
		{`{"ts": 1} x`, false},
		{`{"args": {"a": [1,]}}`, false},
		{`{"args": {"a": tru}}`, false},
		{`{"a": nul}`, false},
		{`{"name": "unclosed}`, false},
		{`{"ph": "X", "args": {"a": [` + string(bytes.Repeat([]byte("["), maxDepth)) + `]}}`, false},
	} {
		var ev rawEvent
		var st scanState
		got := scanAgrees(t, []byte(c.in), &ev, &st)
		if got != c.scan {
			t.Errorf("scanEvent(%q) = %v, want %v", c.in, got, c.scan)
		}
	}
}

// TestScanTraces decodes every event of the real traces with scanEvent
// (none is left to go-json) into what go-json decodes, and reads each trace
// into the same model both ways.
func TestScanTraces(t *testing.T) {
	t.Parallel()
	root := testfixture.Root(t)
	paths, _ := filepath.Glob(filepath.Join(root, "testdata", "traces", "*", "*.json*"))
	more, _ := filepath.Glob(filepath.Join(root, "testdata", "traces", "*.json*"))
	paths = append(paths, more...)
	for _, name := range []string{tinyStackTrace, gpt2Trace} {
		if p := fixturePath(t, name); p != "" {
			paths = append(paths, p)
		}
	}
	if len(paths) < 5 {
		t.Fatalf("%d traces found", len(paths))
	}
	for _, p := range paths {
		r, err := input.NewSource(0, nil, nil).Open(p)
		if err != nil {
			t.Fatal(err)
		}
		sc, err := NewScanner(r, Options{})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		var e rawEvent
		var st scanState
		var raw rawRefs
		err = sc.Each(context.Background(), func(ev []byte) error {
			n++
			// field by field for the first events; the whole traces are
			// compared below
			ok := n <= 5000 && scanAgrees(t, ev, &e, &st) || n > 5000 && scanEvent(ev, &e, &raw, &st)
			if !ok {
				return fmt.Errorf("event %d left to go-json: %.200s", n, ev)
			}
			return nil
		})
		r.Close()
		if err != nil || n < 100 {
			t.Fatalf("%s: %d events: %v", p, n, err)
		}
		fast, err := ReadFile(context.Background(), p, Options{})
		if err != nil {
			t.Fatal(err)
		}
		ref, err := ReadFile(context.Background(), p, Options{stdJSONOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(fast, ref) {
			t.Errorf("%s: the trace read with scanEvent differs from go-json's", p)
		}
	}
}

// FuzzScanEvent checks scanEvent against go-json on one event.
func FuzzScanEvent(f *testing.F) {
	for _, s := range []string{
		oneOp,
		`{"ph":"X","ts":1.5e3,"dur":-0.0,"pid":"Spans","tid":"0x1f","id":18446744073709551616,"name":"a\"b\u00e9\\","cat":null}`,
		`{"name": "täst", "args": {"grid": [1, "2", null, 3.5], "Input Dims": [[4096, 50257], []], "Bytes": "N/A"}}`,
		`{"ts": 1, "ts": 2, "args": {"device": 1}, "args": {"stream": 7}, "args": null, "Ts": 3}`,
		`{"ph": "i", "name": "[memory]", "args": {"Device Type": 1, "Addr": 94, "Bytes": -512, "Total Allocated": 1e3}}`,
		`{"ph": "M", "name": "thread_name", "pid": 1, "tid": "t", "args": {"name": "x\ty", "sort_index": 3}}`,
	} {
		f.Add([]byte(s))
	}
	// the first events of the real with_stack trace, each kind once
	if p := fixturePath(f, tinyStackTrace); p != "" {
		if head, err := os.ReadFile(p); err == nil {
			s := &splitter{data: head, chunk: len(head), maxEvent: 16 << 20, maxHeader: 1 << 20, warn: func(string) {}}
			if s.start() == nil {
				if bt := s.cut(); bt != nil {
					seen := map[string]bool{}
					for k := range bt.starts {
						ev := bt.buf[bt.starts[k]:bt.ends[k]]
						var h rawEvent
						var raw rawRefs
						var st scanState
						if scanEvent(ev, &h, &raw, &st) && !seen[string(h.Ph.b)+string(h.Cat.b)] {
							seen[string(h.Ph.b)+string(h.Cat.b)] = true
							f.Add(ev)
						}
					}
				}
			}
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := ParseHead(data)
		hg, gerr := parseHeadStdJSON(data)
		if h != hg || fmt.Sprint(err) != fmt.Sprint(gerr) {
			t.Fatalf("ParseHead(%q) = %+v, %v; go-json %+v, %v", data, h, err, hg, gerr)
		}
		// twice over the same event: the second call clears what the
		// first left, and the events end the same
		var ev rawEvent
		var st scanState
		if scanAgrees(t, data, &ev, &st) {
			scanAgrees(t, []byte(oneOp), &ev, &st)
		}
		scanAgrees(t, data, &ev, &st)
	})
}

// lookup (for the tests) returns the index of the field that the n-byte ASCII key at
// data[i] names exactly, else -1; folded reports a key that names a field
// only by case folding.
func (t *keyTable) lookup(data []byte, i, n int) (k int, folded bool) {
	w := keyWord(data, i, n)
	if k := t.exact(data, i, n, w, keyHash(w, n)); k >= 0 {
		return k, false
	}
	return -1, t.folds(data[i : i+n])
}

// TestKeyTables checks the tables against the go-json field tags they
// stand for, in order, and the folding they detect.
func TestKeyTables(t *testing.T) {
	for _, c := range []struct {
		typ reflect.Type
		t   *keyTable
	}{{reflect.TypeOf(wireEvent{}), eventKeys}, {reflect.TypeOf(wireArgs{}), argKeys}} {
		if c.typ.NumField() != len(c.t.names) {
			t.Fatalf("%s: %d fields, %d keys", c.typ, c.typ.NumField(), len(c.t.names))
		}
		for i := 0; i < c.typ.NumField(); i++ {
			tag := c.typ.Field(i).Tag.Get("json")
			if c.t.names[i] != tag {
				t.Errorf("%s field %d: key %q, tag %q", c.typ, i, c.t.names[i], tag)
			}
			// alone at the end of the input too (keyWord's short load)
			for _, in := range []string{`"` + tag + `": 1`, tag} {
				start := 0
				if in[0] == '"' {
					start = 1
				}
				if k, folded := c.t.lookup([]byte(in), start, len(tag)); k != i || folded {
					t.Errorf("lookup(%q) = %d, %v; want %d", tag, k, folded, i)
				}
			}
			up := strings.ToUpper(tag)
			if up != tag {
				if k, folded := c.t.lookup([]byte(up), 0, len(up)); k >= 0 || !folded {
					t.Errorf("lookup(%q) = %d, %v; want folded", up, k, folded)
				}
			}
		}
		for _, key := range []string{"", "x", "Ev Idx", "Python parent id", "Record function id", "Call stack", "args2"} {
			if k, folded := c.t.lookup([]byte(key), 0, len(key)); k >= 0 || folded {
				t.Errorf("lookup(%q) = %d, %v", key, k, folded)
			}
		}
	}
	for k := range argCount {
		var a rawArgs
		isNum := numArgs&(1<<k) != 0
		v := "7"
		if k == argGrid || k == argBlock {
			v = "[7]"
		}
		a.set(k, []byte(v))
		b := a
		if isNum {
			b = rawArgs{}
			b.setNum(k, parseNum([]byte("7")))
		}
		if reflect.DeepEqual(a, rawArgs{}) || !reflect.DeepEqual(a, b) {
			t.Errorf("arg %d (%s): set and setNum disagree", k, argKeys.names[k])
		}
		if f := reflect.TypeOf(a).Field(k); (f.Type == reflect.TypeOf(Num{})) != isNum || f.Tag.Get("json") != argKeys.names[k] {
			t.Errorf("arg %d: field %s %s", k, f.Name, f.Type)
		}
	}
}

// FuzzSkipStrPlain checks the word-at-a-time searches against byte loops.
func FuzzSkipStrPlain(f *testing.F) {
	f.Add([]byte(`abcdefghijklmnop"q`), 0)
	f.Add([]byte("é\x01abcdefgh\\"), 1)
	f.Add([]byte("Python parent id\x7f\x80\"x"), 2)
	f.Fuzz(func(t *testing.T, data []byte, i int) {
		if i < 0 || i > len(data) {
			return
		}
		want := i
		for want < len(data) && strPlain[data[want]] {
			want++
		}
		if got := skipStrPlain(data, i); got != want {
			t.Fatalf("skipStrPlain(%q, %d) = %d, want %d", data, i, got, want)
		}
		want = i
		for want < len(data) && keyPlain[data[want]] {
			want++
		}
		if got := skipKeyPlain(data, i); got != want {
			t.Fatalf("skipKeyPlain(%q, %d) = %d, want %d", data, i, got, want)
		}
		want = i
		for want < len(data) && data[want] != '"' {
			want++
		}
		if got := findQuote(data, i); got != want {
			t.Fatalf("findQuote(%q, %d) = %d, want %d", data, i, got, want)
		}
	})
}
