// Package gen makes large, realistic Kineto traces for benchmarks by
// replicating the events of a real trace: each copy is shifted in time past
// the previous one, its External ids, correlations, flow ids, Python ids and
// sequence numbers are offset so that links stay unique, and it is wrapped in
// a ProfilerStep#N annotation. The text keeps Kineto's own layout, so the
// bytes per event and the event mix are those of the source.
package gen

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// Stats says what Generate wrote.
type Stats struct {
	Bytes  int64
	Events int
	Copies int
}

type fieldKind int

const (
	fTS fieldKind = iota
	fID
)

type field struct {
	kind  fieldKind
	off   int // where the value starts in the event text
	end   int
	value int64 // ns for fTS, the id otherwise
	class int   // id class, for offsets
}

type event struct {
	text    []byte
	fields  []field
	once    bool // metadata and global events: written in the first copy only
	section int  // with Options.Sections: the pass that writes it
}

var idKeys = [][]byte{[]byte(`"External id": `), []byte(`"correlation": `), []byte(`"id": `),
	[]byte(`"Python id": `), []byte(`"Python parent id": `), []byte(`"Sequence number": `), []byte(`"Record function id": `)}

// Generate writes a trace of about target bytes made of copies of src's events.
func Generate(w io.Writer, src []byte, target int64) (Stats, error) {
	return generate(w, src, target, 0, false)
}

// Options choose the size and layout of a generated trace.
type Options struct {
	Target int64 // about this many bytes (when Steps is 0)
	Steps  int   // exactly this many copies
	// Sections writes the copies in Kineto's own layout for a long
	// profile: the host ops, annotations, flows and memory events of every
	// copy first, then their Python functions, then their runtime calls and
	// GPU work (a step's events are then far apart in the file). Without
	// it each copy is written whole, one after the other.
	Sections bool
}

// GenerateWith writes a trace of copies of src's events as opt says.
func GenerateWith(w io.Writer, src []byte, opt Options) (Stats, error) {
	if opt.Steps < 0 || opt.Steps == 0 && opt.Target <= 0 {
		return Stats{}, errors.New("gen: give a positive size or number of steps")
	}
	if opt.Sections && opt.Steps == 0 {
		// the number of copies must be known before the second section
		st, err := generate(io.Discard, src, opt.Target, 0, false)
		if err != nil {
			return st, err
		}
		opt.Steps = st.Copies
	}
	return generate(w, src, opt.Target, opt.Steps, opt.Sections)
}

// section is where Kineto writes an event: 0 host ops, annotations, flows
// and instants; 1 Python functions; 2 runtime calls and GPU work.
func section(text []byte) int {
	switch {
	case bytes.Contains(text, []byte(`"cat": "python_function"`)):
		return 1
	case bytes.Contains(text, []byte(`"cat": "cuda_runtime"`)), bytes.Contains(text, []byte(`"cat": "cuda_driver"`)),
		bytes.Contains(text, []byte(`"cat": "kernel"`)), bytes.Contains(text, []byte(`"cat": "gpu_memcpy"`)),
		bytes.Contains(text, []byte(`"cat": "gpu_memset"`)), bytes.Contains(text, []byte(`"cat": "gpu_user_annotation"`)),
		bytes.Contains(text, []byte(`"cat": "ac2g"`)):
		return 2
	}
	return 0
}

func generate(w io.Writer, src []byte, target int64, copies int, sections bool) (Stats, error) {
	key := []byte(`"traceEvents": [`)
	a := bytes.Index(src, key)
	z := bytes.LastIndexByte(src, ']')
	if a < 0 || z < a {
		return Stats{}, errors.New("gen: source has no traceEvents array")
	}
	header, body, tail := src[:a+len(key)], src[a+len(key):z], src[z:]
	events, err := parse(body)
	if err != nil {
		return Stats{}, err
	}
	var minTS, maxEnd int64 = 1 << 62, 0
	maxID := make([]int64, len(idKeys))
	var mainPID, mainTID []byte
	annot := false
	for _, e := range events {
		for _, f := range e.fields {
			if f.kind == fID && f.value > maxID[f.class] {
				maxID[f.class] = f.value
			}
		}
		if e.once {
			continue
		}
		ts, dur := int64(-1), int64(0)
		for _, f := range e.fields {
			if f.kind == fTS && f.class == 0 {
				ts = f.value
			}
			if f.kind == fTS && f.class == 1 {
				dur = f.value
			}
		}
		if ts >= 0 {
			minTS = min(minTS, ts)
			maxEnd = max(maxEnd, ts+dur)
		}
		// the step annotation goes on the main thread: the first user
		// annotation's (record_function runs there), else the first op's
		// (which may be an autograd thread's)
		if mainPID == nil || !annot {
			if a := bytes.Contains(e.text, []byte(`"cat": "user_annotation"`)); a || (mainPID == nil && bytes.Contains(e.text, []byte(`"cat": "cpu_op"`))) {
				mainPID = valueOf(e.text, []byte(`"pid": `))
				mainTID = valueOf(e.text, []byte(`"tid": `))
				annot = a
			}
		}
	}
	if minTS > maxEnd {
		return Stats{}, errors.New("gen: source has no timed events")
	}
	shift := maxEnd - minTS + 1_000_000
	bw := bufio.NewWriterSize(w, 1<<20)
	cw := &countWriter{w: bw}
	cw.Write(header)
	st := Stats{}
	var buf []byte
	first := true
	passes := 1
	if sections {
		passes = 3
		for i := range events {
			events[i].section = section(events[i].text)
		}
	}
	for pass := 0; pass < passes; pass++ {
		for k := 0; (copies == 0 && cw.n < target) || k < max(copies, 1); k++ {
			off := int64(k) * shift
			for _, e := range events {
				if e.once && k > 0 || sections && e.section != pass {
					continue
				}
				buf = buf[:0]
				last := 0
				for _, f := range e.fields {
					buf = append(buf, e.text[last:f.off]...)
					switch f.kind {
					case fTS:
						v := f.value
						if f.class == 0 {
							v += off
						}
						buf = appendMicros(buf, v)
					case fID:
						if f.value <= 0 {
							buf = strconv.AppendInt(buf, f.value, 10)
						} else {
							buf = strconv.AppendInt(buf, f.value+int64(k)*(maxID[f.class]+1), 10)
						}
					}
					last = f.end
				}
				buf = append(buf, e.text[last:]...)
				if !first {
					cw.Write([]byte(","))
				}
				first = false
				cw.Write(buf)
				st.Events++
			}
			if pass > 0 {
				continue
			}
			// the step annotation of this copy, on the main thread
			step := fmt.Sprintf(`
  {
    "ph": "X", "cat": "user_annotation", "name": "ProfilerStep#%d", "pid": %s, "tid": %s,
    "ts": %s, "dur": %s,
    "args": {
      "External id": %d, "Record function id": 0, "Ev Idx": 0
    }
  }`, k+1, mainPID, mainTID, appendMicros(nil, minTS+off), appendMicros(nil, maxEnd-minTS), (maxID[0]+1)*int64(k+1))
			cw.Write([]byte(","))
			cw.Write([]byte(step))
			st.Events++
			st.Copies++
		}
	}
	cw.Write([]byte("\n  "))
	cw.Write(tail)
	if err := bw.Flush(); err != nil {
		return st, err
	}
	if cw.err != nil {
		return st, cw.err
	}
	st.Bytes = cw.n
	return st, nil
}

