// Package input opens the files ptscope reads: it detects gzip, xz and zstd by
// their magic bytes, and finds inputs in folders by content, not only by name.
package input

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	kgzip "github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/ptscope/ptscope/internal/bundle"
	"github.com/ptscope/ptscope/internal/pickle"
	"github.com/ptscope/ptscope/internal/term"
	"github.com/ptscope/ptscope/internal/xz"
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
	src         *Source // counts the bytes read for its watchdog
	in          *CountingReader
	out         int64 // decompressed bytes read
}

// A compressed stream that has given more than BombMinBytes, over BombRatio
// times the compressed bytes read to make them, is refused as a
// decompression bomb. PyTorch's snapshots and traces compress 10 to 30
// times (gzip 13-18x, xz 22-31x on the fixtures and a 1M-entry snapshot); a
// file 200 times smaller than its content is made to cost what it does not
// weigh (a 2.7 MB gzip of a 780 MB pickle of one allocation repeated 10M
// times): refused after a fraction of a second instead of after the decode
// of all of it. The same content uncompressed is read as any file is.
const (
	BombRatio    = 200
	BombMinBytes = 128 << 20
)

// Read reads decompressed bytes, counting them for the budget watchdog.
func (r *Reader) Read(p []byte) (int, error) {
	n, err := r.Reader.Read(p)
	r.src.progressOff.Add(int64(n))
	r.out += int64(n)
	if r.in != nil && r.out > BombMinBytes && r.out > BombRatio*r.in.N {
		return n, fmt.Errorf("the %s stream decompresses to more than %d times the %d bytes read of it (%d bytes so far), refused as a decompression bomb (decompress it first to read it anyway)",
			r.Compression, BombRatio, r.in.N, r.out)
	}
	return n, err
}

// CountingReader counts the bytes read through it: the compressed bytes a
// decompressor reads, the input bytes a decoder reads.
type CountingReader struct {
	R io.Reader
	N int64
}

