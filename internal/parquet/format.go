package parquet

// The parts of Parquet's metadata (parquet.thrift, parquet-format 2.x) this
// writer produces, with their thrift field ids, and their encoding. Only
// what a flat schema with optional columns and string-keyed maps needs.
// Reference: https://github.com/apache/parquet-format/blob/master/src/main/thrift/parquet.thrift

// Physical types.
const (
	typeBoolean   = 0
	typeInt32     = 1
	typeInt64     = 2
	typeDouble    = 5
	typeByteArray = 6
)

// Repetition types.
const (
	required = 0
	optional = 1
	repeated = 2
)

// Converted types (the annotation older readers use).
const (
	convertedUTF8  = 0
	convertedMap   = 1
	convertedInt32 = 17
	convertedInt64 = 18
)

// Logical types: the field ids of the LogicalType union's members.
const (
	logicalString = 1
	logicalMap    = 2
	logicalInt    = 10
)

// Encodings.
const (
	encPlain         = 0
	encRLE           = 3
	encRLEDictionary = 8
)

// Page types.
const (
	pageData       = 0
	pageDictionary = 2
)

const codecZstd = 6

// schemaElement is one node of the schema, flattened depth first.
type schemaElement struct {
	name        string
	typ         int32 // a physical type, or -1 for a group
	repetition  int32 // -1 for the root
	numChildren int32 // groups
	converted   int32 // -1 when none
	logical     int16 // a logicalType member, 0 when none
	intBits     int8  // logicalInt's bit width
}

func (e *schemaElement) write(w *thriftWriter) {
	w.begin(0)
	if e.typ >= 0 {
		w.i32(1, e.typ)
	}
	if e.repetition >= 0 {
		w.i32(3, e.repetition)
	}
	w.string(4, e.name)
	if e.typ < 0 {
		w.i32(5, e.numChildren)
	}
	if e.converted >= 0 {
		w.i32(6, e.converted)
	}
	if e.logical != 0 {
		w.begin(10)
		w.begin(e.logical)
		if e.logical == logicalInt {
			w.field(1, 3) // bitWidth: i8, compact type "byte"
			w.b = append(w.b, byte(e.intBits))
			w.bool(2, true) // isSigned
		}
		w.end()
		w.end()
	}
	w.end()
}

// statistics of one column chunk: min and max are PLAIN-encoded values
// (absent when the chunk has none that order), nulls counts the levels
// without a value.
type statistics struct {
	nulls    int64
	min, max []byte
}

func (s *statistics) write(w *thriftWriter, id int16) {
	w.begin(id)
	w.i64(3, s.nulls)
	if s.min != nil {
		w.binary(5, s.max)
		w.binary(6, s.min)
	}
	w.end()
}

// chunkMeta is a column chunk's ColumnMetaData.
type chunkMeta struct {
	typ            int32
	encodings      []int32
	path           []string
	numValues      int64
	uncompressed   int64 // page headers included
	compressed     int64
	dataPageOffset int64
	dictPageOffset int64 // 0: no dictionary
	stats          statistics
}

// rowGroup is a row group's metadata.
type rowGroup struct {
	chunks []chunkMeta
	rows   int64
}

// fileMeta writes the footer: FileMetaData.
func fileMeta(schema []schemaElement, groups []rowGroup, createdBy string) []byte {
	w := &thriftWriter{}
	var rows int64
	for _, g := range groups {
		rows += g.rows
	}
	w.i32(1, 2) // version
	w.list(2, ctStruct, len(schema))
	for i := range schema {
		schema[i].write(w)
	}
	w.i64(3, rows)
	w.list(4, ctStruct, len(groups))
	for _, g := range groups {
		w.begin(0)
		w.list(1, ctStruct, len(g.chunks))
		var size, compressed int64
		for i := range g.chunks {
			c := &g.chunks[i]
			start := c.dataPageOffset
			if c.dictPageOffset > 0 {
				start = c.dictPageOffset
			}
			w.begin(0)
			w.i64(2, start) // file_offset: where the chunk starts
			w.begin(3)
			w.i32(1, c.typ)
			w.i32List(2, c.encodings)
			w.stringList(3, c.path)
			w.i32(4, codecZstd)
			w.i64(5, c.numValues)
			w.i64(6, c.uncompressed)
			w.i64(7, c.compressed)
			w.i64(9, c.dataPageOffset)
			if c.dictPageOffset > 0 {
				w.i64(11, c.dictPageOffset)
			}
			c.stats.write(w, 12)
			w.end()
			w.end()
			size += c.uncompressed
			compressed += c.compressed
		}
		w.i64(2, size)
		w.i64(3, g.rows)
		if len(g.chunks) > 0 {
			first := g.chunks[0].dataPageOffset
			if g.chunks[0].dictPageOffset > 0 {
				first = g.chunks[0].dictPageOffset
			}
			w.i64(5, first)
		}
		w.i64(6, compressed)
		w.end()
	}
	w.string(6, createdBy)
	// column_orders: the type's own order for every leaf, which tells
	// readers how min and max were compared
	leaves := 0
	for _, e := range schema {
		if e.typ >= 0 {
			leaves++
		}
	}
	w.list(7, ctStruct, leaves)
	for range leaves {
		w.begin(0)
		w.begin(1) // TYPE_ORDER
		w.end()
		w.end()
	}
	w.b = append(w.b, 0)
	return w.b
}

// pageHeader writes a PageHeader: a data page (v1) with numValues levels,
// or a dictionary page of numValues entries.
func pageHeader(typ int32, uncompressed, compressed, numValues int, valueEnc int32) []byte {
	w := &thriftWriter{}
	w.i32(1, typ)
	w.i32(2, int32(uncompressed))
	w.i32(3, int32(compressed))
	if typ == pageData {
		w.begin(5)
		w.i32(1, int32(numValues))
		w.i32(2, valueEnc)
		w.i32(3, encRLE) // definition levels
		w.i32(4, encRLE) // repetition levels
		w.end()
	} else {
		w.begin(7)
		w.i32(1, int32(numValues))
		w.i32(2, encPlain)
		w.end()
	}
	w.b = append(w.b, 0)
	return w.b
}
