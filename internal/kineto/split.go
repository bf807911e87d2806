package kineto

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/ptscope/ptscope/internal/input"
)

// batch is a run of whole events cut from the input, in file order.
type batch struct {
	seq    int
	buf    []byte  // owns the bytes
	ends   []int32 // event i is buf[starts[i]:ends[i]]
	starts []int32
	offset int64 // file offset of buf[0]
	part   *part // where the worker decodes it
}

// splitter cuts the traceEvents array of a Chrome trace into events without
// decoding them. It keeps the bytes before and after the array (the
// metadata) and tolerates damage: a raw newline inside a string ends the
// string (Kineto never writes one there, so it must be an unescaped quote),
// stray bytes between events are skipped and counted, and an event larger
// than maxEvent is dropped.
type splitter struct {
	r         io.Reader
	data      []byte // the whole input when it is mapped (r is unused then)
	chunk     int
	maxEvent  int
	maxHeader int

	off     int64 // file offset of the next byte read
	pending []byte
	pendOff int64
	eof     bool

	header    []byte // the top-level object before "traceEvents"'s value
	tail      []byte // the bytes after the array's closing bracket
	bareArray bool
	inArray   bool
	done      bool // array closed
	seq       int

	// event scan state, valid across chunks
	depth   int
	inStr   bool
	scanned int // bytes of the partial event already scanned
	garbage int
	damaged int // strings closed at a newline
	dropped int
	resync  bool // skipping the rest of a dropped event
	warn    func(string)

	nextCheck int64         // input offset of the next memory budget check
	src       *input.Source // the budget checked (nil: none, in tests of the splitter alone)

	// the parallel index of a mapped array (split_index.go); the par
	// fields override its defaults
	ix                             *parIndex
	parMin, parStretch, parWorkers int
}

// maxDepth is the deepest nesting accepted in an event or in the header
// (Kineto writes at most 5 levels: event, args, Input Dims, a tensor list,
// its shapes). encoding/json decodes nested values recursively, so deeper ones
// are refused here, before they reach it.
const maxDepth = 64

var errNotTrace = errors.New("not a Chrome trace: expected a JSON object with traceEvents or an array of events")

// checkMemory checks the live heap against the budget.
func (s *splitter) checkMemory() error {
	if s.src == nil {
		return nil
	}
	return s.src.Check()
}

func (s *splitter) fill() error {
	if s.eof {
		return io.EOF
	}
	if s.data != nil {
		return s.fillMapped()
	}
	buf := make([]byte, len(s.pending), len(s.pending)+s.chunk)
	copy(buf, s.pending)
	n, err := io.ReadFull(s.r, buf[len(buf):cap(buf)])
	buf = buf[:len(buf)+n]
	s.off += int64(n)
	s.pending = buf
	if s.off >= s.nextCheck {
		s.nextCheck = s.off + 16<<20
		if cerr := s.checkMemory(); cerr != nil {
			return fmt.Errorf("offset %d: %w", s.off, cerr)
		}
	}
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		s.eof = true
		if n == 0 {
			return io.EOF
		}
		return nil
	}
	return err
}

// fillMapped extends s.pending over the mapping as fill would read (the
// same chunk boundaries, so both modes cut the same batches) without
// copying: s.pending is always s.data[s.pendOff:s.off].
func (s *splitter) fillMapped() error {
	end := min(s.off+int64(s.chunk), int64(len(s.data)))
	n := end - s.off
	s.pending = s.data[s.pendOff:end:end]
	s.off = end
	if s.off >= s.nextCheck {
		s.nextCheck = s.off + 16<<20
		if s.src != nil {
			s.src.Progress(s.off)
		}
		if cerr := s.checkMemory(); cerr != nil {
			return fmt.Errorf("offset %d: %w", s.off, cerr)
		}
	}
	if end == int64(len(s.data)) {
		s.eof = true
		if n == 0 {
			return io.EOF
		}
	}
	return nil
}

// start reads up to the first event of the array, collecting the header.
func (s *splitter) start() error {
	if err := s.skipSpace(); err != nil {
		return err
	}
	switch s.pending[0] {
	case '[':
		s.bareArray = true
		s.inArray = true
		s.pending = s.pending[1:]
		s.pendOff++
		return nil
	case '{':
	default:
		return fmt.Errorf("offset %d: %w", s.pendOff, errNotTrace)
	}
	return s.findEvents()
}

// skipSpace drops the white space and byte order marks before the
// document's first value; an empty file, or one of white space only, is
// an error.
func (s *splitter) skipSpace() error {
	for {
		t := bytes.TrimLeft(s.pending, " \t\r\n\ufeff")
		t = bytes.TrimPrefix(t, []byte("\ufeff"))
		if len(t) > 0 {
			s.pendOff += int64(len(s.pending) - len(t))
			s.pending = t
			return nil
		}
		s.pendOff += int64(len(s.pending))
		s.pending = s.pending[:0]
		if err := s.fill(); err != nil {
			if err == io.EOF {
				if s.off == 0 {
					return errors.New("offset 0: empty file")
				}
				return fmt.Errorf("offset %d: no JSON value", s.off)
			}
			return err
		}
	}
}

