package snapshot

import (
	"bytes"
	"io"
	"reflect"
	"strings"
	"testing"
)

// zeros is an endless stream of zero bytes.
type zeros struct{ n int64 }

func (z *zeros) Read(p []byte) (int, error) {
	clear(p)
	z.n += int64(len(p))
	return len(p), nil
}

// TestPickleStreamCheckedAsItArrives: a stream held in memory for the
// parallel decoder is refused where it goes wrong, not after it was read
// to its end (here: never).
func TestPickleStreamCheckedAsItArrives(t *testing.T) {
	valid := []byte{0x80, 4, '}', 0x94, '(', 0x8c, 1, 'k', 'N'}
	for _, c := range []struct {
		name string
		head []byte
		want string
	}{
		{"zeros after the header", []byte{0x80, 4}, "offset 2: opcode 0x00: unknown opcode 0x00"},
		{"zeros after valid opcodes", valid, "offset 9: opcode 0x00: unknown opcode"},
		{"a string too long", []byte{0x80, 4, 0x8d, 0, 0, 0, 0x80, 0, 0, 0, 0}, "offset 2: BINUNICODE8: argument of 2147483648 bytes exceeds the limit"},
	} {
		z := &zeros{}
		_, err := read(io.MultiReader(bytes.NewReader(c.head), z), 0, 2)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
		if z.n > 1<<20 {
			t.Errorf("%s: %d bytes read before the error", c.name, z.n)
		}
	}
	// After STOP nothing more is read: the pickle ends there.
	z := &zeros{}
	pk := []byte{0x80, 4, '}', 0x94, '(', 0x8c, 8, 's', 'e', 'g', 'm', 'e', 'n', 't', 's', ']', 'u', '.'}
	s, err := read(io.MultiReader(bytes.NewReader(pk), z), 0, 2)
	if err != nil || len(s.Segments) != 0 || z.n > 1<<20 {
		t.Fatalf("trailing bytes: %v, %d read", err, z.n)
	}
}

// TestJSONGuard: nesting, long strings and a byte order mark.
func TestJSONGuard(t *testing.T) {
	for _, c := range []struct {
		name, in, want string
	}{
		{"deep arrays", `{"segments": ` + strings.Repeat("[", 70), "offset 76: JSON nested deeper than 64 levels"},
		{"deep objects", `{"device_traces": [[` + strings.Repeat(`{"a": `, 70), "JSON nested deeper than 64 levels"},
		{"long string", `{"segments": [], "x": "` + strings.Repeat("a", maxJSONString+10) + `"}`, "offset 16777239: a string longer than 16777216 bytes exceeds the limit"},
		{"list for a segment", `{"segments": [[1, 2]]}`, "offset 15: segments[0] is a list, expected a dict"},
		{"list for an entry", `{"segments": [], "device_traces": [[[1]]]}`, "device_traces[0][0] is a list, expected a dict"},
		{"scalar for a device trace", `{"segments": [], "device_traces": [7]}`, "device_traces[0] is a int, expected a list"},
	} {
		_, err := Read(strings.NewReader(c.in))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	doc := `{"segments": [{"device": 0, "address": 0, "total_size": 512, "blocks": [{"size": 512, "state": "active_allocated"}]}], "device_traces": [[{"action": "alloc", "addr": 0, "size": 512}]], "other": {"kept": [[[1]]], "out": "x"}}`
	want, err := Read(strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	got, err := Read(strings.NewReader("\ufeff" + doc))
	if err != nil {
		t.Fatalf("BOM: %v", err)
	}
	got.InputBytes = want.InputBytes
	if !reflect.DeepEqual(got, want) || len(got.Segments) != 1 || got.Trace(0).Len() != 1 {
		t.Fatal("a BOM changes the result")
	}
}