func (c *CountingReader) Read(p []byte) (int, error) {
	n, err := c.R.Read(p)
	c.N += int64(n)
	return n, err
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

// Open opens name and returns its decompressed content. "-" is the standard
// input (NewSource's stdin); a pipe, a terminal or a process substitution (<(...),
// /dev/stdin) that Find already opened to tell its kind is handed over as
// Find left it, since such a stream can be read only once.
func (s *Source) Open(name string) (*Reader, error) {
	s.Track(name)
	if r := s.takeStream(name); r != nil {
		return r, nil
	}
	if name == "-" {
		r, err := s.NewReader(s.stdin)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", Name(name), err)
		}
		return r, nil
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	r, err := s.NewReader(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", Name(name), err)
	}
	r.closers = append([]func() error{f.Close}, r.closers...)
	return r, nil
}

// NewReader wraps r with the decompressor its magic bytes call for (a zstd
// window is bounded by the budget).
func (s *Source) NewReader(r io.Reader) (*Reader, error) {
	in := &CountingReader{R: r}
	br := bufio.NewReaderSize(in, 1<<16)
	head, _ := br.Peek(6)
	c := Detect(head)
	out := &Reader{Compression: c, src: s}
	if c != None {
		out.in = in
	}
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
		// The window (the history a frame may refer back to, allocated as
		// it fills) is bounded by the frame header; the library's default
		// cap, 512 MiB, is what zstd --long=29 needs. The decoder streams,
		// so the decompressed size itself is never held.
		zr, err := zstd.NewReader(br, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(1<<34),
			zstd.WithDecoderMaxWindow(uint64(min(s.MaxInMemory(), 512<<20))))
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
func (s *Source) ReadHead(name string, n int) ([]byte, error) {
	r, err := s.Open(name)
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
	Timeline Kind = "timeline" // profiler memory timeline export (TimelineWhat)
	Bundle   Kind = "bundle"   // a ptscope run bundle folder (manifest.json)
)

// TimelineWhat names a Timeline input in messages: prof.export_memory_timeline
// writes [times, sizes by category] (.json, .json.gz) or raw
// [time, action, bytes, category] events (.raw.json.gz), which ptscope
// does not read.
const TimelineWhat = "the output of prof.export_memory_timeline (memory by category over time)"

// memoryTimeline matches the start of prof.export_memory_timeline's output:
// [[time, ...], [[bytes, ...], ...]] or [[time, action, bytes, category], ...].
var memoryTimeline = regexp.MustCompile(`^\s*\[\s*\[\s*-?[0-9]`)

// IsMemoryTimeline reports whether the file at path (of Kind Timeline)
// starts as prof.export_memory_timeline's output does, rather than being
// merely a JSON array of arrays.
func (s *Source) IsMemoryTimeline(path string) bool {
	head, err := s.ReadHead(path, 64)
	return (err == nil || len(head) > 0) && memoryTimeline.Match(head)
}

// Sniff tells what a file holds from its first decompressed bytes.
func Sniff(head []byte) Kind {
	if _, ok := pickle.Protocol(head); ok {
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
// with a manifest.json is a bundle and is returned whole; a rank folder of a
// bundle named directly is a Bundle input too (bundle.ListBundle lists the
// bundle with that rank alone). "-" is the
// standard input. Entries of a folder that cannot be read (a subfolder or a
// file without permission) are skipped and summed up in one warning.
func (s *Source) Find(paths []string, want ...Kind) ([]File, error) {
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
		var st fs.FileInfo
		if p != "-" {
			var err error
			if st, err = os.Stat(p); err != nil {
				return nil, quotePathError(err)
			}
		}
		if st == nil || !st.IsDir() {
			k, err := s.sniffInput(p, st)
			if err != nil {
				return nil, quotePathError(err)
			}
			if k == Unknown {
				return nil, fmt.Errorf("%s: offset 0: not a snapshot, trace or bundle (expected a pickle or JSON document)", Name(p))
			}
			out = append(out, File{p, k})
			continue
		}
		if bundle.IsBundleRank(p) && ok(Bundle) {
			out = append(out, File{p, Bundle}) // that rank of its bundle, read as the bundle reads it
			continue
		}
		// A folder given through a symlink (OUT/latest) is walked where it points.
		root := p
		if r, err := filepath.EvalSymlinks(p); err == nil {
			root = r
		}
		var skipped, timelines []string
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				if path == root && d == nil {
					return err
				}
				skipped = append(skipped, quotePathError(err).Error())
				if d != nil && d.IsDir() {
					return fs.SkipDir
				}
				return nil
			}
			if d.IsDir() {
				if bundle.IsBundle(path) && ok(Bundle) {
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
			k, err := s.sniffFile(path)
			if err != nil {
				skipped = append(skipped, quotePathError(err).Error())
				return nil
			}
			if !ok(k) {
				if k == Timeline && s.IsMemoryTimeline(path) {
					timelines = append(timelines, path)
				}
				return nil
			}
			out = append(out, File{path, k})
			return nil
		})
		if err != nil {
			return nil, quotePathError(err)
		}
		if len(timelines) > 0 {
			s.warn(fmt.Sprintf("%s: skipped %d %s, which ptscope does not read (first: %s)", Name(p), len(timelines),
				strings.Replace(TimelineWhat, "the output", "file"+map[bool]string{true: "s", false: ""}[len(timelines) > 1]+" of the output", 1), Name(timelines[0])))
		}
		if len(skipped) > 0 {
			what := "entry"
			if len(skipped) > 1 {
				what = "entries"
			}
			s.warn(fmt.Sprintf("%s: skipped %d unreadable %s (first: %s)", Name(p), len(skipped), what, skipped[0]))
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

func (s *Source) sniffFile(p string) (Kind, error) {
	head, err := s.ReadHead(p, 4096)
	if err != nil && len(head) == 0 {
		return Unknown, err
	}
	return Sniff(head), nil
}

// sniffInput tells the kind of an input named on the command line: a
// regular file is opened again later, but a stream ("-", a pipe, a
// character device) is opened once, its kind read from a buffered prefix,
// and kept for Open.
//
// A stream already sniffed and not yet opened keeps the kind it was found
// to be: a command may Find its inputs twice (to tell their kinds, then
// in the loader) and a stream cannot be read again.
func (s *Source) sniffInput(p string, st fs.FileInfo) (Kind, error) {
	if st != nil && st.Mode().IsRegular() {
		return s.sniffFile(p)
	}
	if k, ok := s.pendingKind(p); ok {
		return k, nil
	}
	var raw io.Reader
	var closeRaw func() error
	if p == "-" {
		raw = s.stdin
	} else {
		f, err := os.Open(p)
		if err != nil {
			return Unknown, err
		}
		raw, closeRaw = f, f.Close
	}
	r, err := s.NewReader(raw)
	if err != nil {
		if closeRaw != nil {
			closeRaw()
		}
		return Unknown, fmt.Errorf("%s: %w", Name(p), err)
	}
	if closeRaw != nil {
		r.closers = append([]func() error{closeRaw}, r.closers...)
	}
	br := bufio.NewReaderSize(r.Reader, 64<<10)
	head, err := br.Peek(4096)
	if err != nil && len(head) == 0 && err != io.EOF {
		r.Close()
		return Unknown, fmt.Errorf("%s: %w", Name(p), err)
	}
	r.Reader = br
	k := Sniff(head)
	s.putStream(p, r, k)
	return k, nil
}

// Source is where one command's inputs come from and what reading them may
// use: the memory budget, the standard input ("-"), where warnings go, the
// streams Find opened for Open, and the progress its watchdog reports. cli
// makes one per command and passes it down to every reader; nothing here
// is process-wide, so commands may run one after another, or side by side,
// in one process (the live heap they are checked against is the process's,
// though: see Watch).
type Source struct {
	budget   int64
	stdin    io.Reader
	warnings io.Writer
	mu       sync.Mutex
	warned   map[string]bool // warnings written, each once

	streamMu sync.Mutex
	streams  map[string]pending // opened by Find, waiting for Open

	progressName atomic.Pointer[string]
	progressOff  atomic.Int64

	ctx context.Context // ends the reading (Check); nil: never
}

// WithContext makes the readers of s stop, at their next Check, once ctx
// is done (Ctrl-C): their error then wraps ctx.Err(). It returns s.
func (s *Source) WithContext(ctx context.Context) *Source {
	s.ctx = ctx
	return s
}

// Done is the Source's context's Done channel (nil, never closed, without
// a context), for loops that poll cheaply between their Checks.
func (s *Source) Done() <-chan struct{} {
	if s == nil || s.ctx == nil {
		return nil
	}
	return s.ctx.Done()
}

// Check is what a reader calls now and then (every MiB or so): an error
// once the Source's context is done (wrapping context.Canceled), or when
// the live heap exceeds the budget (CheckMemory).
func (s *Source) Check() error {
	if s.ctx != nil {
		if err := s.ctx.Err(); err != nil {
			return err
		}
	}
	return s.CheckMemory()
}

// NewSource makes a Source with a memory budget of budget bytes (0: the
// DefaultBudget; at least 64 MiB), reading "-" from stdin (os.Stdin when
// nil) and writing Find's warnings, one line each prefixed "ptscope:
// warning: ", to warnings (os.Stderr when nil).
func NewSource(budget int64, stdin io.Reader, warnings io.Writer) *Source {
	if budget <= 0 {
		budget = DefaultBudget()
	}
	if stdin == nil {
		stdin = os.Stdin
	}
	if warnings == nil {
		warnings = os.Stderr
	}
	return &Source{budget: max(budget, minBudget), stdin: stdin, warnings: warnings, streams: map[string]pending{}}
}

// Or returns s, or a Source with the default budget and the process's
// standard streams when s is nil (a library caller that sets no limits).
func Or(s *Source) *Source {
	if s == nil {
		return NewSource(0, nil, nil)
	}
	return s
}

// pending is a stream Find opened and Open has not taken yet.
type pending struct {
	r    *Reader
	kind Kind
}

func (s *Source) putStream(name string, r *Reader, k Kind) {
	s.streamMu.Lock()
	defer s.streamMu.Unlock()
	if old, ok := s.streams[name]; ok {
		old.r.Close()
	}
	s.streams[name] = pending{r, k}
}

func (s *Source) takeStream(name string) *Reader {
	s.streamMu.Lock()
	defer s.streamMu.Unlock()
	p, ok := s.streams[name]
	if !ok {
		return nil
	}
	delete(s.streams, name)
	return p.r
}

func (s *Source) pendingKind(name string) (Kind, bool) {
	s.streamMu.Lock()
	defer s.streamMu.Unlock()
	p, ok := s.streams[name]
	return p.kind, ok
}

// Close closes the streams Find opened that no Open took.
func (s *Source) Close() {
	s.streamMu.Lock()
	defer s.streamMu.Unlock()
	for name, p := range s.streams {
		p.r.Close()
		delete(s.streams, name)
	}
}

// warn writes a warning once: a command may search the same folder twice
// (to tell what it holds, then to read it).
func (s *Source) warn(msg string) {
	s.mu.Lock()
	if s.warned == nil {
		s.warned = map[string]bool{}
	}
	seen := s.warned[msg]
	s.warned[msg] = true
	s.mu.Unlock()
	if seen {
		return
	}
	fmt.Fprintf(s.warnings, "ptscope: warning: %s\n", Escape(msg))
}

// Name returns a file name as it can be printed: as is when it is printable
// text, else Go-quoted, so that escape bytes in a name never reach a
// terminal raw.
func Name(p string) string {
	if Escape(p) == p {
		return p
	}
	return strconv.Quote(p)
}

// Escape returns s with control characters, Unicode bidirectional
// controls and invalid UTF-8 written as escapes (\x1b, \n, \u0085,
// \u202e): text from inputs or file names may then go into a one-line
// message safely (a name holding U+202E would print the rest of the line
// reversed).
func Escape(s string) string {
	clean := true
	for _, r := range s {
		if r == utf8.RuneError || r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || term.Bidi(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}

// quotePathError quotes the file name of a *fs.PathError.
func quotePathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) && Name(pe.Path) != pe.Path {
		return &fs.PathError{Op: pe.Op, Path: Name(pe.Path), Err: pe.Err}
	}
	return err
}
