// Package units parses and formats byte sizes and durations the way ptscope
// shows them: binary units (KiB, MiB, GiB) for memory, ms/us for time.
package units

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Bytes formats n in binary units with three significant digits, e.g.
// "5.16 GiB", "512 B", "-1.50 MiB".
func Bytes(n int64) string {
	neg := n < 0
	u := float64(n)
	if neg {
		u = -u
	}
	var s string
	switch {
	case u < 1024:
		s = fmt.Sprintf("%d B", int64(u))
	case u < 1<<20:
		s = trim(u/1024) + " KiB"
	case u < 1<<30:
		s = trim(u/(1<<20)) + " MiB"
	case u < 1<<40:
		s = trim(u/(1<<30)) + " GiB"
	default:
		s = trim(u/(1<<40)) + " TiB"
	}
	if neg {
		return "-" + s
	}
	return s
}

// trim prints v with 3 significant digits (1.23, 12.3, 123).
func trim(v float64) string {
	switch {
	case v < 10:
		return strconv.FormatFloat(v, 'f', 2, 64)
	case v < 100:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
}

var suffixes = []struct {
	s string
	m float64
}{
	{"tib", 1 << 40}, {"gib", 1 << 30}, {"mib", 1 << 20}, {"kib", 1 << 10},
	{"tb", 1e12}, {"gb", 1e9}, {"mb", 1e6}, {"kb", 1e3},
	{"t", 1 << 40}, {"g", 1 << 30}, {"m", 1 << 20}, {"k", 1 << 10},
	{"b", 1},
}

// ParseBytes parses sizes such as "80GiB", "80 GB", "1.5g", "4096".
// Bare K/M/G/T letters are binary (as PyTorch and nvidia-smi use them);
// KB/MB/GB/TB are decimal.
func ParseBytes(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	t = strings.ReplaceAll(t, "_", "")
	mult := 1.0
	for _, suf := range suffixes {
		if strings.HasSuffix(t, suf.s) {
			t = strings.TrimSpace(strings.TrimSuffix(t, suf.s))
			mult = suf.m
			break
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, fmt.Errorf("invalid size %q (want e.g. 80GiB, 512MiB, 1.5GB)", s)
	}
	r := v * mult
	if r > math.MaxInt64/2 {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return int64(math.Round(r)), nil
}

// Duration formats a duration in ns with a unit fit for profiles:
// "812 ns", "35.2 us", "41.1 ms", "3.20 s".
func Duration(ns int64) string {
	neg := ns < 0
	u := float64(ns)
	if neg {
		u = -u
	}
	var s string
	switch {
	case u < 1e3:
		s = fmt.Sprintf("%d ns", int64(u))
	case u < 1e6:
		s = trim(u/1e3) + " us"
	case u < 1e9:
		s = trim(u/1e6) + " ms"
	default:
		s = trim(u/1e9) + " s"
	}
	if neg {
		return "-" + s
	}
	return s
}

// ParseDuration accepts Go durations ("1s", "250ms") and bare seconds ("2.5").
func ParseDuration(s string) (time.Duration, error) {
	if d, err := time.ParseDuration(strings.TrimSpace(s)); err == nil {
		return d, nil
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("invalid duration %q (want e.g. 1s, 250ms)", s)
	}
	return time.Duration(v * float64(time.Second)), nil
}

// Plural is "1 one" or the count with thousands separators and many:
// Plural(1000, "rank", "ranks") is "1,000 ranks".
func Plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return Count(int64(n)) + " " + many
}

// Count formats n with thousands separators: "8,378", "-1,234,567".
func Count(n int64) string {
	s := strconv.FormatInt(n, 10)
	digits := strings.TrimPrefix(s, "-")
	var b strings.Builder
	b.Grow(len(s) + len(digits)/3)
	if len(digits) < len(s) {
		b.WriteByte('-')
	}
	for i := 0; i < len(digits); i++ {
		if i > 0 && (len(digits)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteByte(digits[i])
	}
	return b.String()
}

// Percent formats a 0..1 ratio as "93.4%".
func Percent(r float64) string {
	if math.IsNaN(r) || math.IsInf(r, 0) {
		return "n/a"
	}
	return strconv.FormatFloat(r*100, 'f', 1, 64) + "%"
}
