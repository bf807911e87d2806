package snapshot

import (
	"errors"
	"io"
	"os"

	"github.com/ptscope/ptscope/internal/mapfile"
)

// mapFile maps a file read-only and faults its pages in from workers
// goroutines (mapfile.Map); where files are not mapped it reads them into
// memory, so the parallel decoder runs everywhere. Everything that outlives
// the decoding is copied out of data.
func mapFile(f *os.File, size int, workers int) (data []byte, unmap func(), err error) {
	data, unmap, err = mapfile.Map(f, size, mapfile.Options{Populate: workers})
	if !errors.Is(err, mapfile.ErrUnsupported) {
		return data, unmap, err
	}
	data = make([]byte, size)
	if _, err := io.ReadFull(f, data); err != nil {
		return nil, nil, err
	}
	return data, func() {}, nil
}

// dropPages hands decoded pages of a mapping back to the kernel; a no-op
// where mapFile read the file into memory (mapfile.DropPages does nothing
// there).
func dropPages(data []byte, lo, hi int) { mapfile.DropPages(data, lo, hi) }
