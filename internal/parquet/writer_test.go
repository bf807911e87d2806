package parquet

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	pq "github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
)

var keep = flag.String("keep", "", "also write the round-trip table and its rows (JSON) into this folder, for other readers")

// The compact protocol's bytes, worked out by hand from its spec.
func TestThriftCompact(t *testing.T) {
	w := &thriftWriter{}
	w.i32(1, 2)                      // delta 1, i32: 0x15, zigzag(2) = 4
	w.i64(3, -1)                     // delta 2, i64: 0x26, zigzag(-1) = 1
	w.string(4, "ab")                // delta 1, binary: 0x18, length 2
	w.begin(20)                      // delta 16: long form 0x0c, zigzag(20) = 40
	w.bool(1, true)                  // 0x11
	w.bool(2, false)                 // 0x12
	w.end()                          // stop
	w.i32List(21, make([]int32, 16)) // delta 1, list 0x19; 16 >= 15: 0xf5, size 16
	w.b = append(w.b, 0)
	want := []byte{0x15, 0x04, 0x26, 0x01, 0x18, 2, 'a', 'b', 0x0c, 40, 0x11, 0x12, 0x00, 0x19, 0xf5, 16}
	want = append(want, make([]byte, 16)...)
	want = append(want, 0)
	if !bytes.Equal(w.b, want) {
		t.Errorf("got  % x\nwant % x", w.b, want)
	}
}

// The RLE/bit-packing hybrid's bytes, from the spec's examples.
func TestHybrid(t *testing.T) {
	cases := []struct {
		vals  []uint32
		width int
		want  []byte
	}{
		// the spec's bit-packing example: 0..7 at 3 bits
		{[]uint32{0, 1, 2, 3, 4, 5, 6, 7}, 3, []byte{0x03, 0x88, 0xc6, 0xfa}},
		// a run of 100 ones: header varint(100<<1) = c8 01, value 1
		{slices.Repeat([]uint32{1}, 100), 1, []byte{0xc8, 0x01, 0x01}},
		// 3 literals padded to a group, at 2 bits: 1 | 2<<2 | 3<<4 = 0x39, 0
		{[]uint32{1, 2, 3}, 2, []byte{0x03, 0x39, 0x00}},
		// literals, then a run of 8 that starts a group, then a literal
		{append(append([]uint32{1, 0, 1, 0, 1, 0, 1, 0}, slices.Repeat([]uint32{1}, 8)...), 0), 1,
			[]byte{0x03, 0x55, 0x10, 0x01, 0x03, 0x00}},
		// a 9-bit value in an RLE run takes 2 bytes
		{slices.Repeat([]uint32{300}, 8), 9, []byte{0x10, 0x2c, 0x01}},
	}
	for _, c := range cases {
		if got := appendHybrid(nil, c.vals, c.width); !bytes.Equal(got, c.want) {
			t.Errorf("%v at %d bits: % x, want % x", c.vals, c.width, got, c.want)
		}
	}
	if bitWidth(0) != 1 || bitWidth(1) != 1 || bitWidth(2) != 2 || bitWidth(255) != 8 || bitWidth(256) != 9 {
		t.Error("bitWidth")
	}
}

type row struct {
	I32  int32              `parquet:"i32"`
	I64  int64              `parquet:"i64"`
	F    float64            `parquet:"f"`
	B    bool               `parquet:"b"`
	S    string             `parquet:"s"`
	D    string             `parquet:"d,dict"`
	OI   *int32             `parquet:"oi,optional"`
	OL   *int64             `parquet:"ol,optional"`
	OF   *float64           `parquet:"of,optional"`
	OB   *bool              `parquet:"ob,optional"`
	OS   *string            `parquet:"os,optional,dict"`
	M    map[string]float64 `parquet:"m"`
	MI   map[string]int64   `parquet:"mi"`
	Skip int
}

func ptr[T any](v T) *T { return &v }

