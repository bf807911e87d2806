package export

import (
	"bufio"
	"io"
	"strconv"
	"unicode/utf8"
)

// jsonw writes JSON by hand into a buffered writer: the exports write
// millions of small objects of a fixed shape, where reflection would cost
// more than the writing. The first write error sticks and ends the output.
type jsonw struct {
	w   *bufio.Writer
	buf []byte
	err error
}

func newJSONW(w io.Writer) *jsonw { return &jsonw{w: bufio.NewWriterSize(w, 1<<16)} }

// raw writes s as is.
func (j *jsonw) raw(s string) {
	if j.err == nil {
		_, j.err = j.w.WriteString(s)
	}
}

func (j *jsonw) bytes(b []byte) {
	if j.err == nil {
		_, j.err = j.w.Write(b)
	}
}

func (j *jsonw) int(v int64) {
	j.buf = strconv.AppendInt(j.buf[:0], v, 10)
	j.bytes(j.buf)
}

func (j *jsonw) uint(v uint64) {
	j.buf = strconv.AppendUint(j.buf[:0], v, 10)
	j.bytes(j.buf)
}

// str writes s as a JSON string.
func (j *jsonw) str(s string) {
	j.buf = appendJSONString(j.buf[:0], s)
	j.bytes(j.buf)
}

func (j *jsonw) flush() error {
	if j.err == nil {
		j.err = j.w.Flush()
	}
	return j.err
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s quoted as a JSON string: quotes, backslashes
// and control characters escaped, invalid UTF-8 replaced by U+FFFD.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\t':
				b = append(b, '\\', 't')
			case '\r':
				b = append(b, '\\', 'r')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
