package snapshot

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"

	"github.com/ptscope/ptscope/internal/input"
	"github.com/ptscope/ptscope/internal/pickle"
	"github.com/ptscope/ptscope/internal/spillmem"
)

// ReadFile reads a snapshot file (pickle or JSON; gzip, xz or zstd
// compressed or not). Errors name the file and the byte offset.
func ReadFile(path string) (*Snapshot, error) { return ReadFileWith(path, ReadOptions{}) }

// ReadOptions control where a snapshot's trace is kept.
type ReadOptions struct {
	// Arena, when set, holds the trace columns (and the decoder's tables
	// as large as them) in its spill file instead of the heap, so that a
	// snapshot larger than memory is read with bounded resident memory;
	// the analyses of the snapshot place their own columns there too
	// (Snapshot.Arena). The arena must outlive every use of the snapshot.
	Arena *spillmem.Arena
	// Source is where the file is opened and the limits it is read within
	// (nil: the default budget, the process's standard input).
	Source *input.Source
}

// ReadFileWith is ReadFile with options.
func ReadFileWith(path string, o ReadOptions) (*Snapshot, error) {
	src := input.Or(o.Source)
	src.Track(path)
	if s, ok, err := readMapped(path, o.Arena, src); ok && path != "-" {
		if err != nil {
			return nil, fmt.Errorf("%s: %w", input.Name(path), err)
		}
		return s, nil
	}
	r, err := src.Open(path)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	hint := 0
	if r.Compression == input.None {
		if st, err := os.Stat(path); err == nil && st.Mode().IsRegular() && st.Size() < 1<<40 {
			hint = int(st.Size())
		}
	}
	s, err := readIn(r, hint, runtime.GOMAXPROCS(0), o.Arena, src)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", input.Name(path), err)
	}
	if r.Compression != input.None {
		s.Format += " (" + string(r.Compression) + ")"
	}
	return s, nil
}

// Read decodes a snapshot from an uncompressed stream.
func Read(r io.Reader) (*Snapshot, error) { return ReadWith(r, ReadOptions{}) }

// ReadWith is Read with options.
func ReadWith(r io.Reader, o ReadOptions) (*Snapshot, error) {
	return readIn(r, 0, runtime.GOMAXPROCS(0), o.Arena, o.Source)
}

// read decodes a snapshot; size is the input size when known (0 if not).
// Pickles of protocol 4 and 5 are read into memory and decoded with up to
// workers goroutines; workers 0 forces the streaming sequential decoder.
func read(r io.Reader, size, workers int) (*Snapshot, error) {
	return readIn(r, size, workers, nil, nil)
}

// readIn is read with the trace columns in arena (nil: the heap), within
// src's limits (nil: the default ones).
func readIn(r io.Reader, size, workers int, arena *spillmem.Arena, src *input.Source) (*Snapshot, error) {
	src = input.Or(src)
	if l, ok := r.(interface{ Len() int }); ok && size == 0 {
		size = l.Len() // bytes.Reader, bytes.Buffer, strings.Reader
	}
	cr := &input.CountingReader{R: r}
	br := bufio.NewReaderSize(cr, 1<<16)
	head, _ := br.Peek(3)
	if workers > 0 && len(head) >= 2 && head[0] == 0x80 && head[1] >= 4 {
		data, err := readPickle(br, size, arena, src)
		if err != nil {
			return nil, err
		}
		return readPickleBytesIn(data, workers, false, arena, src)
	}
	b := newBuilder(arena, src)
	var root pickle.Value
	var err error
	switch {
	case len(head) == 0:
		return nil, errors.New("offset 0: empty file, expected a pickle or JSON snapshot")
	case isPickle(head):
		p, _ := pickle.Protocol(head)
		b.s.Format = "pickle protocol " + strconv.Itoa(p)
		root, err = pickle.Decode(br, b.pickleOptions())
	default:
		t := bytes.TrimLeft(head, " \t\r\n")
		if len(t) > 0 && (t[0] == '{' || t[0] == '[' || t[0] == 0xef) || len(t) == 0 {
			b.s.Format = "json"
			root, err = decodeJSON(br, b.onDict, b.onList, src)
		} else {
			return nil, fmt.Errorf("offset 0: byte 0x%02x: not a snapshot (expected a pickle of protocol 0-5, or JSON)", head[0])
		}
	}
	if err != nil {
		return nil, err
	}
	if err := b.finish(root); err != nil {
		return nil, err
	}
	b.s.InputBytes = cr.N
	return b.s, nil
}

// isPickle: the head opens a pickle, of any protocol (a lone 0x80 still
// goes to the decoder, which names the protocol byte it lacks).
func isPickle(head []byte) bool {
	_, ok := pickle.Protocol(head)
	return ok || head[0] == 0x80
}

// readPickleBytes decodes an in-memory pickle: in parallel when workers > 1
// and the file is large, else (and whenever the parallel reader fails, so
// that errors are the sequential reader's) sequentially.
func readPickleBytes(data []byte, workers int, mapped bool) (*Snapshot, error) {
	return readPickleBytesIn(data, workers, mapped, nil, nil)
}

// readPickleBytesIn is readPickleBytes with the trace columns in arena.
func readPickleBytesIn(data []byte, workers int, mapped bool, arena *spillmem.Arena, src *input.Source) (*Snapshot, error) {
	if workers >= 1 && len(data) >= 2*minRegion {
		s, env, err := readPickleParallelArena(data, workers, minRegion, mapped, arena, src)
		if err == nil {
			return s, nil
		}
		// Until the first region is merged the parallel reader is the
		// sequential decoder: its error is the sequential reader's, and
		// decoding again would double the time and memory a bad file costs.
		if err != errMerge && env != nil && env.regions == 0 {
			return nil, err
		}
		runtime.GC() // the failed attempt's tables, before the second one grows its own
	}
	b := newBuilder(arena, src)
	b.s.Format = "pickle protocol " + strconv.Itoa(int(data[1]))
	root, err := pickle.DecodeBytes(data, b.pickleOptions())
	if err != nil {
		return nil, err
	}
	if err := b.finish(root); err != nil {
		return nil, err
	}
	b.s.InputBytes = int64(len(data))
	return b.s, nil
}
