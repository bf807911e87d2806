// Package spillmem places large slices of plain data (numbers and structs
// of numbers) in a temporary file mapped into memory, and keeps the share
// of them resident in the process bounded: a snapshot far larger than the
// memory budget is decoded and analysed by the same code as a small one,
// with its columns and timelines spilled to disk.
//
// The file is mapped shared, so the kernel keeps every byte written to it
// (in its page cache, written back to the file as it sees fit); a watcher
// drops the process's mappings of those pages (MADV_DONTNEED) whenever more
// than the arena's limit of them is resident, and the next access maps the
// page again from the cache, or reads it back from disk when the kernel has
// evicted it. The data stays correct whatever is dropped when; only the
// cost of reaching it changes. The file is unlinked as soon as it is
// created: it is gone when the arena is closed or the process exits.
//
// A nil *Arena is valid and means "no spilling": Make and MakeCap then make
// ordinary slices (huge-page backed when large, see internal/hugepage).
package spillmem

import (
	"fmt"
	"reflect"
	"unsafe"

	"github.com/ptscope/ptscope/internal/hugepage"
)

// MinBytes is the smallest slice placed in the arena; smaller ones stay on
// the Go heap.
const MinBytes = 1 << 20

// PollEvery is how many iterations of a loop over spilled slices may pass
// between two calls of Arena.Poll (with up to about 64 bytes of columns
// touched per iteration, a few MiB).
const PollEvery = 1 << 16

// Poll calls a.Poll every PollEvery values of i: put it at the top of a
// loop over i. It costs a test and a branch otherwise, and nothing with a
// nil arena.
func Poll(a *Arena, i int) {
	if a != nil && i&(PollEvery-1) == 0 {
		a.Poll()
	}
}

// PollSparse calls a.Poll every 256 values of i: for loops whose
// iterations each reach pages of their own (a binary search, the first
// entry of each step).
func PollSparse(a *Arena, i int) {
	if a != nil && i&255 == 0 {
		a.Poll()
	}
}

// Make returns a zeroed []T of length n, in a's file when a is not nil and
// the slice is large. T must hold no pointers (the garbage collector does
// not see the arena).
func Make[T any](a *Arena, n int) []T { return MakeCap[T](a, n, n) }

// MakeCap returns a zeroed []T of length n and capacity c, in a's file
// when a is not nil and the slice is large. T must hold no pointers.
func MakeCap[T any](a *Arena, n, c int) []T {
	var zero T
	size := uintptr(c) * unsafe.Sizeof(zero)
	if a == nil || int64(size) < a.minBytes() {
		return hugepage.MakeCap[T](n, c)
	}
	if hasPointers(reflect.TypeFor[T]()) {
		panic(fmt.Sprintf("spillmem: %v holds pointers", reflect.TypeFor[T]()))
	}
	b := a.alloc(int(size))
	if b == nil {
		return hugepage.MakeCap[T](n, c) // the arena failed: see Arena.Err
	}
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), c)[:n]
}

// hasPointers reports whether values of t hold pointers.
func hasPointers(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
		return false
	case reflect.Array:
		return t.Len() > 0 && hasPointers(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if hasPointers(t.Field(i).Type) {
				return true
			}
		}
		return false
	}
	return true
}
