package kineto

import (
	"math"
	"strconv"
)

// ParseMicros parses a decimal number of microseconds (integer, fraction or
// exponent form, optionally quoted) into int64 nanoseconds without going
// through float64, rounding sub-nanosecond digits half away from zero.
func ParseMicros(b []byte) (int64, bool) {
	if len(b) >= 2 && b[0] == '"' && b[len(b)-1] == '"' {
		b = b[1 : len(b)-1]
	}
	i := 0
	neg := false
	if i < len(b) && (b[i] == '-' || b[i] == '+') {
		neg = b[i] == '-'
		i++
	}
	var mant uint64
	digits := 0
	frac := 0 // digits after the point kept in mant
	seenPoint := false
	roundUp := false
	dropped := false
	for ; i < len(b); i++ {
		c := b[i]
		if c == '.' {
			if seenPoint {
				return 0, false
			}
			seenPoint = true
			continue
		}
		if c < '0' || c > '9' {
			break
		}
		digits++
		if mant > (math.MaxInt64-9)/10 {
			// more significant digits than int64 ns can hold: keep rounding info only
			if !seenPoint {
				return 0, false
			}
			if !dropped {
				roundUp = c >= '5'
				dropped = true
			}
			continue
		}
		if seenPoint && frac >= 3 {
			// sub-nanosecond digits, unless an exponent follows; keep up to 18 significant digits
			if !dropped {
				roundUp = c >= '5'
				dropped = true
			}
			continue
		}
		mant = mant*10 + uint64(c-'0')
		if seenPoint {
			frac++
		}
	}
	if digits == 0 {
		return 0, false
	}
	exp := 0
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		eneg := false
		if i < len(b) && (b[i] == '-' || b[i] == '+') {
			eneg = b[i] == '-'
			i++
		}
		start := i
		for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
			exp = exp*10 + int(b[i]-'0')
			if exp > 40 {
				return 0, false
			}
		}
		if i == start {
			return 0, false
		}
		if eneg {
			exp = -exp
		}
		if dropped {
			// rare: exponent form with many digits; fall back to float parsing
			f, err := strconv.ParseFloat(string(b), 64)
			if err != nil || math.IsNaN(f) || math.Abs(f) > 9e15 {
				return 0, false
			}
			return int64(math.Round(f * 1000)), true
		}
	}
	if i != len(b) {
		return 0, false
	}
	// value = mant * 10^(exp - frac) us = mant * 10^(exp - frac + 3) ns
	shift := exp - frac + 3
	v := mant
	for ; shift > 0; shift-- {
		if v > math.MaxInt64/10 {
			return 0, false
		}
		v *= 10
	}
	for ; shift < 0; shift++ {
		roundUp = v%10 >= 5
		v /= 10
	}
	if roundUp {
		v++
	}
	if v > math.MaxInt64 {
		return 0, false
	}
	if neg {
		return -int64(v), true
	}
	return int64(v), true
}

// Num is a leniently parsed JSON argument: a number, or a string holding a
// decimal, hexadecimal ("0x0"), "inf" or "nan" value.
type Num struct {
	I   int64
	F   float64
	OK  bool
	Int bool // the value was an integer
}

// UnmarshalJSON implements json.Unmarshaler; it never fails.
func (n *Num) UnmarshalJSON(b []byte) error {
	*n = parseNum(b)
	return nil
}

func parseNum(b []byte) Num {
	if len(b) == 0 {
		return Num{}
	}
	if b[0] == '"' {
		if len(b) < 2 {
			return Num{}
		}
		b = b[1 : len(b)-1]
		if len(b) > 2 && b[0] == '0' && (b[1] == 'x' || b[1] == 'X') {
			u, err := strconv.ParseUint(string(b[2:]), 16, 64)
			if err != nil {
				return Num{}
			}
			return Num{I: int64(u), F: float64(u), OK: true, Int: true}
		}
	}
	// fast path: plain integer
	neg := false
	i := 0
	if len(b) > 0 && b[0] == '-' {
		neg = true
		i = 1
	}
	if i < len(b) {
		var v int64
		j := i
		for ; j < len(b) && b[j] >= '0' && b[j] <= '9' && j-i < 18; j++ {
			v = v*10 + int64(b[j]-'0')
		}
		if j == len(b) && j > i {
			if neg {
				v = -v
			}
			return Num{I: v, F: float64(v), OK: true, Int: true}
		}
	}
	switch string(b) {
	case "inf", "Infinity", "+inf":
		return Num{I: math.MaxInt64, F: math.Inf(1), OK: true}
	case "-inf", "-Infinity":
		return Num{I: math.MinInt64, F: math.Inf(-1), OK: true}
	case "nan", "NaN", "null", "true", "false", "N/A", "":
		return Num{}
	}
	if v, err := strconv.ParseInt(string(b), 10, 64); err == nil {
		return Num{I: v, F: float64(v), OK: true, Int: true}
	}
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return Num{}
	}
	n := Num{F: f, OK: true}
	if f >= math.MinInt64 && f <= math.MaxInt64 {
		n.I = int64(f)
	}
	return n
}

// timeVal is a timestamp or duration in microseconds, parsed to ns.
type timeVal struct {
	ns int64
	ok bool
}

func (t *timeVal) UnmarshalJSON(b []byte) error {
	t.ns, t.ok = ParseMicros(b)
	return nil
}

// idVal is a pid, tid or flow id: an integer or a string.
type idVal struct {
	n     int64
	s     []byte // raw string content when the value was a string
	isStr bool
	ok    bool
}

func (v *idVal) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		inner := b[1 : len(b)-1]
		// numeric strings ("123", "0x1f") are numbers
		if n := parseNum(b); n.OK && n.Int {
			v.n, v.ok = n.I, true
			return nil
		}
		v.s, v.isStr, v.ok = inner, true, true
		return nil
	}
	n := parseNum(b)
	v.n, v.ok = n.I, n.OK
	return nil
}

// rawStr keeps a JSON string as raw bytes (unescaped lazily) so that names
// can be interned without allocating.
type rawStr struct {
	b       []byte
	escaped bool
	ok      bool
}

func (r *rawStr) UnmarshalJSON(b []byte) error {
	if len(b) < 2 || b[0] != '"' {
		// non-string (number, null): keep its text
		if string(b) == "null" {
			return nil
		}
		r.b, r.ok = b, true
		return nil
	}
	inner := b[1 : len(b)-1]
	r.b, r.ok = inner, true
	for _, c := range inner {
		if c == '\\' {
			r.escaped = true
			break
		}
	}
	return nil
}

// rawJSON keeps any JSON value as raw bytes.
type rawJSON []byte

func (r *rawJSON) UnmarshalJSON(b []byte) error {
	*r = b
	return nil
}

// rawJSONOf keeps a raw value (nil when absent or null).
func rawJSONOf(b []byte) rawJSON {
	if len(b) == 0 || string(b) == "null" {
		return nil
	}
	return b
}