// rows makes n varied rows: extremes, negatives, runs of equal values,
// nulls, empty and non-ASCII strings, strings too long for statistics,
// maps with 0 to 4 entries.
func rows(n int) []row {
	out := make([]row, n)
	for i := range out {
		r := &out[i]
		r.I32 = int32(i*7919) - 1<<20
		r.I64 = int64(i) * 1e12
		if i == 3 {
			r.I32, r.I64 = math.MinInt32, math.MaxInt64
		}
		r.F = float64(i) / 7
		r.B = i%3 == 0
		r.S = strings.Repeat("é", i%5) + fmt.Sprint(i)
		if i == 10 {
			r.S = strings.Repeat("ü", 200) // the greatest, 400 bytes
		}
		r.D = []string{"activation", "gradient", "", "optimizer_state"}[(i/20)%4]
		if i%4 != 1 {
			r.OI, r.OL, r.OF = ptr(int32(-i)), ptr(int64(i)<<40), ptr(math.Copysign(0, -1)*float64(i%2))
		}
		if i%10 < 7 {
			r.OB = ptr(i%2 == 0)
			r.OS = ptr(fmt.Sprintf("rank%d", i%13))
		}
		if k := i % 5; k > 0 {
			r.M, r.MI = map[string]float64{}, map[string]int64{}
			for j := range k {
				r.M[fmt.Sprintf("k%d", j)] = float64(i*j) + 0.5
				r.MI[fmt.Sprintf("n%d", (j*3)%k)] = int64(-i * j)
			}
		}
		r.Skip = i
	}
	return out
}

