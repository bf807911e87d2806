package snapshot

import (
	"bytes"
	"testing"

	"github.com/ptscope/ptscope/internal/snapshot/snapgen"
)

func gen1M(b *testing.B) []byte {
	var buf bytes.Buffer
	if err := snapgen.Write(&buf, snapgen.Options{Entries: 1_000_000, Seed: 1}); err != nil {
		b.Fatal(err)
	}
	return buf.Bytes()
}

// BenchmarkReadSequential1M is the streaming sequential reader.
func BenchmarkReadSequential1M(b *testing.B) {
	data := gen1M(b)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := sequential(data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReadParallel1M is the parallel reader with GOMAXPROCS workers.
func BenchmarkReadParallel1M(b *testing.B) {
	data := gen1M(b)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		s, env, err := readPickleParallelEnv(data, runtimeProcs(), minRegion, false)
		if err != nil || env.regions != 1 || s.Trace(0).Len() != 1_000_000 {
			b.Fatal(err, env.regions)
		}
	}
}