// findEvents scans the top-level object for the key "traceEvents" at
// depth 1 and stops inside its array, the bytes before the key kept as
// the header; an object without it is the whole header (s.done).
func (s *splitter) findEvents() error {
	depth, inStr, esc := 0, false, false
	keyStart := -1
	lastKey := []byte(nil)
	i := 0
	for {
		for ; i < len(s.pending); i++ {
			c := s.pending[i]
			if inStr {
				switch {
				case esc:
					esc = false
				case c == '\\':
					esc = true
				case c == '"':
					inStr = false
					if depth == 1 && keyStart >= 0 {
						lastKey = s.pending[keyStart:i]
						keyStart = -1
					}
				}
				continue
			}
			switch c {
			case '"':
				inStr = true
				if depth == 1 {
					keyStart = i + 1
				}
			case '{', '[':
				if depth >= maxDepth {
					return fmt.Errorf("offset %d: JSON nested deeper than %d levels before the traceEvents array", s.pendOff+int64(i), maxDepth)
				}
				if c == '[' && depth == 1 && string(lastKey) == "traceEvents" {
					// header: everything up to the key's opening quote
					h := s.pending[:i]
					k := bytes.LastIndex(h, []byte(`"traceEvents"`))
					s.header = append([]byte(nil), h[:k]...)
					s.pending = s.pending[i+1:]
					s.pendOff += int64(i + 1)
					s.inArray = true
					return nil
				}
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					// object closed without traceEvents
					s.header = append([]byte(nil), s.pending[:i]...)
					s.done = true
					return nil
				}
			case ':':
			case ',':
				if depth == 1 {
					lastKey = nil
				}
			}
		}
		if len(s.pending) > s.maxHeader {
			return fmt.Errorf("offset %d: no traceEvents array in the first %d bytes", s.pendOff, s.maxHeader)
		}
		if err := s.fill(); err != nil {
			if err == io.EOF {
				return fmt.Errorf("offset %d: file ends before the traceEvents array", s.off)
			}
			return err
		}
	}
}

// next returns the next batch of whole events, io.EOF after the last, or
// errTruncated when the input ended inside the array.
func (s *splitter) next() (*batch, error) {
	for !s.done {
		if b := s.cut(); b != nil {
			return b, nil
		}
		if s.done {
			break
		}
		if err := s.fill(); err != nil {
			if err != io.EOF {
				return nil, err
			}
			s.done = true
			if s.depth > 0 {
				s.dropped++
				s.warn(fmt.Sprintf("offset %d: input truncated inside an event; the partial event was dropped", s.pendOff))
			} else {
				s.warn(fmt.Sprintf("offset %d: input truncated: the traceEvents array is not closed", s.off))
			}
			return nil, errTruncated
		}
	}
	return nil, io.EOF
}

var errTruncated = errors.New("truncated")

// byte classes of the scanner
var strSpecial, structural [256]bool

func init() {
	for _, c := range []byte("\"\\\n") {
		strSpecial[c] = true
	}
	for _, c := range []byte("\"{}[]") {
		structural[c] = true
	}
}

// skipTo returns the first index at or after i of a byte of the class
// (len(b) when none), four bytes a round.
func skipTo(class *[256]bool, b []byte, i int) int {
	for ; i+4 <= len(b); i += 4 {
		w := b[i : i+4 : i+4]
		if class[w[0]] {
			return i
		}
		if class[w[1]] {
			return i + 1
		}
		if class[w[2]] {
			return i + 2
		}
		if class[w[3]] {
			return i + 3
		}
	}
	for ; i < len(b); i++ {
		if class[b[i]] {
			return i
		}
	}
	return i
}

func (s *splitter) dropEvent(evStart int) {
	s.dropped++
	s.warn(fmt.Sprintf("offset %d: event larger than %d bytes dropped (unbalanced braces?)", s.pendOff+int64(evStart), s.maxEvent))
}

// resyncFrom returns where the next event starts in buf[i:] after a dropped
// one (an absolute index), or -1: at a line that starts an event (Kineto
// writes one event per line, indented by two spaces) or after "}," when
// the trace is on one line.
func resyncFrom(buf []byte, i int) int {
	if k := resyncAt(buf[i:]); k >= 0 {
		return i + k
	}
	return -1
}

func resyncAt(b []byte) int {
	k := bytes.Index(b, []byte("\n  {"))
	if k >= 0 {
		k++
	}
	if j := bytes.Index(b, []byte("},{")); j >= 0 && (k < 0 || j+2 < k) {
		k = j + 2
	}
	return k
}