func writeFile(t *testing.T, rs []row, o Options) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "t.parquet")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	w, err := NewWriter[row](f, o)
	if err != nil {
		t.Fatal(err)
	}
	for len(rs) > 0 { // in uneven batches
		n := min(len(rs), 333)
		if err := w.Write(rs[:n]); err != nil {
			t.Fatal(err)
		}
		rs = rs[n:]
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Write([]row{{}}); err == nil {
		t.Error("Write after Close: no error")
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return p
}

// Every row reads back equal with parquet-go's reader (an independent
// implementation), across row groups and pages.
func TestRoundTrip(t *testing.T) {
	in := rows(2500)
	p := writeFile(t, in, Options{RowGroupRows: 1000, pageBytes: 700})
	if *keep != "" {
		b, _ := os.ReadFile(p)
		j, _ := json.Marshal(in)
		if os.WriteFile(filepath.Join(*keep, "roundtrip.parquet"), b, 0o644) != nil || os.WriteFile(filepath.Join(*keep, "roundtrip.json"), j, 0o644) != nil {
			t.Error("-keep: cannot write")
		}
	}
	got, err := pq.ReadFile[row](p)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(in) {
		t.Fatalf("%d rows, want %d", len(got), len(in))
	}
	for i := range in {
		want := in[i]
		want.Skip = 0
		g := got[i]
		if len(want.M) == 0 && len(g.M) == 0 {
			want.M, g.M = nil, nil
		}
		if len(want.MI) == 0 && len(g.MI) == 0 {
			want.MI, g.MI = nil, nil
		}
		if !reflect.DeepEqual(g, want) {
			t.Fatalf("row %d:\n got %+v\nwant %+v", i, g, want)
		}
	}

	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	pf, err := pq.OpenFile(f, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	md := pf.Metadata()
	if md.NumRows != 2500 || len(md.RowGroups) != 3 || md.CreatedBy != "ptscope" {
		t.Errorf("%d rows in %d row groups by %q", md.NumRows, len(md.RowGroups), md.CreatedBy)
	}
	names := map[string]string{}
	for _, e := range md.Schema {
		names[e.Name] = fmt.Sprint(e.LogicalType.Value)
	}
	if names["i32"] != "INT(32,true)" || names["i64"] != "INT(64,true)" || names["s"] != "STRING" || names["m"] != "MAP" || names["key"] != "STRING" {
		t.Errorf("logical types %v", names)
	}
	rg := md.RowGroups[0]
	for _, c := range rg.Columns {
		m := c.MetaData
		col := strings.Join(m.PathInSchema, ".")
		if m.Codec != format.Zstd {
			t.Errorf("%s: codec %v", col, m.Codec)
		}
		dict := slices.Contains(m.Encoding, format.RLEDictionary)
		if dict != (col == "d" || col == "os" || col == "m.key_value.key" || col == "mi.key_value.key") {
			t.Errorf("%s: encodings %v", col, m.Encoding)
		}
		if dict && m.DictionaryPageOffset == 0 {
			t.Errorf("%s: no dictionary page", col)
		}
	}
	// statistics of the first row group (rows 0..999), computed here
	var nulls int64
	minI, maxI := int64(math.MaxInt64), int64(math.MinInt64)
	for _, r := range in[:1000] {
		if r.OL == nil {
			nulls++
			continue
		}
		minI, maxI = min(minI, *r.OL), max(maxI, *r.OL)
	}
	for _, c := range rg.Columns {
		s := c.MetaData.Statistics
		switch strings.Join(c.MetaData.PathInSchema, ".") {
		case "ol":
			if s.NullCount != nulls || int64(binary.LittleEndian.Uint64(s.MinValue)) != minI || int64(binary.LittleEndian.Uint64(s.MaxValue)) != maxI {
				t.Errorf("ol statistics %+v, want %d nulls, %d..%d", s, nulls, minI, maxI)
			}
		case "i32":
			if int32(binary.LittleEndian.Uint32(s.MinValue)) != math.MinInt32 {
				t.Errorf("i32 min % x", s.MinValue)
			}
		case "of":
			if math.Float64frombits(binary.LittleEndian.Uint64(s.MinValue)) != 0 || !math.Signbit(math.Float64frombits(binary.LittleEndian.Uint64(s.MinValue))) {
				t.Errorf("of min: want -0, got % x", s.MinValue)
			}
		case "s":
			if s.MinValue != nil || s.MaxValue != nil {
				t.Errorf("s: a 400-byte max must leave min/max out: %q", s.MaxValue)
			}
		case "d":
			if string(s.MinValue) != "" || string(s.MaxValue) != "optimizer_state" || s.MinValue == nil {
				t.Errorf("d statistics %q..%q", s.MinValue, s.MaxValue)
			}
		}
	}
	// small pages: the plain string column was cut into several
	for k, c := range rg.Columns {
		if c.MetaData.PathInSchema[0] != "s" {
			continue
		}
		pages := pf.RowGroups()[0].ColumnChunks()[k].Pages()
		n := 0
		for {
			p, err := pages.ReadPage()
			if err != nil {
				break
			}
			pq.Release(p)
			n++
		}
		pages.Close()
		if n < 5 {
			t.Errorf("the s column of 1000 rows is %d pages of at most 700 bytes", n)
		}
	}
}

// An empty table is a valid file with no row group.
func TestEmpty(t *testing.T) {
	p := writeFile(t, nil, Options{})
	got, err := pq.ReadFile[row](p)
	if err != nil || len(got) != 0 {
		t.Fatalf("%d rows, %v", len(got), err)
	}
	b, _ := os.ReadFile(p)
	if !bytes.HasPrefix(b, magic) || !bytes.HasSuffix(b, magic) {
		t.Error("magic")
	}
}

func TestSchemaErrors(t *testing.T) {
	check := func(name string, err error) {
		if err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	var b bytes.Buffer
	_, err := NewWriter[struct {
		X *int32 `parquet:"x"`
	}](&b, Options{})
	check("pointer without optional", err)
	_, err = NewWriter[struct {
		X int32 `parquet:"x,optional"`
	}](&b, Options{})
	check("optional without pointer", err)
	_, err = NewWriter[struct {
		X int64 `parquet:"x,dict"`
	}](&b, Options{})
	check("dict int", err)
	_, err = NewWriter[struct {
		X uint8 `parquet:"x"`
	}](&b, Options{})
	check("uint8", err)
	_, err = NewWriter[struct {
		X map[int]int64 `parquet:"x"`
	}](&b, Options{})
	check("int keys", err)
	_, err = NewWriter[struct{ X int }](&b, Options{})
	check("no columns", err)
	_, err = NewWriter[int](&b, Options{})
	check("not a struct", err)
}
