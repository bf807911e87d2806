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

// BenchmarkScan1M is the parallel reader's first pass (counting MEMOIZEs and
// entry starts) over every frame of a 1M-entry snapshot, on one goroutine.
func BenchmarkScan1M(b *testing.B) {
	data := gen1M(b)
	e := &parEnv{data: data, frames: frameChain(data)}
	e.action = make([]bool, 1<<16)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if s := e.scan(0, len(e.frames), e.frames[0].lo); !s.ok || s.memo == 0 {
			b.Fatalf("scan stopped early: %+v", s)
		}
	}
}
