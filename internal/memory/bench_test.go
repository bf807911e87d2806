package memory

import (
	"bytes"
	"testing"

	"github.com/ptscope/ptscope/internal/snapshot"
	"github.com/ptscope/ptscope/internal/snapshot/snapgen"
)

// BenchmarkAnalyze1M runs every analysis (replay, phases, categories, live
// set at the peak, fragmentation, findings) on a generated 1,000,000-entry
// snapshot; bytes are the pickle's size, for MB/s comparable with the decoder.
func BenchmarkAnalyze1M(b *testing.B) {
	s := snapshot1M(b)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if a := Analyze(s, 0, Options{}); a.Result.Entries != 1_000_000 {
			b.Fatal(a.Result.Entries)
		}
	}
}

// BenchmarkReplay1M is the replay alone (timelines and allocations).
func BenchmarkReplay1M(b *testing.B) {
	s := snapshot1M(b)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if r := NewReplay(s, 0); r.Timeline.Len() != 1_000_000 {
			b.Fatal(r.Timeline.Len())
		}
	}
}

// snapshot1M generates and reads a 1,000,000-entry snapshot and sets the
// benchmark's bytes to the pickle's size.
func snapshot1M(b *testing.B) *snapshot.Snapshot {
	b.Helper()
	var buf bytes.Buffer
	if err := snapgen.Write(&buf, snapgen.Options{Entries: 1_000_000, Seed: 1}); err != nil {
		b.Fatal(err)
	}
	size := int64(buf.Len())
	s, err := snapshot.Read(&buf)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(size)
	return s
}
