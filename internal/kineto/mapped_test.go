package kineto

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestReadBytesMatchesRead: cutting a trace held whole (a mapped file) must
// give exactly what reading it does, damage and warnings included, at
// every chunk size.
func TestReadBytesMatchesRead(t *testing.T) {
	t.Parallel()
	inputs := map[string][]byte{
		"gpt2":       readGz(t, fixture(t, gpt2Trace)),
		"bare array": []byte("[" + oneOp + "," + oneOp + "]"),
		"truncated":  []byte(`{"traceEvents": [` + oneOp + "," + oneOp[:40]),
		"damaged":    []byte(`{"traceEvents": [` + oneOp + `, x {"ph": "X", "name": "a` + "\n" + `", "ts": 1}, ` + oneOp + `], "traceName": "t"}`),
		"tail":       []byte(`{"schemaVersion": 1, "traceEvents": [` + oneOp + `], "distributedInfo": {"rank": 3}, "traceName": "` + strings.Repeat("n", 5000) + `"}`),
	}
	if b, err := os.ReadFile(fixture(t, tinyStackTrace)); err == nil {
		inputs["with_stack"] = b
	}
	for name, raw := range inputs {
		chunks := []int{0, 1, 7, 4096}
		if len(raw) > 1<<20 {
			chunks = []int{0, 4096, 100000} // a byte at a time takes minutes
		}
		for _, chunk := range chunks {
			opt := Options{ChunkBytes: chunk, Workers: 3}
			want, werr := Read(context.Background(), bytes.NewReader(raw), opt)
			got, gerr := readBytes(context.Background(), raw, opt)
			if (werr == nil) != (gerr == nil) || werr != nil && werr.Error() != gerr.Error() {
				t.Fatalf("%s, chunk %d: error %v, want %v", name, chunk, gerr, werr)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%s, chunk %d: traces differ", name, chunk)
			}
			if name == "gpt2" && (got == nil || got.Events.Len() < 1000) {
				t.Fatalf("gpt2: %v events", got)
			}
		}
	}
}

// TestReadFileMapped: ReadFile on a plain file (mapped on Linux) gives what
// Read gives on its bytes.
func TestReadFileMapped(t *testing.T) {
	t.Parallel()
	raw := readGz(t, fixture(t, gpt2Trace))
	p := filepath.Join(t.TempDir(), "t.json")
	if err := os.WriteFile(p, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	want, err := Read(context.Background(), bytes.NewReader(raw), Options{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := ReadFile(context.Background(), p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want.Path = p
	if !reflect.DeepEqual(got, want) {
		t.Fatal("ReadFile differs from Read")
	}
	if got.Bytes != int64(len(raw)) {
		t.Errorf("Bytes %d, want %d", got.Bytes, len(raw))
	}
}
