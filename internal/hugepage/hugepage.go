// Package hugepage makes large slices that the kernel backs with transparent
// huge pages where it offers them on request (Linux with
// /sys/kernel/mm/transparent_hugepage/enabled set to "madvise", the default
// of many distributions). The Go heap never asks for them, so each 4 KiB page
// of a fresh slice costs one page fault on first touch; on virtual machines a
// fault costs several microseconds, and a 1M-entry snapshot's columns and
// timelines touch a few hundred megabytes. Asking for 2 MiB pages before the
// first touch makes that about ten times cheaper (measured in
// docs/validation.md). Elsewhere, and for small slices, these are plain makes.
//
// The advice stays on the address range after the slice is freed, so the Go
// heap may later put small objects on huge pages there: right for a command
// that reads one large input and exits, worth revisiting for a long-running
// server. PTSCOPE_HUGEPAGES=0 turns the advice off (for comparisons).
package hugepage

import (
	"os"
	"unsafe"
)

// enabled is false when PTSCOPE_HUGEPAGES=0.
var enabled = os.Getenv("PTSCOPE_HUGEPAGES") != "0"

// MinBytes is the smallest slice worth advising: it must hold at least one
// whole aligned 2 MiB page.
const MinBytes = 4 << 20

const hugePage = 2 << 20

// Make returns make([]T, n), backed by huge pages when large.
func Make[T any](n int) []T {
	s := make([]T, n)
	Advise(s)
	return s
}

// MakeCap returns make([]T, n, c), backed by huge pages when large.
func MakeCap[T any](n, c int) []T {
	s := make([]T, n, c)
	Advise(s)
	return s
}

// Advise asks for huge pages for the whole aligned 2 MiB pages of s's
// backing array (up to its capacity). It only helps before the memory is
// first touched, as right after make; errors are ignored (a hint).
func Advise[T any](s []T) {
	var zero T
	size := uintptr(cap(s)) * unsafe.Sizeof(zero)
	if size < MinBytes || !enabled {
		return
	}
	p := uintptr(unsafe.Pointer(unsafe.SliceData(s)))
	lo := (p + hugePage - 1) &^ (hugePage - 1)
	hi := (p + size) &^ (hugePage - 1)
	if hi > lo {
		advise(lo, hi-lo)
	}
}
