//go:build linux

package mapfile

import (
	"os"
	"sync"
	"syscall"
)

// Map maps size bytes of f read-only; unmap releases them.
func Map(f *os.File, size int, o Options) (data []byte, unmap func(), err error) {
	parallel := o.Populate > 0 && canPopulateRead()
	flags := syscall.MAP_SHARED
	if o.Populate > 0 && !parallel {
		flags |= syscall.MAP_POPULATE
	}
	data, err = syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ, flags)
	if err != nil {
		return nil, nil, err
	}
	if parallel {
		populate(data, o.Populate)
	}
	if o.Sequential {
		_ = syscall.Madvise(data, syscall.MADV_SEQUENTIAL)
	}
	return data, func() { _ = syscall.Munmap(data) }, nil
}

const madvPopulateRead = 22 // MADV_POPULATE_READ (Linux 5.14)

// canPopulateRead says whether the running kernel knows MADV_POPULATE_READ.
var canPopulateRead = sync.OnceValue(func() bool {
	b, err := syscall.Mmap(-1, 0, 4096, syscall.PROT_READ, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return false
	}
	defer syscall.Munmap(b)
	return syscall.Madvise(b, madvPopulateRead) == nil
})

// populate faults the pages of data in from several goroutines.
func populate(data []byte, workers int) {
	const step = 4 << 20
	var wg sync.WaitGroup
	next := make(chan int, len(data)/step+1)
	for lo := 0; lo < len(data); lo += step {
		next <- lo
	}
	close(next)
	for range max(workers, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for lo := range next {
				_ = syscall.Madvise(data[lo:min(lo+step, len(data))], madvPopulateRead)
			}
		}()
	}
	wg.Wait()
}

// DropPages lets the kernel take back the pages of a mapping that lie wholly
// inside data[lo:hi] (decoded already): they read back from the page cache
// if touched again, so this only lowers the resident size. Only for data
// returned by Map: on heap memory it would zero live Go memory.
func DropPages(data []byte, lo, hi int) {
	const page = 4096
	lo = (lo + page - 1) &^ (page - 1)
	hi &^= page - 1
	if hi > lo && hi <= len(data) {
		_ = syscall.Madvise(data[lo:hi], syscall.MADV_DONTNEED)
	}
}
