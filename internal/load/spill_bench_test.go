package load

import (
	"bufio"
	"context"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/ptscope/ptscope/internal/snapshot/snapgen"
)

var benchSnapEntries = flag.Int("hugesnap.entries", 2_000_000, "trace entries of the snapshot BenchmarkSnapshotSpilled/InMemory generate")

// benchSnapshot writes a generated snapshot (scripts/gensnapshot's
// generator) of -hugesnap.entries entries, about 100 bytes each.
func benchSnapshot(b *testing.B) string {
	p := filepath.Join(b.TempDir(), "big.pickle")
	f, err := os.Create(p)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	if err := snapgen.Write(w, snapgen.Options{Entries: *benchSnapEntries, Seed: 1}); err != nil {
		b.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	return p
}

// BenchmarkSnapshotSpilled analyses a generated snapshot with its columns
// spilled (the path of a snapshot above a quarter of the memory budget),
// against BenchmarkSnapshotInMemory on the same file: MB/s of pickle, and
// the process's peak RSS during the runs (VmHWM, reset before them; Linux).
// scripts/bench_hugesnap.sh measures a 50M-entry snapshot.
func BenchmarkSnapshotSpilled(b *testing.B) { benchSpill(b, 1) }

// BenchmarkSnapshotInMemory is BenchmarkSnapshotSpilled's file in memory.
func BenchmarkSnapshotInMemory(b *testing.B) { benchSpill(b, -1) }

func benchSpill(b *testing.B, above int64) {
	p := benchSnapshot(b)
	st, err := os.Stat(p)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(st.Size())
	resetPeakRSS()
	b.ResetTimer()
	for range b.N {
		set, err := Snapshots(context.Background(), []string{p}, SnapshotOptions{SpillAbove: above})
		if err != nil {
			b.Fatal(err)
		}
		if (set.Inputs[0].Snapshot.Arena() != nil) != (above > 0) {
			b.Fatal("spilled: wrong path")
		}
		if err := set.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if hwm := peakRSS(); hwm > 0 {
		b.ReportMetric(float64(hwm)/(1<<20), "peak-RSS-MB")
	}
}

// resetPeakRSS resets the process's VmHWM (Linux; ignored elsewhere).
func resetPeakRSS() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

var hwmRe = regexp.MustCompile(`VmHWM:\s+(\d+) kB`)

// peakRSS is the process's VmHWM in bytes, 0 if unknown.
func peakRSS() int64 {
	s, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	m := hwmRe.FindSubmatch(s)
	if m == nil {
		return 0
	}
	n, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return n << 10
}
