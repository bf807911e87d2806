//go:build linux

package spillmem

import (
	"syscall"
	"testing"
)

// TestFullDiskFallsBack fills a 1 MiB file system with the arena: the
// slices that do not fit must come from the heap, with Err saying why,
// never a SIGBUS on a store into an unallocated page. It needs to mount a
// tmpfs (root); elsewhere it is skipped.
func TestFullDiskFallsBack(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
		t.Skipf("cannot mount a small tmpfs here: %v", err)
	}
	defer func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmount: %v", err)
		}
	}()
	a, err := New(dir, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	a.SetMin(1)
	xs := Make[int64](a, 4<<20) // 32 MiB: does not fit
	for i := range xs {
		xs[i] = int64(i)
	}
	if a.Err() == nil {
		t.Fatalf("no error after placing %d bytes on a 1 MiB file system (arena %d bytes)", len(xs)*8, a.Size())
	}
	if xs[len(xs)-1] != int64(len(xs)-1) {
		t.Fatal("the heap slice lost a value")
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
}
