//go:build linux

package kineto

import (
	"os"
	"syscall"
)

// mapFile maps a regular file read-only for the splitter to cut in place:
// no read syscalls and no copy of the bytes into the heap. It returns ok
// false (the caller reads the file instead) where mapping does not apply:
// not a regular file, empty, or too large to map. The mapping is page
// cache, shared with the kernel, not heap: it does not count against the
// memory budget, and the kernel can drop its pages under pressure.
func mapFile(path string) (data []byte, unmap func(), ok bool) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, false
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() || st.Size() == 0 || st.Size() > 1<<40 {
		return nil, nil, false
	}
	data, err = syscall.Mmap(int(f.Fd()), 0, int(st.Size()), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, false
	}
	// read ahead of the splitter, which goes through the file once, in order
	_ = syscall.Madvise(data, syscall.MADV_SEQUENTIAL)
	return data, func() { _ = syscall.Munmap(data) }, true
}

// dropPages lets the kernel take back the pages of the mapping that lie
// wholly inside data[lo:hi] (decoded already): they read back from the page
// cache if touched again, so this only keeps the resident size down to the
// batches in flight.
func dropPages(data []byte, lo, hi int64) {
	const page = 4096
	lo = (lo + page - 1) &^ (page - 1)
	hi &^= page - 1
	if hi > lo && hi <= int64(len(data)) {
		_ = syscall.Madvise(data[lo:hi], syscall.MADV_DONTNEED)
	}
}
