package mapfile

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestMap maps a file with each option and reads back its bytes, also after
// dropping decoded pages (they read back from the page cache).
func TestMap(t *testing.T) {
	want := bytes.Repeat([]byte("ptscope mapfile "), 3<<10) // 48 KiB: several pages
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, want, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, o := range []Options{{}, {Populate: 2}, {Sequential: true}} {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		data, unmap, err := Map(f, len(want), o)
		f.Close()
		if errors.Is(err, ErrUnsupported) {
			t.Skip("files are not mapped on this system")
		}
		if err != nil {
			t.Fatalf("%+v: %v", o, err)
		}
		if !bytes.Equal(data, want) {
			t.Fatalf("%+v: mapped bytes differ", o)
		}
		DropPages(data, 100, len(data)-100)
		if !bytes.Equal(data, want) {
			t.Fatalf("%+v: bytes differ after DropPages", o)
		}
		unmap()
	}
}
