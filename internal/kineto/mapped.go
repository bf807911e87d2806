package kineto

import (
	"os"

	"github.com/ptscope/ptscope/internal/mapfile"
)

// mapFile maps a regular file read-only for the splitter to cut in place:
// no read syscalls and no copy of the bytes into the heap. It returns ok
// false (the caller reads the file instead) where mapping does not apply:
// not a regular file, empty, too large, or not Linux. The mapping is page
// cache, not heap: it does not count against the memory budget.
func mapFile(path string) (data []byte, unmap func(), ok bool) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, false
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() || st.Size() == 0 || st.Size() > 1<<40 {
		return nil, nil, false
	}
	// the splitter goes through the file once, in order
	data, unmap, err = mapfile.Map(f, int(st.Size()), mapfile.Options{Sequential: true})
	return data, unmap, err == nil
}
