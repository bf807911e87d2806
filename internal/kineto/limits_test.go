package kineto

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
)

func readString(t *testing.T, s string) (*Trace, error) {
	t.Helper()
	return Read(context.Background(), strings.NewReader(s), Options{ChunkBytes: 4096, MaxEvent: 1 << 16, Workers: 2})
}

func events(n int, ev func(i int) string) string {
	var b strings.Builder
	b.WriteString(`{"traceEvents": [` + "\n")
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteString(",\n")
		}
		b.WriteString("  " + ev(i))
	}
	b.WriteString("\n]}")
	return b.String()
}

func op(i int) string {
	return fmt.Sprintf(`{"ph": "X", "cat": "cpu_op", "name": "op%d", "pid": 1, "tid": 1, "ts": %d, "dur": 2}`, i, 10*i)
}

// TestOversizeEventSkipped: an event longer than MaxEvent, a string of it
// included, is dropped without being held, and reading goes on at the next
// event.
func TestOversizeEventSkipped(t *testing.T) {
	huge := strings.Repeat("a", 1<<18)
	for _, c := range []struct {
		name string
		ev   string
	}{
		{"long name", `{"ph": "X", "cat": "cpu_op", "name": "` + huge + `", "ts": 1, "dur": 1}`},
		{"long args", `{"ph": "X", "cat": "cpu_op", "name": "x", "ts": 1, "dur": 1, "args": {"Input Dims": [` + strings.Repeat("[1, 2], ", 1<<15) + `[]]}}`},
		{"deep", `{"ph": "X", "cat": "cpu_op", "name": "x", "ts": 1, "dur": 1, "args": {"a": ` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}}`},
	} {
		for _, oneLine := range []bool{false, true} {
			in := events(5, func(i int) string {
				if i == 2 {
					return c.ev
				}
				return op(i)
			})
			if oneLine {
				in = strings.ReplaceAll(strings.ReplaceAll(in, "\n  ", ""), ",\n", ",")
			}
			tr, err := readString(t, in)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			if tr.Events.Len() != 4 || tr.Damage.Dropped != 1 {
				t.Errorf("%s (one line %v): %d events, %d dropped, warnings %q", c.name, oneLine, tr.Events.Len(), tr.Damage.Dropped, tr.Damage.Warnings)
			}
		}
	}
}

// TestHeaderTooDeep: nesting before the events array is refused with the
// offset (go-json would recurse into it).
func TestHeaderTooDeep(t *testing.T) {
	_, err := readString(t, `{"deviceProperties": `+strings.Repeat("[", 100)+strings.Repeat("]", 100)+`, "traceEvents": [`+op(0)+`]}`)
	if err == nil || !strings.Contains(err.Error(), "offset 84: JSON nested deeper than 64 levels before the traceEvents array") {
		t.Fatalf("err = %v", err)
	}
}

// TestInvalidEventsCounted: fields of the wrong type are counted with the
// first; most events invalid is refused.
func TestInvalidEventsCounted(t *testing.T) {
	tr, err := readString(t, events(10, func(i int) string {
		switch i {
		case 3:
			return `{"ph": "X", "cat": "cpu_op", "name": "a", "ts": "soon", "dur": 2}`
		case 5:
			return `{"ph": "X", "cat": "cpu_op", "name": "b", "ts": 50, "dur": -7}`
		case 7:
			return `{"ph": "i", "name": "[memory]", "ts": 70, "args": {"Bytes": "lots"}}`
		}
		return op(i)
	}))
	if err != nil {
		t.Fatal(err)
	}
	d := tr.Damage
	if d.Invalid != 3 || !strings.HasSuffix(d.InvalidFirst, `: ts is "soon", not a number`) {
		t.Fatalf("invalid %d, first %q", d.Invalid, d.InvalidFirst)
	}
	var warned bool
	for _, w := range d.Warnings {
		warned = warned || strings.Contains(w, "3 events had a field of the wrong type")
	}
	if !warned {
		t.Errorf("no warning: %q", d.Warnings)
	}
	_, err = readString(t, events(10, func(i int) string {
		if i%3 != 0 {
			return fmt.Sprintf(`{"ph": "X", "cat": "cpu_op", "name": "a", "ts": %d, "dur": "long"}`, i)
		}
		return op(i)
	}))
	if err == nil || !strings.Contains(err.Error(), "6 of 10 events are invalid (first: offset ") || !strings.Contains(err.Error(), `dur is "long", not a number`) {
		t.Fatalf("mostly invalid: %v", err)
	}
}

// TestBOM: a UTF-8 byte order mark before the document is accepted (as
// for JSON snapshots).
func TestBOM(t *testing.T) {
	tr, err := Read(context.Background(), bytes.NewReader(append([]byte("\ufeff"), events(3, op)...)), Options{})
	if err != nil || tr.Events.Len() != 3 {
		t.Fatalf("%v", err)
	}
}
