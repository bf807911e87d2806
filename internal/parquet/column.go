package parquet

import (
	"encoding/binary"
	"math"
	"reflect"
)

// column buffers one leaf column of the current row group: its levels,
// its values (the non-null ones), its dictionary and its statistics.
type column struct {
	path           []string
	kind           kind
	dict           bool
	maxDef, maxRep int

	levels     int      // values and nulls
	defs, reps []uint32 // when maxDef, maxRep > 0
	nulls      int64

	i32   []int32
	i64   []int64
	f64   []float64
	bools []bool
	strs  []string // plain strings

	dictIndex map[string]uint32
	dictVals  []string
	idx       []uint32 // dictionary strings

	// statistics: the least and greatest value (NaN left out)
	have       bool
	minI, maxI int64
	minF, maxF float64
	minS, maxS string
}

func (c *column) level(def, rep uint32) {
	c.levels++
	if c.maxDef > 0 {
		c.defs = append(c.defs, def)
	}
	if c.maxRep > 0 {
		c.reps = append(c.reps, rep)
	}
}

func (c *column) null(def, rep uint32) {
	c.level(def, rep)
	c.nulls++
}

// add appends the value v with its levels.
func (c *column) add(v reflect.Value, def, rep uint32) {
	c.level(def, rep)
	switch c.kind {
	case kInt32:
		x := int32(v.Int())
		c.i32 = append(c.i32, x)
		c.statInt(int64(x))
	case kInt64:
		x := v.Int()
		c.i64 = append(c.i64, x)
		c.statInt(x)
	case kDouble:
		x := v.Float()
		c.f64 = append(c.f64, x)
		if !math.IsNaN(x) {
			if !c.have || x < c.minF {
				c.minF = x
			}
			if !c.have || x > c.maxF {
				c.maxF = x
			}
			c.have = true
		}
	case kBool:
		c.bools = append(c.bools, v.Bool())
	case kString:
		s := v.String()
		if c.dict {
			i, ok := c.dictIndex[s]
			if !ok {
				if c.dictIndex == nil {
					c.dictIndex = map[string]uint32{}
				}
				i = uint32(len(c.dictVals))
				c.dictIndex[s] = i
				c.dictVals = append(c.dictVals, s)
			}
			c.idx = append(c.idx, i)
		} else {
			c.strs = append(c.strs, s)
		}
		if !c.have || s < c.minS {
			c.minS = s
		}
		if !c.have || s > c.maxS {
			c.maxS = s
		}
		c.have = true
	}
}

func (c *column) statInt(x int64) {
	if !c.have || x < c.minI {
		c.minI = x
	}
	if !c.have || x > c.maxI {
		c.maxI = x
	}
	c.have = true
}

// maxStatString is the longest string kept as a min or max statistic:
// longer ones would bloat the footer, so the chunk gets none.
const maxStatString = 256

func (c *column) stats() statistics {
	s := statistics{nulls: c.nulls}
	if !c.have {
		return s
	}
	switch c.kind {
	case kInt32:
		s.min = binary.LittleEndian.AppendUint32(nil, uint32(c.minI))
		s.max = binary.LittleEndian.AppendUint32(nil, uint32(c.maxI))
	case kInt64:
		s.min = binary.LittleEndian.AppendUint64(nil, uint64(c.minI))
		s.max = binary.LittleEndian.AppendUint64(nil, uint64(c.maxI))
	case kDouble:
		lo, hi := c.minF, c.maxF
		// zeros: the spec asks for -0 as a min and +0 as a max
		if lo == 0 {
			lo = math.Copysign(0, -1)
		}
		if hi == 0 {
			hi = 0
		}
		s.min = binary.LittleEndian.AppendUint64(nil, math.Float64bits(lo))
		s.max = binary.LittleEndian.AppendUint64(nil, math.Float64bits(hi))
	case kString:
		if len(c.minS) <= maxStatString && len(c.maxS) <= maxStatString {
			s.min, s.max = []byte(c.minS), []byte(c.maxS)
		}
	}
	return s
}

// reset empties the column for the next row group.
func (c *column) reset() {
	*c = column{path: c.path, kind: c.kind, dict: c.dict, maxDef: c.maxDef, maxRep: c.maxRep,
		defs: c.defs[:0], reps: c.reps[:0], i32: c.i32[:0], i64: c.i64[:0], f64: c.f64[:0],
		bools: c.bools[:0], strs: c.strs[:0], idx: c.idx[:0]}
	clear(c.strs[:cap(c.strs)])
}

func (c *column) physical() int32 { return c.kind.element("", 0).typ }

// valueBytes estimates the encoded size of value i, to cut pages.
func (c *column) valueBytes(i int) int {
	switch c.kind {
	case kInt32:
		return 4
	case kInt64, kDouble:
		return 8
	case kString:
		if c.dict {
			return 2
		}
		return 4 + len(c.strs[i])
	}
	return 1
}

// appendValues appends values [lo, hi) in the page's value encoding.
func (c *column) appendValues(b []byte, lo, hi int, width int) []byte {
	switch c.kind {
	case kInt32:
		return appendPlainInt32s(b, c.i32[lo:hi])
	case kInt64:
		return appendPlainInt64s(b, c.i64[lo:hi])
	case kDouble:
		return appendPlainDoubles(b, c.f64[lo:hi])
	case kBool:
		return appendPlainBools(b, c.bools[lo:hi])
	}
	if c.dict {
		b = append(b, byte(width))
		return appendHybrid(b, c.idx[lo:hi], width)
	}
	return appendPlainStrings(b, c.strs[lo:hi])
}
