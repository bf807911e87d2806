package parquet

import (
	"encoding/binary"
	"math"
)

// appendHybrid appends vals with the RLE/bit-packing hybrid encoding at
// width bits per value (levels and dictionary indices): a run of 8 or more
// equal values is one RLE run, everything else bit-packed in groups of 8
// (the last group padded with zeros, which the reader's value count drops).
// Reference: https://parquet.apache.org/docs/file-format/data-pages/encodings/
func appendHybrid(b []byte, vals []uint32, width int) []byte {
	byteWidth := (width + 7) / 8
	for i := 0; i < len(vals); {
		if r := runLen(vals, i, len(vals)); r >= 8 {
			b = binary.AppendUvarint(b, uint64(r)<<1)
			for k := range byteWidth {
				b = append(b, byte(vals[i]>>(8*k)))
			}
			i += r
			continue
		}
		// groups of 8 up to the next run of 8 that starts a group
		j := i + 8
		for j < len(vals) && runLen(vals, j, 8) < 8 {
			j += 8
		}
		j = min(j, len(vals))
		groups := (j - i + 7) / 8
		b = binary.AppendUvarint(b, uint64(groups)<<1|1)
		var acc uint64
		bits := 0
		for k := range groups * 8 {
			var v uint32
			if i+k < j {
				v = vals[i+k]
			}
			acc |= uint64(v) << bits
			bits += width
			for bits >= 8 {
				b = append(b, byte(acc))
				acc >>= 8
				bits -= 8
			}
		}
		i = j
	}
	return b
}

// runLen is how many values from i on equal vals[i], at most limit.
func runLen(vals []uint32, i, limit int) int {
	n := 1
	for i+n < len(vals) && n < limit && vals[i+n] == vals[i] {
		n++
	}
	return n
}

// appendLevels appends levels as a data page (v1) stores them: the hybrid
// encoding's length (4 bytes, little endian), then the encoding.
func appendLevels(b []byte, levels []uint32, maxLevel int) []byte {
	at := len(b)
	b = append(b, 0, 0, 0, 0)
	b = appendHybrid(b, levels, bitWidth(maxLevel))
	binary.LittleEndian.PutUint32(b[at:], uint32(len(b)-at-4))
	return b
}

// bitWidth is the bits needed for values up to max, at least 1.
func bitWidth(max int) int {
	w := 1
	for max>>w > 0 {
		w++
	}
	return w
}

// PLAIN encodings.

func appendPlainBools(b []byte, vs []bool) []byte {
	for i := 0; i < len(vs); i += 8 {
		var c byte
		for k := 0; k < 8 && i+k < len(vs); k++ {
			if vs[i+k] {
				c |= 1 << k
			}
		}
		b = append(b, c)
	}
	return b
}

func appendPlainInt32s(b []byte, vs []int32) []byte {
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint32(b, uint32(v))
	}
	return b
}

func appendPlainInt64s(b []byte, vs []int64) []byte {
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint64(b, uint64(v))
	}
	return b
}

func appendPlainDoubles(b []byte, vs []float64) []byte {
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
	}
	return b
}

func appendPlainStrings(b []byte, vs []string) []byte {
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(v)))
		b = append(b, v...)
	}
	return b
}