type countWriter struct {
	w   io.Writer
	n   int64
	err error
}

func (c *countWriter) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	c.err = err
	return n, err
}

func valueOf(text, key []byte) []byte {
	i := bytes.Index(text, key)
	if i < 0 {
		return []byte("0")
	}
	v := text[i+len(key):]
	j := bytes.IndexAny(v, ",\n}")
	if j < 0 {
		return []byte("0")
	}
	return bytes.TrimSpace(v[:j])
}

// parse splits the events and finds the fields to rewrite.
func parse(body []byte) ([]event, error) {
	var out []event
	depth, inStr, esc, start := 0, false, false, -1
	for i, c := range body {
		if inStr {
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
			}
			continue
		}
		switch c {
		case '"':
			inStr = true
		case '{':
			if depth == 0 {
				start = i
			}
			depth++
		case '}':
			depth--
			if depth == 0 && start >= 0 {
				out = append(out, newEvent(body[start:i+1]))
				start = -1
			}
		}
	}
	if len(out) == 0 {
		return nil, errors.New("gen: no events in the source")
	}
	return out, nil
}

func newEvent(text []byte) event {
	e := event{text: text}
	if bytes.Contains(text, []byte(`"ph": "M"`)) || bytes.Contains(text, []byte(`"s": "g"`)) || bytes.Contains(text, []byte(`"cat": "Trace"`)) {
		e.once = true
	}
	for class, k := range [][]byte{[]byte(`"ts": `), []byte(`"dur": `)} {
		if f, ok := numField(text, k); ok {
			if v, ok := parseMicros(text[f.off:f.end]); ok {
				f.kind, f.value, f.class = fTS, v, class
				e.fields = append(e.fields, f)
			}
		}
	}
	for class, k := range idKeys {
		if f, ok := numField(text, k); ok {
			if v, err := strconv.ParseInt(string(text[f.off:f.end]), 10, 64); err == nil {
				f.kind, f.value, f.class = fID, v, class
				e.fields = append(e.fields, f)
			}
		}
	}
	// fields in text order
	for i := 1; i < len(e.fields); i++ {
		for j := i; j > 0 && e.fields[j].off < e.fields[j-1].off; j-- {
			e.fields[j], e.fields[j-1] = e.fields[j-1], e.fields[j]
		}
	}
	return e
}

func numField(text, key []byte) (field, bool) {
	i := bytes.Index(text, key)
	if i < 0 {
		return field{}, false
	}
	s := i + len(key)
	e := s
	for e < len(text) && (text[e] == '-' || text[e] == '.' || (text[e] >= '0' && text[e] <= '9')) {
		e++
	}
	if e == s {
		return field{}, false
	}
	return field{off: s, end: e}, true
}

func parseMicros(b []byte) (int64, bool) {
	ip, fp, _ := bytes.Cut(b, []byte("."))
	v, err := strconv.ParseInt(string(ip), 10, 64)
	if err != nil {
		return 0, false
	}
	ns := v * 1000
	if len(fp) > 0 {
		f := string(fp) + "000"
		x, err := strconv.ParseInt(f[:3], 10, 64)
		if err != nil {
			return 0, false
		}
		ns += x
	}
	return ns, true
}

func appendMicros(b []byte, ns int64) []byte {
	b = strconv.AppendInt(b, ns/1000, 10)
	b = append(b, '.')
	f := ns % 1000
	b = append(b, byte('0'+f/100), byte('0'+f/10%10), byte('0'+f%10))
	return b
}
