package snapshot

import (
	"errors"
	"io"
	"os"
	"runtime"
	"runtime/debug"

	"github.com/ptscope/ptscope/internal/input"
	"github.com/ptscope/ptscope/internal/mapfile"
	"github.com/ptscope/ptscope/internal/spillmem"
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

// readMapped decodes a large uncompressed pickle (protocol 4 or 5) from a
// memory mapping of the file, in parallel; ok is false for other files.
func readMapped(path string, arena *spillmem.Arena, src *input.Source) (s *Snapshot, ok bool, err error) {
	// Stat first: opening a FIFO a second time would block, and a stream
	// Find opened must be left for Source.Open.
	if st, err := os.Stat(path); err != nil || !st.Mode().IsRegular() {
		return nil, false, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, false, nil
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() || st.Size() < 2*minRegion || st.Size() > 1<<40 {
		return nil, false, nil
	}
	var head [2]byte
	if _, err := f.ReadAt(head[:], 0); err != nil || head[0] != 0x80 || head[1] < 4 || head[1] > 5 {
		return nil, false, nil
	}
	populate := runtime.GOMAXPROCS(0)
	if arena != nil {
		populate = 0 // the pages come in as they are decoded, and go with the arena's
	}
	data, unmap, err := mapFile(f, int(st.Size()), populate)
	if err != nil {
		return nil, false, nil
	}
	defer unmap()
	if arena != nil {
		arena.Track(data)
		defer arena.Untrack(data) // before unmap
	}
	s, err = decodeMapped(data, arena, src)
	// The stretches' tables are garbage now, about as large as the
	// result; whether to collect them before more work piles up on top is
	// the caller's decision (the CLI does, as it runs with a high GOGC).
	return s, true, err
}

// decodeMapped decodes a mapped file; if the file is cut short meanwhile,
// touching the lost pages faults, which becomes an error here.
func decodeMapped(data []byte, arena *spillmem.Arena, src *input.Source) (s *Snapshot, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if recover() != nil {
			s, err = nil, errors.New("the file changed (was cut short?) while it was read")
		}
	}()
	return readPickleBytesIn(data, runtime.GOMAXPROCS(0), true, arena, src)
}
