package kineto

import (
	"encoding/binary"
	"math/bits"
)

// Word-at-a-time byte search: eight bytes are tested at once with the
// classic bit tricks. zeroBytes and lessBytes may also flag a byte above
// the first one they flag (a borrow runs up), never below it, so the
// lowest flagged byte is always exact.

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// zeroBytes flags (bit 7 of) the bytes of v that are zero.
func zeroBytes(v uint64) uint64 { return (v - ones) & ^v & highs }

// lessBytes flags the bytes of v below n (n <= 128).
func lessBytes(v uint64, n byte) uint64 { return (v - ones*uint64(n)) & ^v & highs }

// firstFlag returns the index of the lowest flagged byte of m (m != 0).
func firstFlag(m uint64) int { return bits.TrailingZeros64(m) >> 3 }

// skipStrPlain returns the first index at or after i of a quote, a
// backslash or a control character (len(data) when none).
func skipStrPlain(data []byte, i int) int {
	for ; i+8 <= len(data); i += 8 {
		v := binary.LittleEndian.Uint64(data[i:])
		if m := zeroBytes(v^('"'*ones)) | zeroBytes(v^('\\'*ones)) | lessBytes(v, 0x20); m != 0 {
			return i + firstFlag(m)
		}
	}
	for i < len(data) && strPlain[data[i]] {
		i++
	}
	return i
}

// skipKeyPlain returns the first index at or after i of a byte that
// keyTable.key does not read itself (!keyPlain: a quote, a backslash, a control
// character or a byte outside ASCII), len(data) when none.
func skipKeyPlain(data []byte, i int) int {
	for ; i+8 <= len(data); i += 8 {
		v := binary.LittleEndian.Uint64(data[i:])
		if m := zeroBytes(v^('"'*ones)) | zeroBytes(v^('\\'*ones)) | lessBytes(v, 0x20) | v&highs; m != 0 {
			return i + firstFlag(m)
		}
	}
	for i < len(data) && keyPlain[data[i]] {
		i++
	}
	return i
}

// findQuote returns the index of the first quote at or after i (len(data)
// when none).
func findQuote(data []byte, i int) int {
	for ; i+8 <= len(data); i += 8 {
		if m := zeroBytes(binary.LittleEndian.Uint64(data[i:]) ^ ('"' * ones)); m != 0 {
			return i + firstFlag(m)
		}
	}
	for i < len(data) && data[i] != '"' {
		i++
	}
	return i
}
