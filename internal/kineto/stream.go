package kineto

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"encoding/json"
)

// Envelope is what surrounds the events of a trace read by a Scanner.
type Envelope struct {
	// Header is the top-level object up to the "traceEvents" key (its
	// opening brace and every key before it); Tail is what follows the
	// array's closing bracket. Both are empty for a bare event array.
	Header, Tail []byte
	BareArray    bool
	Truncated    bool     // the input ended inside the array
	Warnings     []string // damage skipped, as Read reports it
	Bytes        int64    // decompressed bytes read
}

// Scanner cuts a trace into events without decoding them, for tools that
// filter or copy events (ptscope export): it holds one chunk of the input
// at a time (Options.ChunkBytes), so its memory is bounded however large
// the trace. Damage is tolerated as Read tolerates it.
type Scanner struct {
	Envelope
	s *splitter
}

// NewScanner reads r (already decompressed) up to the first event: the
// Envelope's Header and BareArray are known when it returns. An input that
// is not a trace is an error naming the byte offset.
func NewScanner(r io.Reader, opt Options) (*Scanner, error) {
	opt = opt.withDefaults()
	sc := &Scanner{}
	sc.s = &splitter{r: r, chunk: opt.ChunkBytes, maxEvent: opt.MaxEvent, maxHeader: 64 << 20, src: opt.Source, warn: sc.warn}
	if err := sc.s.start(); err != nil {
		return nil, err
	}
	sc.Header, sc.BareArray = sc.s.header, sc.s.bareArray
	return sc, nil
}

func (sc *Scanner) warn(s string) {
	if len(sc.Warnings) < 20 {
		sc.Warnings = append(sc.Warnings, s)
	}
}

// Each calls fn with each event's raw JSON object, in file order, on the
// caller's goroutine; ev is valid only during the call. When it returns,
// the Envelope is complete. An error from fn stops the scan and is
// returned.
func (sc *Scanner) Each(ctx context.Context, fn func(ev []byte) error) error {
	s := sc.s
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		b, err := s.next()
		if err != nil {
			if err == io.EOF {
				break
			}
			if errors.Is(err, errTruncated) {
				sc.Truncated = true
				break
			}
			return err
		}
		for i := range b.starts {
			if err := fn(b.buf[b.starts[i]:b.ends[i]]); err != nil {
				return err
			}
		}
	}
	sc.Tail, sc.Bytes = s.tail, s.off
	if s.garbage > 0 {
		sc.warn(fmt.Sprintf("%d stray bytes between events were skipped", s.garbage))
	}
	if s.damaged > 0 {
		sc.warn(fmt.Sprintf("%d strings held a raw newline (unescaped quote?); they were closed at the line end", s.damaged))
	}
	if !s.bareArray && s.done && !sc.Truncated && !bytes.HasSuffix(bytes.TrimSpace(s.tail), []byte("}")) {
		sc.Truncated = true
		sc.warn(fmt.Sprintf("offset %d: input truncated after the traceEvents array", s.off))
	}
	return nil
}

// Head is what places an event in time: its phase, category, name, and
// timestamp and duration in nanoseconds (as the trace's own clock counts
// them: microseconds in the file).
type Head struct {
	Ph, Cat, Name string
	TS, Dur       int64
	HasTS, HasDur bool
}

// headWire is what encoding/json decodes for ParseHead; args are skipped.
type headWire struct {
	Ph   json.RawMessage `json:"ph"`
	Cat  json.RawMessage `json:"cat"`
	Name json.RawMessage `json:"name"`
	Ts   json.RawMessage `json:"ts"`
	Dur  json.RawMessage `json:"dur"`
}

// ParseHead decodes the head of one raw event as Scan passes it.
func ParseHead(ev []byte) (Head, error) {
	var e rawEvent
	var raw rawRefs
	var st scanState
	if scanEvent(ev, &e, &raw, &st) {
		h := Head{Ph: str(e.Ph), Cat: str(e.Cat), Name: str(e.Name)}
		h.TS, h.HasTS = e.Ts.ns, e.Ts.ok
		h.Dur, h.HasDur = e.Dur.ns, e.Dur.ok
		return h, nil
	}
	return parseHeadStdJSON(ev)
}

// parseHeadStdJSON is ParseHead with encoding/json, for the events scanEvent
// leaves to it.
func parseHeadStdJSON(ev []byte) (Head, error) {
	var w headWire
	if err := json.Unmarshal(ev, &w); err != nil {
		return Head{}, fmt.Errorf("event: %s", shortErr(err))
	}
	h := Head{Ph: str(toStr(w.Ph)), Cat: str(toStr(w.Cat)), Name: str(toStr(w.Name))}
	ts, dur := toTime(w.Ts), toTime(w.Dur)
	h.TS, h.HasTS = ts.ns, ts.ok
	h.Dur, h.HasDur = dur.ns, dur.ok
	return h, nil
}
