package export

import (
	"bytes"
	"math"
	"testing"

	"github.com/google/pprof/profile"
)

// NoStack is noStack, for the external tests.
const NoStack = noStack

// TestPProfEncoderEdges holds the encoder to the library's bytes where the
// fixtures do not reach: no samples or sample types, repeated fields of
// zero, one, two and three elements (pprof packs from three on), negative
// and 64-bit values, several values of a label key, numeric labels with and
// without units, a location without mapping, empty names, a profile
// without period type, times before 1970.
func TestPProfEncoderEdges(t *testing.T) {
	t.Parallel()
	fns := []*pprofFunction{{ID: 1, Name: "f", Filename: "a.py"}, {ID: 2, Name: "", Filename: ""},
		{ID: 3, Name: "<module>", Filename: "a.py"}, {ID: 4, Name: "ünïcode (x/y.py)", Filename: "x/y.py"}}
	maps := []*pprofMapping{{ID: 1, File: "python", HasFunctions: true, HasLineNumbers: true}, {ID: 7, File: "f"}}
	locs := []*pprofLocation{{ID: 1, Mapping: 1, Function: 1, Line: 3}, {ID: 2, Function: 2},
		{ID: 3, Mapping: 7, Function: 3, Line: -1}, {ID: 9, Mapping: 1, Function: 4, Line: math.MaxInt64}}
	for i, p := range []*pprofProfile{
		{},
		{SampleType: []pprofValueType{{"x", "y"}}, Comments: []string{"one"}, TimeNanos: -5, DurationNanos: 1},
		{
			SampleType: []pprofValueType{{"inuse_objects", "count"}, {"inuse_space", "bytes"}},
			Sample: []*pprofSample{
				{Value: []int64{0, 0}},
				{Location: []uint64{1}, Value: []int64{-1, math.MinInt64}, Label: []pprofLabel{{"a", "x"}}},
				{Location: []uint64{2, 3}, Value: []int64{math.MaxInt64, 1 << 35},
					Label:    []pprofLabel{{"a", "p"}, {"a", "q"}, {"b", ""}, {"c", "x"}},
					NumLabel: []pprofNumLabel{{"bytes", 4096, "bytes"}, {"n", -3, ""}, {"n", 5, ""}}},
				{Location: []uint64{1, 2, 3, 9}, Value: []int64{1, 2},
					NumLabel: []pprofNumLabel{{"bytes", 1, "bytes"}, {"bytes", 2, ""}, {"t", 0, "ms"}}},
			},
			Mapping: maps, Location: locs, Function: fns,
			PeriodType: pprofValueType{"space", "bytes"}, Period: 1,
			Comments:          []string{"a", "b", "a"},
			DefaultSampleType: "inuse_space",
		},
		{SampleType: []pprofValueType{{"", "count"}}, PeriodType: pprofValueType{"", "ns"}, Period: -2,
			Comments: []string{"x", "y"}, DefaultSampleType: "z"},
	} {
		lib := toLibrary(p)
		if err := lib.CheckValid(); err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		var want bytes.Buffer
		if err := lib.WriteUncompressed(&want); err != nil {
			t.Fatal(err)
		}
		if got := p.marshal(); !bytes.Equal(got, want.Bytes()) {
			t.Errorf("case %d: encoded\n%x\nthe library\n%x", i, got, want.Bytes())
		}
		var gz, wantGz bytes.Buffer
		if err := p.writeGzip(&gz); err != nil {
			t.Fatal(err)
		}
		if err := toLibrary(p).Write(&wantGz); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(gz.Bytes(), wantGz.Bytes()) {
			t.Errorf("case %d: gzip differs", i)
		}
	}
}

// toLibrary is p on the library's model.
func toLibrary(p *pprofProfile) *profile.Profile {
	lp := &profile.Profile{TimeNanos: p.TimeNanos, DurationNanos: p.DurationNanos, Period: p.Period,
		Comments: p.Comments, DefaultSampleType: p.DefaultSampleType}
	for _, st := range p.SampleType {
		lp.SampleType = append(lp.SampleType, &profile.ValueType{Type: st.Type, Unit: st.Unit})
	}
	if p.PeriodType != (pprofValueType{}) {
		lp.PeriodType = &profile.ValueType{Type: p.PeriodType.Type, Unit: p.PeriodType.Unit}
	}
	maps := map[uint64]*profile.Mapping{}
	for _, m := range p.Mapping {
		lm := &profile.Mapping{ID: m.ID, File: m.File, HasFunctions: m.HasFunctions, HasFilenames: m.HasFilenames,
			HasLineNumbers: m.HasLineNumbers}
		maps[m.ID] = lm
		lp.Mapping = append(lp.Mapping, lm)
	}
	fns := map[uint64]*profile.Function{}
	for _, f := range p.Function {
		lf := &profile.Function{ID: f.ID, Name: f.Name, Filename: f.Filename}
		fns[f.ID] = lf
		lp.Function = append(lp.Function, lf)
	}
	locs := map[uint64]*profile.Location{}
	for _, l := range p.Location {
		ll := &profile.Location{ID: l.ID, Mapping: maps[l.Mapping], Line: []profile.Line{{Function: fns[l.Function], Line: l.Line}}}
		locs[l.ID] = ll
		lp.Location = append(lp.Location, ll)
	}
	for _, s := range p.Sample {
		ls := &profile.Sample{Value: s.Value}
		for _, id := range s.Location {
			ls.Location = append(ls.Location, locs[id])
		}
		for _, l := range s.Label {
			if ls.Label == nil {
				ls.Label = map[string][]string{}
			}
			ls.Label[l.Key] = append(ls.Label[l.Key], l.Value)
		}
		// a key's units: none when all are empty, else one per value
		units := map[string]bool{}
		for _, l := range s.NumLabel {
			if ls.NumLabel == nil {
				ls.NumLabel, ls.NumUnit = map[string][]int64{}, map[string][]string{}
			}
			ls.NumLabel[l.Key] = append(ls.NumLabel[l.Key], l.Num)
			units[l.Key] = units[l.Key] || l.Unit != ""
		}
		for _, l := range s.NumLabel {
			if units[l.Key] {
				ls.NumUnit[l.Key] = append(ls.NumUnit[l.Key], l.Unit)
			}
		}
		lp.Sample = append(lp.Sample, ls)
	}
	return lp
}
