// Package parquet writes Parquet files of flat tables: the subset of the
// format ptscope's exports need, which DuckDB, Spark, pyarrow and
// parquet-go read. Columns are INT32, INT64, DOUBLE, BOOLEAN and UTF-8
// strings (plain or dictionary-encoded), required or optional, and maps
// from strings to those; each column chunk has a dictionary page when
// dictionary-encoded, then version 1 data pages of about 1 MiB, every
// page zstd-compressed; chunks carry null counts and min/max statistics.
//
// A Writer holds one row group in memory (Options.RowGroupRows rows),
// column by column, and writes it when full.
package parquet

import (
	"fmt"
	"io"
	"reflect"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// Options tune a Writer.
type Options struct {
	// RowGroupRows is the most rows of a row group (default 128Ki).
	RowGroupRows int64
	// CreatedBy names the writing application in the footer (default
	// "ptscope").
	CreatedBy string
	// pageBytes is the encoded size at which a data page is cut (default
	// 1 MiB); tests make it small.
	pageBytes int
}

// Writer writes rows of struct type T (see schemaOf for the tags) as one
// Parquet file.
type Writer[T any] struct {
	w      countWriter
	o      Options
	schema []schemaElement
	fields []field
	cols   []*column
	groups []rowGroup
	rows   int64 // of the current row group
	err    error
	buf    []byte
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

var magic = []byte("PAR1")

// NewWriter starts a Parquet file of rows of type T on w. A type the
// writer cannot map to columns is an error.
func NewWriter[T any](w io.Writer, o Options) (*Writer[T], error) {
	if o.RowGroupRows <= 0 {
		o.RowGroupRows = 128 << 10
	}
	if o.CreatedBy == "" {
		o.CreatedBy = "ptscope"
	}
	if o.pageBytes <= 0 {
		o.pageBytes = 1 << 20
	}
	schema, fields, cols, err := schemaOf(reflect.TypeFor[T]())
	if err != nil {
		return nil, err
	}
	pw := &Writer[T]{w: countWriter{w: w}, o: o, schema: schema, fields: fields, cols: cols}
	_, pw.err = pw.w.Write(magic)
	return pw, pw.err
}

// Write adds rows, writing a row group each time one is full.
func (w *Writer[T]) Write(rows []T) error {
	for i := range rows {
		if w.err != nil {
			return w.err
		}
		addRow(reflect.ValueOf(&rows[i]).Elem(), w.fields)
		if w.rows++; w.rows >= w.o.RowGroupRows {
			w.err = w.flush()
		}
	}
	return w.err
}

// Close writes the last row group and the footer. It does not close the
// underlying writer.
func (w *Writer[T]) Close() error {
	if w.err == nil && w.rows > 0 {
		w.err = w.flush()
	}
	if w.err != nil {
		return w.err
	}
	footer := fileMeta(w.schema, w.groups, w.o.CreatedBy)
	n := len(footer)
	footer = append(footer, byte(n), byte(n>>8), byte(n>>16), byte(n>>24))
	footer = append(footer, magic...)
	_, w.err = w.w.Write(footer)
	if w.err == nil {
		w.err = errClosed
		return nil
	}
	return w.err
}

var errClosed = fmt.Errorf("parquet: writer closed")

// flush writes the current row group, column by column.
func (w *Writer[T]) flush() error {
	g := rowGroup{rows: w.rows}
	for _, c := range w.cols {
		m, err := w.writeChunk(c)
		if err != nil {
			return err
		}
		g.chunks = append(g.chunks, m)
		c.reset()
	}
	w.groups = append(w.groups, g)
	w.rows = 0
	return nil
}

var encoder = sync.OnceValues(func() (*zstd.Encoder, error) {
	return zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
})

// writePage compresses body and writes it after its header; it returns
// the page's size before and after compression, header included.
func (w *Writer[T]) writePage(typ int32, body []byte, numValues int, valueEnc int32) (int64, int64, error) {
	enc, err := encoder()
	if err != nil {
		return 0, 0, err
	}
	z := enc.EncodeAll(body, nil)
	h := pageHeader(typ, len(body), len(z), numValues, valueEnc)
	if _, err := w.w.Write(h); err != nil {
		return 0, 0, err
	}
	if _, err := w.w.Write(z); err != nil {
		return 0, 0, err
	}
	return int64(len(h) + len(body)), int64(len(h) + len(z)), nil
}

// writeChunk writes one column chunk of the row group: the dictionary
// page, if any, then data pages cut at row boundaries once about
// pageBytes of values are in.
func (w *Writer[T]) writeChunk(c *column) (chunkMeta, error) {
	m := chunkMeta{typ: c.physical(), path: c.path, numValues: int64(c.levels), stats: c.stats()}
	dict := c.dict && len(c.dictVals) > 0
	valueEnc, width := int32(encPlain), 0
	if dict {
		m.dictPageOffset = w.w.n
		u, z, err := w.writePage(pageDictionary, appendPlainStrings(w.buf[:0], c.dictVals), len(c.dictVals), encPlain)
		if err != nil {
			return m, err
		}
		m.uncompressed += u
		m.compressed += z
		m.encodings = append(m.encodings, encPlain)
		valueEnc, width = encRLEDictionary, bitWidth(len(c.dictVals)-1)
	}
	if c.maxDef > 0 || c.maxRep > 0 {
		m.encodings = append(m.encodings, encRLE)
	}
	m.encodings = append(m.encodings, valueEnc)
	m.dataPageOffset = w.w.n
	lo, vlo := 0, 0 // levels and values written
	for lo < c.levels {
		hi, vhi, size := lo, vlo, 0
		for hi < c.levels {
			if size >= w.o.pageBytes && (c.maxRep == 0 || c.reps[hi] == 0) {
				break
			}
			if c.maxDef == 0 || c.defs[hi] == uint32(c.maxDef) {
				size += c.valueBytes(vhi)
				vhi++
			}
			hi++
		}
		b := w.buf[:0]
		if c.maxRep > 0 {
			b = appendLevels(b, c.reps[lo:hi], c.maxRep)
		}
		if c.maxDef > 0 {
			b = appendLevels(b, c.defs[lo:hi], c.maxDef)
		}
		b = c.appendValues(b, vlo, vhi, width)
		u, z, err := w.writePage(pageData, b, hi-lo, valueEnc)
		w.buf = b
		if err != nil {
			return m, err
		}
		m.uncompressed += u
		m.compressed += z
		lo, vlo = hi, vhi
	}
	return m, nil
}