// cut scans s.pending for whole events. It returns a batch when it found at
// least one, keeping the partial event in s.pending.
func (s *splitter) cut() *batch {
	buf := s.pending
	b := &batch{buf: buf, offset: s.pendOff}
	evStart := -1
	i := 0
	if s.depth > 0 {
		evStart = 0
		i = s.scanned
	}
	if x := s.ix; x != nil && !x.over {
		if keep, ok := x.take(b, s.pendOff, s.off); ok {
			return s.keep(b, buf, keep)
		}
		i = x.leave(s.pendOff)
	}
	depth, inStr := s.depth, s.inStr
	n := len(buf)
	if s.resync {
		if i = s.resyncStart(buf); i < 0 {
			return nil
		}
	}
scan:
	for i < n {
		c := buf[i]
		if depth == 0 {
			switch c {
			case ' ', '\n', '\r', '\t', ',':
			case '{':
				depth = 1
				evStart = i
			case ']':
				s.readTail(buf[i+1:])
				n = i
				break scan
			default:
				s.garbage++
			}
			i++
			continue
		}
		if inStr {
			// fast skip of plain string bytes
			i = skipTo(&strSpecial, buf[:n], i)
			if i-evStart > s.maxEvent {
				s.dropEvent(evStart)
				depth, inStr, evStart = 0, false, -1
				i = s.skipDropped(buf, i, n)
				continue
			}
			if i >= n {
				break
			}
			switch buf[i] {
			case '\\':
				if i+1 >= n {
					break scan // rescan the backslash with the next chunk
				}
				i += 2
				continue
			case '"':
				inStr = false
			case '\n':
				inStr = false
				s.damaged++
			}
			i++
			continue
		}
		i = skipTo(&structural, buf[:n], i)
		if i >= n {
			break
		}
		switch buf[i] {
		case '"':
			inStr = true
		case '{', '[':
			if depth++; depth > maxDepth {
				s.dropped++
				s.warn(fmt.Sprintf("offset %d: event nested deeper than %d levels dropped", s.pendOff+int64(evStart), maxDepth))
				depth, inStr, evStart = 0, false, -1
				i = s.skipDropped(buf, i, n)
				continue
			}
		case '}', ']':
			depth--
			if depth == 0 {
				b.starts = append(b.starts, int32(evStart))
				b.ends = append(b.ends, int32(i+1))
				evStart = -1
			}
		}
		i++
		if depth > 0 && i-evStart > s.maxEvent {
			s.dropEvent(evStart)
			depth, inStr, evStart = 0, false, -1
			i = s.skipDropped(buf, i, n)
		}
	}
	return s.endCut(b, buf, n, i, evStart, depth, inStr)
}

// resyncStart skips the rest of a dropped event in buf to the next event
// start and returns where the scan goes on; -1 when buf holds none (its
// last bytes stay pending: a start may straddle two chunks).
func (s *splitter) resyncStart(buf []byte) int {
	k := resyncAt(buf)
	if k < 0 {
		keep := max(len(buf)-3, 0)
		s.pending = buf[keep:]
		s.pendOff += int64(keep)
		return -1
	}
	s.resync = false
	return k
}

// skipDropped is where the scan of buf[:n] goes on after dropping the
// event it was in at i: the next event start, or n, s.resync set, when
// the event goes on in the next chunk.
func (s *splitter) skipDropped(buf []byte, i, n int) int {
	if i = resyncFrom(buf, i); i < 0 {
		s.resync = true
		return n
	}
	return i
}

// readTail keeps what follows the events array (rest, and up to
// maxHeader bytes more of the input) as the document's tail, and ends the
// split.
func (s *splitter) readTail(rest []byte) {
	s.done = true
	s.tail = append([]byte(nil), rest...)
	switch {
	case s.eof:
	case s.data != nil:
		s.tail = append(s.tail, s.data[s.off:min(s.off+int64(s.maxHeader), int64(len(s.data)))]...)
	default:
		more, _ := io.ReadAll(io.LimitReader(s.r, int64(s.maxHeader)))
		s.tail = append(s.tail, more...)
	}
}

// endCut ends a cut of buf[:n] that stopped at i, in the event that
// started at evStart (-1: none) at depth (inStr: inside a string): the
// batch of whole events, the partial one kept pending with the state to
// resume its scan.
func (s *splitter) endCut(b *batch, buf []byte, n, i, evStart, depth int, inStr bool) *batch {
	if s.done {
		s.pending = nil
		if len(b.starts) == 0 {
			return nil
		}
		s.seq++
		b.seq = s.seq
		return b
	}
	// keep the partial event for the next chunk (fill copies it, so the
	// batch owns buf[:keep]; a mapping is never written, so sharing it is safe)
	keep := n
	s.scanned = 0
	if evStart >= 0 {
		keep = evStart
		s.scanned = i - evStart
	}
	s.depth, s.inStr = depth, inStr
	return s.keep(b, buf, keep)
}

// keep ends a cut: buf[keep:] stays pending, and b (if it holds events)
// gets buf[:keep].
func (s *splitter) keep(b *batch, buf []byte, keep int) *batch {
	s.pending = buf[keep:]
	s.pendOff += int64(keep)
	if len(b.starts) == 0 {
		return nil
	}
	b.buf = buf[:keep:keep]
	s.seq++
	b.seq = s.seq
	return b
}
