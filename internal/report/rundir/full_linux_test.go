//go:build linux

package rundir

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestWriteFullDisk: on a full file system Write fails and leaves nothing
// (issue 28: a full disk left README.md, report.json and one chart, with
// latest pointing at them). It needs to mount a tmpfs (root); elsewhere it
// is skipped.
func TestWriteFullDisk(t *testing.T) {
	out := t.TempDir()
	if err := syscall.Mount("tmpfs", out, "tmpfs", 0, "size=64k"); err != nil {
		t.Skipf("cannot mount a small tmpfs here: %v", err)
	}
	defer func() {
		if err := syscall.Unmount(out, 0); err != nil {
			t.Errorf("unmount: %v", err)
		}
	}()
	small := []File{{Name: "a.txt", Data: []byte("ok\n")}}
	first, err := Write(context.Background(), out, "first", small, nil)
	if err != nil {
		t.Fatal(err)
	}
	big := []File{{Name: "report.txt", Data: []byte("text")}, {Name: "chart.svg", Data: bytes.Repeat([]byte("x"), 1<<20)}}
	if dir, err := Write(context.Background(), out, "second", big, nil); err == nil || dir != "" {
		t.Fatalf("full disk: %q, %v", dir, err)
	}
	ents, _ := os.ReadDir(out)
	if len(ents) != 2 {
		t.Errorf("output folder holds %d entries, want the first run folder and latest", len(ents))
	}
	if l, _ := os.Readlink(filepath.Join(out, LatestName)); l != filepath.Base(first) {
		t.Errorf("latest -> %q, want %q", l, filepath.Base(first))
	}
}
