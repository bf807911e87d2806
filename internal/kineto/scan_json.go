package kineto

import "bytes"

// The strict JSON (RFC 8259) primitives of scanEvent: each returns the
// index after what it read, or -1 for input that is not what it reads.

// scanInt parses the plain JSON integer at data[i] (at most 18 digits,
// no fraction or exponent) as parseNum does; ok is false for any other
// value, which the caller parses the general way.
func scanInt(data []byte, i int) (v int64, end int, ok bool) {
	j := i
	if j < len(data) && data[j] == '-' {
		j++
	}
	d := j
	for j < len(data) && data[j]-'0' <= 9 {
		v = v*10 + int64(data[j]-'0')
		j++
	}
	if n := j - d; n == 0 || n > 18 || n > 1 && data[d] == '0' {
		return 0, 0, false
	}
	if j < len(data) && (data[j] == '.' || data[j] == 'e' || data[j] == 'E') {
		return 0, 0, false
	}
	if d > i {
		v = -v
	}
	return v, j, true
}

// scanMicros parses the JSON number of microseconds at data[i] into
// nanoseconds as ParseMicros does, for the plain forms (at most 15 digits
// before the point and 3 after it, no exponent); ok is false for any
// other value, which the caller parses the general way.
func scanMicros(data []byte, i int) (ns int64, end int, ok bool) {
	j := i
	if j < len(data) && data[j] == '-' {
		j++
	}
	d := j
	var v int64
	for j < len(data) && data[j]-'0' <= 9 {
		v = v*10 + int64(data[j]-'0')
		j++
	}
	if n := j - d; n == 0 || n > 15 || n > 1 && data[d] == '0' {
		return 0, 0, false
	}
	scale := int64(1000)
	if j < len(data) && data[j] == '.' {
		j++
		f := j
		for j < len(data) && data[j]-'0' <= 9 && j-f < 3 {
			v = v*10 + int64(data[j]-'0')
			scale /= 10
			j++
		}
		if j == f {
			return 0, 0, false
		}
	}
	if j < len(data) && (data[j]-'0' <= 9 || data[j] == '.' || data[j] == 'e' || data[j] == 'E') {
		return 0, 0, false
	}
	v *= scale
	if d > i {
		v = -v
	}
	return v, j, true
}

var (
	litNull  = []byte("null")
	litTrue  = []byte("true")
	litFalse = []byte("false")
)

// keyPlain marks the bytes of a key keyTable.key reads itself: printable ASCII
// but the quote and the backslash. strPlain marks the bytes of a string
// value that need no look: all but the quote, the backslash and control
// characters (bytes outside ASCII are kept as they are, as encoding/json keeps
// them in a raw value).
var keyPlain, strPlain [256]bool

func init() {
	for c := 0x20; c < 0x80; c++ {
		keyPlain[c] = c != '"' && c != '\\'
	}
	for c := 0x20; c < 0x100; c++ {
		strPlain[c] = c != '"' && c != '\\'
	}
}

// skipWS returns the index of the first byte at or after i that is not
// JSON whitespace.
func skipWS(data []byte, i int) int {
	for i < len(data) {
		if c := data[i]; c > ' ' || c != ' ' && c != '\n' && c != '\r' && c != '\t' {
			return i
		}
		i++
	}
	return i
}

// skipValue returns the index after the JSON value at data[i], or -1 when
// it is not one (or nests deeper than maxDepth, depth counting the
// enclosing levels).
func skipValue(data []byte, i, depth int) int {
	if i >= len(data) {
		return -1
	}
	switch c := data[i]; c {
	case '"':
		return skipString(data, i)
	case '{':
		if depth >= maxDepth {
			return -1
		}
		i = skipWS(data, i+1)
		if i < len(data) && data[i] == '}' {
			return i + 1
		}
		for {
			if i >= len(data) || data[i] != '"' {
				return -1
			}
			if i = skipString(data, i); i < 0 {
				return -1
			}
			i = skipWS(data, i)
			if i >= len(data) || data[i] != ':' {
				return -1
			}
			if i = skipValue(data, skipWS(data, i+1), depth+1); i < 0 {
				return -1
			}
			i = skipWS(data, i)
			if i >= len(data) {
				return -1
			}
			switch data[i] {
			case ',':
				i = skipWS(data, i+1)
			case '}':
				return i + 1
			default:
				return -1
			}
		}
	case '[':
		if depth >= maxDepth {
			return -1
		}
		i = skipWS(data, i+1)
		if i < len(data) && data[i] == ']' {
			return i + 1
		}
		for {
			if i = skipValue(data, i, depth+1); i < 0 {
				return -1
			}
			i = skipWS(data, i)
			if i >= len(data) {
				return -1
			}
			switch data[i] {
			case ',':
				i = skipWS(data, i+1)
			case ']':
				return i + 1
			default:
				return -1
			}
		}
	case 'n':
		return skipLit(data, i, litNull)
	case 't':
		return skipLit(data, i, litTrue)
	case 'f':
		return skipLit(data, i, litFalse)
	default:
		if c == '-' || c >= '0' && c <= '9' {
			return skipNumber(data, i)
		}
		return -1
	}
}

func skipLit(data []byte, i int, lit []byte) int {
	if !bytes.HasPrefix(data[i:], lit) {
		return -1
	}
	return i + len(lit)
}

// skipString returns the index after the string at data[i] ('"'), or -1
// for a string that is not closed, holds a control character or an
// invalid escape.
func skipString(data []byte, i int) int {
	end, _ := scanString(data, i)
	return end
}

// scanString is skipString that also tells whether the string holds an
// escape.
func scanString(data []byte, i int) (end int, escaped bool) {
	i++
	for {
		i = skipStrPlain(data, i)
		if i >= len(data) {
			return -1, false
		}
		switch data[i] {
		case '"':
			return i + 1, escaped
		case '\\':
			escaped = true
			if i+1 >= len(data) {
				return -1, false
			}
			switch data[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(data) {
					return -1, false
				}
				for _, h := range data[i+2 : i+6] {
					if !isHex(h) {
						return -1, false
					}
				}
				i += 6
			default:
				return -1, false
			}
		default: // a control character
			return -1, false
		}
	}
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// skipNumber returns the index after the JSON number at data[i], or -1.
func skipNumber(data []byte, i int) int {
	if data[i] == '-' {
		i++
	}
	switch {
	case i >= len(data):
		return -1
	case data[i] == '0':
		i++
	case data[i] >= '1' && data[i] <= '9':
		i = skipDigits(data, i+1)
	default:
		return -1
	}
	if i < len(data) && data[i] == '.' {
		j := skipDigits(data, i+1)
		if j == i+1 {
			return -1
		}
		i = j
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		i++
		if i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		j := skipDigits(data, i)
		if j == i {
			return -1
		}
		i = j
	}
	return i
}

func skipDigits(data []byte, i int) int {
	for i < len(data) && data[i] >= '0' && data[i] <= '9' {
		i++
	}
	return i
}
