package bundle

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/ptscope/ptscope/internal/units"
)

// Limits on a bundle's side files. A side file is written by ptscope or its
// companion, but a bundle is also an input that may come from anywhere: each
// one is read as a regular file of bounded size, never through a symlink,
// from a FIFO or from a device, so that a planted file cannot make a reader
// block forever or grow without bound.
const (
	// MaxJSONSideFileBytes bounds one JSON document (manifest.json,
	// process.json, oom.json, simulation.json, the .ptscope markers): the
	// largest real ones are a few KiB.
	MaxJSONSideFileBytes = 64 << 20
	// MaxJSONLSideFileBytes bounds one .jsonl file (phases.jsonl,
	// live.jsonl): about 2.4 million phase records (800,000 steps).
	MaxJSONLSideFileBytes = 1 << 30
	// MaxJSONLLineBytes bounds one line of a .jsonl file; real lines are
	// under 1 KiB.
	MaxJSONLLineBytes = 1 << 20
	// maxLogBytes bounds how much of companion.log is read to count its lines.
	maxLogBytes = 64 << 20
)

// errNotRegular is wrapped by the errors of side files that exist but are
// not regular files.
var errNotRegular = errors.New("not a regular file")

// OpenSideFile opens path for reading if it is a regular file: a symlink
// (wherever it points), a FIFO, a socket, a device or a folder is an error
// that names path and wraps errNotRegular. It never blocks on a FIFO: the
// type is checked before the open, the open neither follows a symlink nor
// waits for a writer, and the type is checked again on the open file. A
// missing file's error wraps fs.ErrNotExist.
func OpenSideFile(path string) (*os.File, int64, error) {
	st, err := os.Lstat(path)
	if err != nil {
		return nil, 0, err
	}
	if !st.Mode().IsRegular() {
		return nil, 0, notRegular(path, st.Mode())
	}
	f, err := os.OpenFile(path, os.O_RDONLY|sideOpenFlags, 0)
	if err != nil {
		if isSymlinkErr(err) {
			return nil, 0, notRegular(path, fs.ModeSymlink)
		}
		return nil, 0, err
	}
	st, err = f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, 0, notRegular(path, st.Mode())
	}
	return f, st.Size(), nil
}

func notRegular(path string, m fs.FileMode) error {
	what := "a special file"
	switch {
	case m&fs.ModeSymlink != 0:
		what = "a symlink"
	case m.IsDir():
		what = "a folder"
	case m&fs.ModeNamedPipe != 0:
		what = "a named pipe"
	case m&fs.ModeSocket != 0:
		what = "a socket"
	case m&fs.ModeDevice != 0:
		what = "a device"
	}
	return fmt.Errorf("%s: %w (%s); bundle files are read only as regular files", path, errNotRegular, what)
}

// ReadSideFile reads the bundle side file at path, a regular file of at
// most limit bytes (see OpenSideFile). Every error but a missing file's
// names path; a missing file's wraps fs.ErrNotExist.
func ReadSideFile(path string, limit int64) ([]byte, error) {
	f, size, err := OpenSideFile(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, errNotRegular) {
			return nil, err
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	defer f.Close()
	if size > limit {
		return nil, tooLarge(path, size, limit)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if int64(len(data)) > limit { // it grew while being read
		return nil, tooLarge(path, int64(len(data)), limit)
	}
	return data, nil
}

func tooLarge(path string, size, limit int64) error {
	return fmt.Errorf("%s: %d bytes, more than the %s a bundle file of this kind may hold", path, size, units.Bytes(limit))
}

// readJSONL calls fn for each complete line of the side file path (a
// missing file is no lines), which may hold at most MaxJSONLSideFileBytes
// in lines of at most MaxJSONLLineBytes. A bad final line without a
// newline is a torn write and skipped; any other bad line is an error
// naming the file and byte offset.
func readJSONL(path string, fn func([]byte) error) error {
	f, size, err := OpenSideFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		if errors.Is(err, errNotRegular) {
			return err
		}
		return fmt.Errorf("%s: %w", path, err)
	}
	defer f.Close()
	if size > MaxJSONLSideFileBytes {
		return tooLarge(path, size, MaxJSONLSideFileBytes)
	}
	br := bufio.NewReaderSize(io.LimitReader(f, MaxJSONLSideFileBytes+1), 1<<16)
	var off int64
	var long []byte // a line longer than the reader's buffer
	for {
		chunk, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			if int64(len(long)+len(chunk)) > MaxJSONLLineBytes {
				return fmt.Errorf("%s: byte offset %d: a line longer than %s (lines of a .jsonl bundle file are under 1 KiB)", path, off, units.Bytes(MaxJSONLLineBytes))
			}
			long = append(long, chunk...)
			continue
		}
		line := chunk
		if long != nil {
			line = append(long, chunk...)
			long = nil
		}
		if int64(len(line)) > MaxJSONLLineBytes {
			return fmt.Errorf("%s: byte offset %d: a line longer than %s (lines of a .jsonl bundle file are under 1 KiB)", path, off, units.Bytes(MaxJSONLLineBytes))
		}
		complete := len(line) > 0 && line[len(line)-1] == '\n'
		if t := bytes.TrimSpace(line); len(t) > 0 {
			if perr := fn(t); perr != nil && complete {
				return fmt.Errorf("%s: byte offset %d: %w", path, off, perr)
			} else if perr != nil {
				return nil // torn last line
			}
		}
		off += int64(len(line))
		if off > MaxJSONLSideFileBytes { // it grew while being read
			return tooLarge(path, off, MaxJSONLSideFileBytes)
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: byte offset %d: %w", path, off, err)
		}
	}
}

// countLines counts the lines of the side file path (a last line without a
// newline included), reading at most limit bytes of it.
func countLines(path string, limit int64) (int, error) {
	f, _, err := OpenSideFile(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	n := 0
	buf := make([]byte, 64<<10)
	r := io.LimitReader(f, limit)
	last := byte('\n')
	for {
		k, err := r.Read(buf)
		if k > 0 {
			n += bytes.Count(buf[:k], []byte{'\n'})
			last = buf[k-1]
		}
		if err == io.EOF {
			if last != '\n' {
				n++
			}
			return n, nil
		}
		if err != nil {
			return n, fmt.Errorf("%s: %w", path, err)
		}
	}
}
