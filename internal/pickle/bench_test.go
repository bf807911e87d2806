package pickle

import (
	"bytes"
	"testing"

	"github.com/ptscope/ptscope/internal/snapshot/snapgen"
)

// BenchmarkDecodeSnapshot decodes a 100,000-entry generated allocator
// snapshot (about 10 MB) with a hook that turns every dict into a handle,
// as the snapshot reader's hooks do, so that the opcodes dominate.
func BenchmarkDecodeSnapshot(b *testing.B) {
	var buf bytes.Buffer
	if err := snapgen.Write(&buf, snapgen.Options{Entries: 100_000, Seed: 1}); err != nil {
		b.Fatal(err)
	}
	data := buf.Bytes()
	n := uint64(0)
	opts := Options{OnDict: func(d *Dict) (Value, bool) {
		n++
		if k, ok := d.Keys[0].Str(); !ok || k == "" {
			return Value{}, false
		}
		return Handle(n), true
	}}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeBytes(data, opts); err != nil {
			b.Fatal(err)
		}
	}
}
