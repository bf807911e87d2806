// Package mapfile maps input files read-only for the decoders that cut them
// in place (snapshots, traces), and hands decoded pages back to the kernel.
// A mapping is page cache shared with the kernel, not heap.
package mapfile

import "errors"

// ErrUnsupported is returned by Map where files are not mapped (not Linux);
// callers read the file instead.
var ErrUnsupported = errors.New("mapfile: mapping not supported here")

// Options tune Map.
type Options struct {
	// Populate faults every page in before Map returns, from this many
	// goroutines where the kernel can (MADV_POPULATE_READ), else at once
	// (MAP_POPULATE). 0 leaves the pages to fault in on first touch.
	Populate int
	// Sequential advises read-ahead for one pass in order (MADV_SEQUENTIAL).
	Sequential bool
}
