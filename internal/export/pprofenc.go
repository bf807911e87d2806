package export

import (
	"compress/gzip"
	"io"
)

// The part of pprof's profile.proto (github.com/google/pprof, proto/
// profile.proto) that ptscope writes, and its encoder. The encoder writes
// the bytes that github.com/google/pprof/profile's Profile.Write writes for
// the same profile: the same field order, the same string table order, packed
// repeated fields only from three elements on, zero-valued optional fields
// left out, and gzip of the standard library at its default level over the
// whole message in one write (TestPProfMatchesLibrary holds it to that on
// every fixture).

// pprofProfile is a profile.proto Profile. IDs are positive and unique per
// kind; a sample's location IDs and a location's mapping and function IDs
// name entries of the profile.
type pprofProfile struct {
	SampleType        []pprofValueType
	Sample            []*pprofSample
	Mapping           []*pprofMapping
	Location          []*pprofLocation
	Function          []*pprofFunction
	TimeNanos         int64
	DurationNanos     int64
	PeriodType        pprofValueType
	Period            int64
	Comments          []string
	DefaultSampleType string
}

type pprofValueType struct{ Type, Unit string }

// pprofSample: Label and NumLabel are in key order (pprof's writer sorts
// the keys of its label maps; a key's values keep their order). Samples
// may share their label slices.
type pprofSample struct {
	Location []uint64 // location IDs, leaf first
	Value    []int64  // one per sample type
	Label    []pprofLabel
	NumLabel []pprofNumLabel
}

type pprofLabel struct{ Key, Value string }

type pprofNumLabel struct {
	Key  string
	Num  int64
	Unit string // "" for none
}

type pprofMapping struct {
	ID                                         uint64
	File                                       string
	HasFunctions, HasFilenames, HasLineNumbers bool
}

// pprofLocation has one line: ptscope's frames are never inlined.
type pprofLocation struct {
	ID       uint64
	Mapping  uint64 // mapping ID, 0 for none
	Function uint64 // function ID
	Line     int64
}

// pprofFunction: system_name is left empty (pprof would demangle a
// function whose system name equals its name as C++).
type pprofFunction struct {
	ID             uint64
	Name, Filename string
}

// writeGzip writes p as pprof reads it: the encoded profile, gzipped.
func (p *pprofProfile) writeGzip(w io.Writer) error {
	zw := gzip.NewWriter(w)
	if _, err := zw.Write(p.marshal()); err != nil {
		_ = zw.Close()
		return err
	}
	return zw.Close()
}

// Field numbers of profile.proto.
const (
	pbProfSampleType        = 1
	pbProfSample            = 2
	pbProfMapping           = 3
	pbProfLocation          = 4
	pbProfFunction          = 5
	pbProfStringTable       = 6
	pbProfTimeNanos         = 9
	pbProfDurationNanos     = 10
	pbProfPeriodType        = 11
	pbProfPeriod            = 12
	pbProfComment           = 13
	pbProfDefaultSampleType = 14

	pbValueTypeType = 1
	pbValueTypeUnit = 2

	pbSampleLocationID = 1
	pbSampleValue      = 2
	pbSampleLabel      = 3

	pbLabelKey  = 1
	pbLabelStr  = 2
	pbLabelNum  = 3
	pbLabelUnit = 4

	pbMappingID             = 1
	pbMappingFilename       = 5
	pbMappingHasFunctions   = 7
	pbMappingHasFilenames   = 8
	pbMappingHasLineNumbers = 9

	pbLocationID        = 1
	pbLocationMappingID = 2
	pbLocationLine      = 4

	pbLineFunctionID = 1
	pbLineLine       = 2

	pbFunctionID       = 1
	pbFunctionName     = 2
	pbFunctionFilename = 4
)

// protoBuf is a protobuf message being written, with the profile's string
// table.
type protoBuf struct {
	data    []byte
	strings map[string]int64
	table   []string
}

// str interns s in the string table and returns its index.
func (b *protoBuf) str(s string) int64 {
	i, ok := b.strings[s]
	if !ok {
		i = int64(len(b.table))
		b.strings[s] = i
		b.table = append(b.table, s)
	}
	return i
}

func (b *protoBuf) varint(x uint64) {
	for x >= 0x80 {
		b.data = append(b.data, byte(x)|0x80)
		x >>= 7
	}
	b.data = append(b.data, byte(x))
}

// varintField writes a varint field; int64s are written as their two's
// complement (not zigzag), as profile.proto's int64 fields are.
func (b *protoBuf) varintField(field int, x uint64) {
	b.varint(uint64(field) << 3)
	b.varint(x)
}

// opt writes a varint field unless it is zero (proto2 "optional", as pprof
// writes it).
func (b *protoBuf) opt(field int, x int64) {
	if x != 0 {
		b.varintField(field, uint64(x))
	}
}

func (b *protoBuf) flag(field int, x bool) {
	if x {
		b.varintField(field, 1)
	}
}

