package pickle

import (
	"encoding/binary"
	"math"
	"math/big"
	"strconv"
	"strings"
)

func (d *decoder) u8() (int, error) {
	b, err := d.take(1)
	if err != nil {
		return 0, err
	}
	return int(b[0]), nil
}

func (d *decoder) u16() (int, error) {
	b, err := d.take(2)
	if err != nil {
		return 0, err
	}
	return int(binary.LittleEndian.Uint16(b)), nil
}

func (d *decoder) u32() (uint32, error) {
	b, err := d.take(4)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b), nil
}

func (d *decoder) u64() (uint64, error) {
	b, err := d.take(8)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b), nil
}

func (d *decoder) length64() (int, error) {
	n, err := d.u64()
	if err != nil {
		return 0, err
	}
	if n > math.MaxInt32*4 {
		return 0, d.errf("length %d is larger than any supported value", n)
	}
	return int(n), nil
}

// decodeLong turns little-endian two's complement bytes into an int Value.
func decodeLong(b []byte) Value {
	n := len(b)
	if n == 0 {
		return Int(0)
	}
	neg := b[n-1]&0x80 != 0
	if n <= 8 {
		var u uint64
		for i := n - 1; i >= 0; i-- {
			u = u<<8 | uint64(b[i])
		}
		if neg && n < 8 {
			u |= ^uint64(0) << (8 * n) // sign-extend
		}
		return Int(int64(u))
	}
	// Wider: trim redundant sign bytes first (Python writes 2^63..2^64-1 as 9 bytes).
	if !neg {
		m := n
		for m > 0 && b[m-1] == 0 {
			m--
		}
		if m <= 8 {
			var u uint64
			for i := m - 1; i >= 0; i-- {
				u = u<<8 | uint64(b[i])
			}
			if u > math.MaxInt64 {
				return scalar(KindUint, u)
			}
			return Int(int64(u))
		}
	} else {
		m := n
		for m > 1 && b[m-1] == 0xff && b[m-2]&0x80 != 0 {
			m--
		}
		if m <= 8 {
			return decodeLong(b[:m])
		}
	}
	be := make([]byte, n)
	for i := range b {
		be[n-1-i] = b[i]
	}
	x := new(big.Int).SetBytes(be)
	if neg {
		x.Sub(x, new(big.Int).Lsh(big.NewInt(1), uint(8*n)))
	}
	return bigValue(x)
}

func parseTextInt(s string) (Value, bool) {
	s = strings.TrimSuffix(strings.TrimSpace(s), "L")
	if i, err := strconv.ParseInt(s, 0, 64); err == nil {
		return Int(i), true
	}
	if u, err := strconv.ParseUint(s, 0, 64); err == nil {
		return scalar(KindUint, u), true
	}
	x, ok := new(big.Int).SetString(s, 0)
	if !ok {
		return Value{}, false
	}
	return bigValue(x), true
}
