//go:build linux

package snapshot

import (
	"os"
	"syscall"
)

// mapFile maps a file read-only; unmap releases it. Everything that outlives
// the decoding is copied out of the mapping.
func mapFile(f *os.File, size int) (data []byte, unmap func(), err error) {
	data, err = syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ, syscall.MAP_SHARED|syscall.MAP_POPULATE)
	if err != nil {
		return nil, nil, err
	}
	return data, func() { _ = syscall.Munmap(data) }, nil
}

// dropPages lets the kernel take back the pages of a mapped range that lie
// wholly inside [lo, hi): they read back from the page cache if touched
// again, so this only lowers the resident size.
func dropPages(data []byte, lo, hi int) {
	const page = 4096
	lo = (lo + page - 1) &^ (page - 1)
	hi &^= page - 1
	if hi > lo && hi <= len(data) {
		_ = syscall.Madvise(data[lo:hi], syscall.MADV_DONTNEED)
	}
}
