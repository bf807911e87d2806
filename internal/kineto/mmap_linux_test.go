package kineto

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadMappedCutShort: a mapped file cut short while it is read faults
// on the lost pages; that must end in an error, not a crash.
func TestReadMappedCutShort(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	b.WriteString(`{"traceEvents": [`)
	for i := 0; b.Len() < 4<<20; i++ {
		if i > 0 {
			b.WriteString(",\n  ")
		}
		b.WriteString(oneOp)
	}
	b.WriteString("]}")
	p := filepath.Join(t.TempDir(), "t.json")
	if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	data, unmap, ok := mapFile(p)
	if !ok {
		t.Fatal("not mapped")
	}
	defer unmap()
	if err := os.Truncate(p, 64<<10); err != nil {
		t.Fatal(err)
	}
	_, err := readBytes(context.Background(), data, Options{ChunkBytes: 1 << 16})
	if !errors.Is(err, errFileChanged) {
		t.Fatalf("err %v, want %v", err, errFileChanged)
	}
	if !strings.Contains(err.Error(), "changed") {
		t.Fatal(err)
	}
}
