//go:build !linux

package spillmem

import "errors"

// Arena is a temporary file that slices are mapped from (Linux only).
type Arena struct{}

// New fails where spilling is not implemented: callers keep slices on the heap.
func New(dir string, limit int64) (*Arena, error) {
	return nil, errors.New("spilling to disk is implemented on Linux only")
}

// SetMin does nothing.
func (a *Arena) SetMin(n int64) {}

func (a *Arena) minBytes() int64 { return MinBytes }

// Err is always nil.
func (a *Arena) Err() error { return nil }

// Size is always 0.
func (a *Arena) Size() int64 { return 0 }

// Trims is always 0.
func (a *Arena) Trims() int64 { return 0 }

// Track does nothing.
func (a *Arena) Track(data []byte) {}

// Untrack does nothing.
func (a *Arena) Untrack(data []byte) {}

// Poll does nothing.
func (a *Arena) Poll() {}

// Trim does nothing.
func (a *Arena) Trim() {}

// Close does nothing.
func (a *Arena) Close() error { return nil }

func (a *Arena) alloc(n int) []byte { return nil }
