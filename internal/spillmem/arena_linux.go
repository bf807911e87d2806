//go:build linux

package spillmem

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// Arena is a temporary file that slices are mapped from.
type Arena struct {
	f     *os.File
	limit int64 // resident bytes of the file's pages allowed before a trim
	min   atomic.Int64

	mu   sync.Mutex
	size int64    // the file's length: the next mapping starts here
	maps [][]byte // every mapping, for trims and Close
	read [][]byte // read-only file mappings trimmed with them (Track)
	err  error    // the first failure to grow or map

	done   chan struct{}
	wg     sync.WaitGroup
	trims  atomic.Int64
	closed bool
}

// checkEvery is how often the watcher looks at the resident size.
const checkEvery = 10 * time.Millisecond

// New creates an arena in dir (os.TempDir() when empty) that keeps at most
// about limit bytes of its pages resident (plus what is touched between two
// checks, a few milliseconds of work).
func New(dir string, limit int64) (*Arena, error) {
	f, err := os.CreateTemp(dir, "ptscope-spill-*")
	if err != nil {
		return nil, fmt.Errorf("spill file: %w", err)
	}
	_ = os.Remove(f.Name()) // unlinked: freed with the last mapping and descriptor
	a := &Arena{f: f, limit: max(limit, 8<<20) + sharedBytes(), done: make(chan struct{})}
	a.min.Store(MinBytes)
	a.wg.Add(1)
	go a.watch()
	return a, nil
}

// SetMin places slices of n bytes and more in the arena (MinBytes by
// default); tests spill every slice with 1.
func (a *Arena) SetMin(n int64) { a.min.Store(max(n, 1)) }

func (a *Arena) minBytes() int64 { return a.min.Load() }

// Err is the first error the arena met growing its file or mapping it
// (slices then came from the heap instead); nil if none.
func (a *Arena) Err() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.err
}

// Size is the number of bytes mapped from the file so far.
func (a *Arena) Size() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.size
}

// Trims counts the times the watcher dropped the resident pages.
func (a *Arena) Trims() int64 { return a.trims.Load() }

var pageSize = int64(os.Getpagesize())

// alloc maps n fresh (zero) bytes of the file; nil on failure.
func (a *Arena) alloc(n int) []byte {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed || a.err != nil {
		return nil
	}
	size := (int64(n) + pageSize - 1) / pageSize * pageSize
	off := a.size
	if err := a.grow(off, size); err != nil {
		a.err = fmt.Errorf("spill file: %w", err)
		return nil
	}
	b, err := syscall.Mmap(int(a.f.Fd()), off, int(size), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		a.err = fmt.Errorf("spill file: map %d bytes: %w", size, err)
		return nil
	}
	a.size += size
	a.maps = append(a.maps, b)
	return b[:n]
}

// grow extends the file by size bytes at off with its blocks allocated:
// a store into a mapped hole of a full file system raises SIGBUS, which
// would kill the process, so a full disk must fail here instead (and the
// slice then comes from the heap). Where the file system cannot allocate
// ahead, the file is extended sparse.
func (a *Arena) grow(off, size int64) error {
	err := syscall.Fallocate(int(a.f.Fd()), 0, off, size)
	if err == syscall.EOPNOTSUPP || err == syscall.ENOSYS {
		return a.f.Truncate(off + size)
	}
	return err
}

// watch trims whenever the process's resident file-backed pages exceed the
// limit.
func (a *Arena) watch() {
	defer a.wg.Done()
	t := time.NewTicker(checkEvery)
	defer t.Stop()
	for {
		select {
		case <-a.done:
			return
		case <-t.C:
			if sharedBytes() > a.limit {
				a.Trim()
			}
		}
	}
}

// Track has Trim drop the resident pages of data too: a read-only shared
// mapping of a file (the input being decoded), whose pages the next access
// reads back. Untrack must be called before data is unmapped.
func (a *Arena) Track(data []byte) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.read = append(a.read, data)
}

// Untrack stops trimming data.
func (a *Arena) Untrack(data []byte) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for i, b := range a.read {
		if unsafe.SliceData(b) == unsafe.SliceData(data) && len(b) == len(data) {
			a.read = append(a.read[:i], a.read[i+1:]...)
			return
		}
	}
}

// Poll trims when more than the limit is resident. The watcher runs when
// the scheduler lets it, which on a loaded machine can be tens of
// milliseconds late, while a pass over a spilled column maps pages at
// several GB/s: long loops over spilled slices call Poll every PollEvery
// iterations, so that the bound holds whatever the watcher's delay.
func (a *Arena) Poll() {
	if a != nil && sharedBytes() > a.limit {
		a.Trim()
	}
}

// Trim drops the process's mappings of every resident page of the arena;
// the data stays in the file (and the kernel's cache of it).
func (a *Arena) Trim() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, b := range a.maps {
		_ = syscall.Madvise(b, syscall.MADV_DONTNEED)
	}
	for _, b := range a.read {
		_ = syscall.Madvise(b, syscall.MADV_DONTNEED)
	}
	a.trims.Add(1)
}

// Close unmaps every slice made from the arena and removes its file. No
// slice made from it may be used afterwards.
func (a *Arena) Close() error {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return nil
	}
	a.closed = true
	a.mu.Unlock()
	close(a.done)
	a.wg.Wait()
	a.read = nil
	for _, b := range a.maps {
		_ = syscall.Munmap(b)
	}
	a.maps = nil
	return a.f.Close()
}

// sharedBytes is the process's resident file-backed and shared memory
// (the third field of /proc/self/statm, in pages); 0 if unknown.
func sharedBytes() int64 {
	var buf [128]byte
	f, err := os.Open("/proc/self/statm")
	if err != nil {
		return 0
	}
	n, _ := f.Read(buf[:])
	f.Close()
	fields := bytes.Fields(buf[:n])
	if len(fields) < 3 {
		return 0
	}
	v, err := strconv.ParseInt(string(fields[2]), 10, 64)
	if err != nil {
		return 0
	}
	return v * pageSize
}
