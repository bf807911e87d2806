// Package input opens the files ptscope reads: it detects gzip, xz and zstd by
// their magic bytes, and finds inputs in folders by content, not only by name.
package input

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	kgzip "github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"
)

// Compression names a container format detected by magic bytes.
type Compression string

// Supported compressions.
const (
	None Compression = ""
	Gzip Compression = "gzip"
	Xz   Compression = "xz"
	Zstd Compression = "zstd"
)

var (
	magicGzip = []byte{0x1f, 0x8b}
	magicXz   = []byte{0xfd, '7', 'z', 'X', 'Z', 0x00}
	magicZstd = []byte{0x28, 0xb5, 0x2f, 0xfd}
)

// Detect reports the compression of a stream from its first bytes.
func Detect(head []byte) Compression {
	switch {
	case bytes.HasPrefix(head, magicGzip):
		return Gzip
	case bytes.HasPrefix(head, magicXz):
		return Xz
	case bytes.HasPrefix(head, magicZstd):
		return Zstd
	}
	return None
}

// Reader is a decompressed stream over a file.
type Reader struct {
	io.Reader
	Compression Compression
	closers     []func() error
}

// Close closes the decompressor and the file.
func (r *Reader) Close() error {
	var err error
	for i := len(r.closers) - 1; i >= 0; i-- {
		if e := r.closers[i](); e != nil && err == nil {
			err = e
		}
	}
	return err
}

// Open opens name and returns its decompressed content.
func Open(name string) (*Reader, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	r, err := NewReader(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	r.closers = append([]func() error{f.Close}, r.closers...)
	return r, nil
}

// NewReader wraps r with the decompressor its magic bytes call for.
func NewReader(r io.Reader) (*Reader, error) {
	br := bufio.NewReaderSize(r, 1<<16)
	head, _ := br.Peek(6)
	c := Detect(head)
	out := &Reader{Compression: c}
	switch c {
	case Gzip:
		zr, err := kgzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("gzip header: %w", err)
		}
		out.Reader = zr
		out.closers = append(out.closers, zr.Close)
	case Xz:
		xr, err := xz.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("xz header: %w", err)
		}
		out.Reader = xr
	case Zstd:
		zr, err := zstd.NewReader(br, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(1<<34))
		if err != nil {
			return nil, fmt.Errorf("zstd header: %w", err)
		}
		out.Reader = zr
		out.closers = append(out.closers, func() error { zr.Close(); return nil })
	default:
		out.Reader = br
	}
	return out, nil
}

// ReadHead returns up to n decompressed bytes from the start of name.
func ReadHead(name string, n int) ([]byte, error) {
	r, err := Open(name)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	buf := make([]byte, n)
	k, err := io.ReadFull(r, buf)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) && !errors.Is(err, gzip.ErrChecksum) {
		return buf[:k], err
	}
	return buf[:k], nil
}

// Kind is what a file holds.
type Kind string

// Kinds of input.
const (
	Unknown  Kind = "unknown"
	Snapshot Kind = "snapshot" // CUDA caching-allocator snapshot (pickle or JSON)
	Trace    Kind = "trace"    // Kineto Chrome trace JSON
	Timeline Kind = "timeline" // profiler memory timeline export
	Bundle   Kind = "bundle"   // a ptscope run bundle folder (manifest.json)
)

// Sniff tells what a file holds from its first decompressed bytes.
func Sniff(head []byte) Kind {
	if len(head) >= 2 && head[0] == 0x80 && head[1] >= 2 && head[1] <= 5 {
		return Snapshot // a pickle: snapshots are the only pickles ptscope reads
	}
	t := bytes.TrimLeft(head, " \t\r\n\ufeff")
	if len(t) == 0 {
		return Unknown
	}
	switch t[0] {
	case '{':
		s := string(t)
		switch {
		case strings.Contains(s, `"traceEvents"`) || strings.Contains(s, `"schemaVersion"`) ||
			strings.Contains(s, `"deviceProperties"`) || strings.Contains(s, `"displayTimeUnit"`):
			return Trace
		case strings.Contains(s, `"segments"`) || strings.Contains(s, `"device_traces"`):
			return Snapshot
		}
	case '[':
		s := string(t)
		switch {
		case strings.Contains(s, `"ph"`) && strings.Contains(s, `"ts"`):
			return Trace
		case strings.Contains(s, `"total_size"`) || strings.Contains(s, `"blocks"`):
			return Snapshot
		case len(t) > 1 && (t[1] == '[' || t[1] == ' ' || t[1] == '\n'):
			return Timeline
		}
	}
	return Unknown
}

// File is one input found by Find.
type File struct {
	Path string
	Kind Kind
}

// Find expands paths (files or folders, searched recursively) into the inputs
// they hold, sorted by path. Files whose content is of no known kind are
// skipped inside folders and reported as errors when named directly. A folder
// with a manifest.json is a bundle and is returned whole.
func Find(paths []string, want ...Kind) ([]File, error) {
	ok := func(k Kind) bool {
		if len(want) == 0 {
			return k != Unknown
		}
		for _, w := range want {
			if w == k {
				return true
			}
		}
		return false
	}
	var out []File
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !st.IsDir() {
			k, err := sniffFile(p)
			if err != nil {
				return nil, err
			}
			if k == Unknown {
				return nil, fmt.Errorf("%s: offset 0: not a snapshot, trace or bundle (expected a pickle or JSON document)", p)
			}
			out = append(out, File{p, k})
			continue
		}
		// A folder given through a symlink (OUT/latest) is walked where it points.
		root := p
		if r, err := filepath.EvalSymlinks(p); err == nil {
			root = r
		}
		err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if _, err := os.Stat(filepath.Join(path, "manifest.json")); err == nil && ok(Bundle) {
					out = append(out, File{path, Bundle})
					return fs.SkipDir
				}
				if strings.HasPrefix(d.Name(), ".") && path != root {
					return fs.SkipDir
				}
				return nil
			}
			if d.Type()&fs.ModeSymlink != 0 || !d.Type().IsRegular() {
				return nil
			}
			k, err := sniffFile(path)
			if err != nil || !ok(k) {
				return nil
			}
			out = append(out, File{path, k})
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

func sniffFile(p string) (Kind, error) {
	head, err := ReadHead(p, 4096)
	if err != nil && len(head) == 0 {
		return Unknown, err
	}
	return Sniff(head), nil
}
