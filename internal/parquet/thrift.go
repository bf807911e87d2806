package parquet

import "encoding/binary"

// Thrift's compact protocol, the encoding of Parquet's metadata (page
// headers and the file footer), write side only: field headers carry the
// delta from the previous field id, integers are zigzag varints, and a
// struct ends with a stop byte.
// Reference: https://github.com/apache/thrift/blob/master/doc/specs/thrift-compact-protocol.md

// Compact protocol type ids.
const (
	ctTrue   = 1
	ctFalse  = 2
	ctI32    = 5
	ctI64    = 6
	ctBinary = 8
	ctList   = 9
	ctStruct = 12
)

type thriftWriter struct {
	b     []byte
	last  int16   // id of the previous field of the current struct
	stack []int16 // last of the enclosing structs
}

func (w *thriftWriter) field(id int16, typ byte) {
	if d := id - w.last; d > 0 && d <= 15 {
		w.b = append(w.b, byte(d)<<4|typ)
	} else {
		w.b = append(w.b, typ)
		w.b = binary.AppendUvarint(w.b, zigzag(int64(id)))
	}
	w.last = id
}

func zigzag(v int64) uint64 { return uint64(v<<1) ^ uint64(v>>63) }

func (w *thriftWriter) i32(id int16, v int32) {
	w.field(id, ctI32)
	w.b = binary.AppendUvarint(w.b, zigzag(int64(v)))
}

func (w *thriftWriter) i64(id int16, v int64) {
	w.field(id, ctI64)
	w.b = binary.AppendUvarint(w.b, zigzag(v))
}

func (w *thriftWriter) binary(id int16, v []byte) {
	w.field(id, ctBinary)
	w.b = binary.AppendUvarint(w.b, uint64(len(v)))
	w.b = append(w.b, v...)
}

func (w *thriftWriter) string(id int16, v string) {
	w.field(id, ctBinary)
	w.b = binary.AppendUvarint(w.b, uint64(len(v)))
	w.b = append(w.b, v...)
}

func (w *thriftWriter) bool(id int16, v bool) {
	if v {
		w.field(id, ctTrue)
	} else {
		w.field(id, ctFalse)
	}
}

// begin starts a struct: a field of the current struct when id > 0, a
// list element when id is 0.
func (w *thriftWriter) begin(id int16) {
	if id > 0 {
		w.field(id, ctStruct)
	}
	w.stack = append(w.stack, w.last)
	w.last = 0
}

// end closes the struct begin started.
func (w *thriftWriter) end() {
	w.b = append(w.b, 0)
	w.last = w.stack[len(w.stack)-1]
	w.stack = w.stack[:len(w.stack)-1]
}

// list starts a list field of n elements of type elem; the caller then
// writes the elements (with begin(0)/end for structs).
func (w *thriftWriter) list(id int16, elem byte, n int) {
	w.field(id, ctList)
	if n < 15 {
		w.b = append(w.b, byte(n)<<4|elem)
	} else {
		w.b = append(w.b, 0xf0|elem)
		w.b = binary.AppendUvarint(w.b, uint64(n))
	}
}

func (w *thriftWriter) i32List(id int16, vs []int32) {
	w.list(id, ctI32, len(vs))
	for _, v := range vs {
		w.b = binary.AppendUvarint(w.b, zigzag(int64(v)))
	}
}

func (w *thriftWriter) stringList(id int16, vs []string) {
	w.list(id, ctBinary, len(vs))
	for _, v := range vs {
		w.b = binary.AppendUvarint(w.b, uint64(len(v)))
		w.b = append(w.b, v...)
	}
}