// int64s writes a repeated varint field, packed from three values on (as
// pprof writes it).
func (b *protoBuf) int64s(field int, xs []int64) {
	if len(xs) <= 2 {
		for _, x := range xs {
			b.varintField(field, uint64(x))
		}
		return
	}
	start := b.begin()
	for _, x := range xs {
		b.varint(uint64(x))
	}
	b.end(field, start)
}

func (b *protoBuf) uint64s(field int, xs []uint64) {
	if len(xs) <= 2 {
		for _, x := range xs {
			b.varintField(field, x)
		}
		return
	}
	start := b.begin()
	for _, x := range xs {
		b.varint(x)
	}
	b.end(field, start)
}

func (b *protoBuf) stringField(field int, s string) {
	b.varint(uint64(field)<<3 | 2)
	b.varint(uint64(len(s)))
	b.data = append(b.data, s...)
}

// begin starts a length-delimited field (a message or a packed field)
// whose key and length end writes once its content is written.
func (b *protoBuf) begin() int { return len(b.data) }

// end puts the key and length of the content written since start in front
// of it.
func (b *protoBuf) end(field int, start int) {
	n := len(b.data) - start
	var hdr [2 * 10]byte
	k := putVarint(hdr[:], uint64(field)<<3|2)
	k += putVarint(hdr[k:], uint64(n))
	b.data = append(b.data, hdr[:k]...)
	copy(b.data[start+k:], b.data[start:start+n])
	copy(b.data[start:], hdr[:k])
}

func putVarint(dst []byte, x uint64) int {
	i := 0
	for x >= 0x80 {
		dst[i] = byte(x) | 0x80
		x >>= 7
		i++
	}
	dst[i] = byte(x)
	return i + 1
}

func (b *protoBuf) valueType(field int, v pprofValueType) {
	start := b.begin()
	b.opt(pbValueTypeType, b.str(v.Type))
	b.opt(pbValueTypeUnit, b.str(v.Unit))
	b.end(field, start)
}

// marshal encodes p. Its strings are interned as they are met, which is
// the order of pprof's writer: sample types; each sample's string labels
// (key, value) then numeric labels (key, then each value's unit); mappings
// (file, build ID); functions (name, system name, filename); then the
// period type, comments and default sample type, which come after the
// string table in the message and so are interned before it is written.
func (p *pprofProfile) marshal() []byte {
	b := &protoBuf{strings: map[string]int64{}}
	b.str("")
	for _, st := range p.SampleType {
		b.valueType(pbProfSampleType, st)
	}
	for _, s := range p.Sample {
		start := b.begin()
		b.uint64s(pbSampleLocationID, s.Location)
		b.int64s(pbSampleValue, s.Value)
		for _, l := range s.Label {
			ls := b.begin()
			b.opt(pbLabelKey, b.str(l.Key))
			b.opt(pbLabelStr, b.str(l.Value))
			b.end(pbSampleLabel, ls)
		}
		for _, l := range s.NumLabel {
			ls := b.begin()
			b.opt(pbLabelKey, b.str(l.Key))
			b.opt(pbLabelNum, l.Num)
			if l.Unit != "" {
				b.opt(pbLabelUnit, b.str(l.Unit))
			}
			b.end(pbSampleLabel, ls)
		}
		b.end(pbProfSample, start)
	}
	for _, m := range p.Mapping {
		start := b.begin()
		b.opt(pbMappingID, int64(m.ID))
		b.opt(pbMappingFilename, b.str(m.File))
		b.flag(pbMappingHasFunctions, m.HasFunctions)
		b.flag(pbMappingHasFilenames, m.HasFilenames)
		b.flag(pbMappingHasLineNumbers, m.HasLineNumbers)
		b.end(pbProfMapping, start)
	}
	for _, l := range p.Location {
		start := b.begin()
		b.opt(pbLocationID, int64(l.ID))
		b.opt(pbLocationMappingID, int64(l.Mapping))
		ls := b.begin()
		b.opt(pbLineFunctionID, int64(l.Function))
		b.opt(pbLineLine, l.Line)
		b.end(pbLocationLine, ls)
		b.end(pbProfLocation, start)
	}
	for _, f := range p.Function {
		start := b.begin()
		b.opt(pbFunctionID, int64(f.ID))
		b.opt(pbFunctionName, b.str(f.Name))
		b.opt(pbFunctionFilename, b.str(f.Filename))
		b.end(pbProfFunction, start)
	}
	b.str(p.PeriodType.Type)
	b.str(p.PeriodType.Unit)
	comments := make([]int64, len(p.Comments))
	for i, c := range p.Comments {
		comments[i] = b.str(c)
	}
	defaultType := b.str(p.DefaultSampleType)
	for _, s := range b.table {
		b.stringField(pbProfStringTable, s)
	}
	b.opt(pbProfTimeNanos, p.TimeNanos)
	b.opt(pbProfDurationNanos, p.DurationNanos)
	if pt := p.PeriodType; pt.Type != "" || pt.Unit != "" {
		b.valueType(pbProfPeriodType, pt)
	}
	b.opt(pbProfPeriod, p.Period)
	b.int64s(pbProfComment, comments)
	b.varintField(pbProfDefaultSampleType, uint64(defaultType))
	return b.data
}
