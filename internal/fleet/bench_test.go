package fleet

import (
	"context"
	"flag"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/ptscope/ptscope/internal/fleet/fleetgen"
	"github.com/ptscope/ptscope/internal/input"
)

var (
	benchRanks = flag.Int("fleet.ranks", 100, "ranks of the generated fleet in the benchmarks")
	benchSrc   = flag.String("fleet.src", "", "snapshot the benchmark fleet is made of (default: testdata's validate_gpt2tiny_fp32)")
)

// benchFleet writes the benchmark fleet once: -fleet.ranks ranks of a real
// snapshot scaled per rank (fleetgen) and a synthetic FSDP trace each. It
// returns the folder and the bytes of snapshots and of traces.
var benchFleet = sync.OnceValues(func() (string, error) {
	src := *benchSrc
	if src == "" {
		src = filepath.Join("..", "..", "testdata", "snapshots", "validate_gpt2tiny_fp32.pickle.xz")
	}
	r, err := input.NewSource(0, nil, nil).Open(src)
	if err != nil {
		return "", err
	}
	defer r.Close()
	snap, err := io.ReadAll(r)
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "fleet-bench-")
	if err != nil {
		return "", err
	}
	tempDirs = append(tempDirs, dir)
	_, err = fleetgen.Write(dir, fleetgen.Options{Ranks: *benchRanks, Snapshot: snap, Traces: true, TraceSteps: 4})
	return dir, err
})

func inputBytes(in *Inputs) int64 {
	var n int64
	for _, f := range in.Files {
		n += inputCost(f)
	}
	return n
}

// benchSummarize summarises the fleet's inputs of one kind per iteration,
// reporting MB/s of input (compressed traces count 8x, as the byte budget
// counts them) and the process's peak RSS.
func benchSummarize(b *testing.B, kind input.Kind) {
	dir, err := benchFleet()
	if err != nil {
		b.Fatal(err)
	}
	in, err := Find(nil, []string{dir}, kind)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(inputBytes(in))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rep, err := Summarize(context.Background(), "bench", in, Options{}, nil)
		if err != nil || rep.Ranks != *benchRanks {
			b.Fatalf("%v, %+v", err, rep)
		}
	}
	b.StopTimer()
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		b.ReportMetric(float64(ru.Maxrss)/1024, "peak-RSS-MB")
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N)/float64(*benchRanks), "ms/rank")
}

// BenchmarkSummarizeSnapshots is analyze over a folder of ranks:
//
//	go test -bench SummarizeSnapshots -fleet.ranks 1000 -fleet.src SNAPSHOT ./internal/fleet
func BenchmarkSummarizeSnapshots(b *testing.B) { benchSummarize(b, input.Snapshot) }

// BenchmarkSummarizeTraces is trace over a folder of ranks.
func BenchmarkSummarizeTraces(b *testing.B) { benchSummarize(b, input.Trace) }
