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
