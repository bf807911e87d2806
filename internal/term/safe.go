package term

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"io"
	"sync"
	"unicode/utf8"
)

// SafeWriter is ptscope's standard output: nothing written through it can
// drive the terminal, whatever names the inputs hold. Control bytes (C0
// but tab and newline, DEL), the C1 controls (U+0080-U+009F, which some
// terminals take as ESC [), and bytes that are not UTF-8 are written
// escaped: `\x1b`, `\u009b`, `\xff`. So a frame or kernel name holding
// ESC ] 0 ; ... BEL (set the window title) or ESC [ 2 J (clear the screen)
// prints as text. The Unicode bidirectional controls (U+202A-U+202E,
// U+2066-U+2069, U+200E, U+200F, U+061C) are escaped too: they cannot
// drive a terminal, but they reorder what it shows ("Trojan Source": a
// name holding U+202E prints reversed after it).
//
// ptscope's own colours get through: a renderer writes Mark() where an
// ANSI sequence starts with ESC (report.TextOptions.Mark), and the writer
// turns that mark, and only it, back into ESC. The mark holds 64 random
// bits drawn when the writer is made, so no input can carry it.
//
// JSON written through it stays valid and means the same: encoding/json
// escapes C0 controls and invalid UTF-8 itself, and `\u009b` is the JSON
// escape of the C1 controls it leaves raw.
type SafeWriter struct {
	mu    sync.Mutex
	w     io.Writer
	mark  []byte // ESC NUL <16 hex digits> NUL
	carry []byte // an incomplete UTF-8 sequence or mark at the end of the last Write
	out   []byte
}

// NewSafeWriter returns a SafeWriter on w.
func NewSafeWriter(w io.Writer) *SafeWriter {
	var nonce [8]byte
	rand.Read(nonce[:])
	mark := append([]byte{0x1b, 0}, hex.EncodeToString(nonce[:])...)
	return &SafeWriter{w: w, mark: append(mark, 0)}
}

// Mark is what a renderer writes instead of ESC to start one of its own
// ANSI sequences (it contains no 'm', so width counters that skip from ESC
// to the 'm' ending an SGR sequence skip it whole).
func (s *SafeWriter) Mark() string { return string(s.mark) }

// Unwrap returns the writer underneath (IsTerminal, Width and Color look
// through a SafeWriter).
func (s *SafeWriter) Unwrap() io.Writer { return s.w }

// Write escapes p (see SafeWriter) and writes it. It reports len(p) when
// everything was handed on.
func (s *SafeWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(p)
	if len(s.carry) > 0 {
		p = append(s.carry, p...)
		s.carry = nil
	}
	out := s.out[:0]
	for len(p) > 0 {
		// The run that needs nothing: printable ASCII, tab, newline.
		i := 0
		for i < len(p) {
			c := p[i]
			if c >= 0x20 && c < 0x7f || c == '\n' || c == '\t' {
				i++
				continue
			}
			break
		}
		out = append(out, p[:i]...)
		p = p[i:]
		if len(p) == 0 {
			break
		}
		c := p[0]
		switch {
		case c == 0x1b:
			if len(p) < len(s.mark) && string(p) == string(s.mark[:len(p)]) {
				s.carry = append(s.carry[:0], p...) // maybe a mark cut in two
				p = nil
				continue
			}
			if len(p) >= len(s.mark) && string(p[:len(s.mark)]) == string(s.mark) {
				out = append(out, 0x1b)
				p = p[len(s.mark):]
				continue
			}
			out = append(out, `\x1b`...)
			p = p[1:]
		case c < 0x80:
			out = append(out, '\\', 'x', hexDigit[c>>4], hexDigit[c&15])
			p = p[1:]
		default:
			r, size := utf8.DecodeRune(p)
			if r == utf8.RuneError && size <= 1 {
				if !utf8.FullRune(p) {
					s.carry = append(s.carry[:0], p...) // a sequence cut in two
					p = nil
					continue
				}
				out = append(out, '\\', 'x', hexDigit[c>>4], hexDigit[c&15])
				p = p[1:]
				continue
			}
			if r >= 0x80 && r <= 0x9f || Bidi(r) {
				out = append(out, '\\', 'u', hexDigit[r>>12], hexDigit[r>>8&15], hexDigit[r>>4&15], hexDigit[r&15])
			} else {
				out = append(out, p[:size]...)
			}
			p = p[size:]
		}
	}
	s.out = out[:0]
	if len(out) > 0 {
		if _, err := s.w.Write(out); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// Flush writes what the last Write held back (an incomplete UTF-8
// sequence or mark at its end), escaped.
func (s *SafeWriter) Flush() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.carry) == 0 {
		return nil
	}
	var out []byte
	for _, c := range s.carry {
		out = append(out, '\\', 'x', hexDigit[c>>4], hexDigit[c&15])
	}
	s.carry = nil
	_, err := s.w.Write(out)
	return err
}

const hexDigit = "0123456789abcdef"

// Bidi reports whether r is a Unicode bidirectional control (U+202A-U+202E,
// U+2066-U+2069, LRM, RLM, ALM): a name holding one prints the rest of
// its line reordered. Every escaper of text from inputs uses it.
func Bidi(r rune) bool {
	return r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069 || r == 0x200e || r == 0x200f || r == 0x061c
}

// Printable returns s as a SafeWriter writes it: control bytes, C1
// controls, bidirectional controls and bytes that are not UTF-8 escaped.
func Printable(s string) string {
	clean := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b bytes.Buffer
	w := NewSafeWriter(&b) // its random mark is in no input: every ESC is escaped
	w.Write([]byte(s))
	w.Flush()
	return b.String()
}

// unwrap returns the writer under any SafeWriter.
func unwrap(w io.Writer) io.Writer {
	for {
		u, ok := w.(interface{ Unwrap() io.Writer })
		if !ok {
			return w
		}
		w = u.Unwrap()
	}
}
