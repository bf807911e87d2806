package load

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ptscope/ptscope/internal/snapshot/snapgen"
)

var benchWindows = flag.Int("windows.count", 12, "stack windows of BenchmarkWindowedRun's bundle")

// BenchmarkWindowedRun reads a bundle rank recorded in stack windows as one
// run: -windows.count window snapshots of 100,000 generated entries each
// (the default ring of ptscope run, so the largest a window can be), every
// one analysed, the highest analysed again with the run, and the leak
// witnessed window by window. MB/s of pickle read, and the process's peak
// RSS during the runs (VmHWM; Linux).
func BenchmarkWindowedRun(b *testing.B) {
	dir := b.TempDir()
	rank := filepath.Join(dir, "rank0")
	if err := os.MkdirAll(rank, 0o755); err != nil {
		b.Fatal(err)
	}
	var total int64
	var wins []map[string]any
	var snaps []string
	const stepUS = 100_000
	t0 := int64(1_795_000_000_000_000)
	for k := 0; k < *benchWindows; k++ {
		name := fmt.Sprintf("snapshot_window%d.pickle", k)
		p := filepath.Join(rank, name)
		f, err := os.Create(p)
		if err != nil {
			b.Fatal(err)
		}
		w := bufio.NewWriterSize(f, 1<<20)
		if err := snapgen.Write(w, snapgen.Options{Entries: 100_000, Seed: uint64(k + 1)}); err != nil {
			b.Fatal(err)
		}
		if err := w.Flush(); err != nil {
			b.Fatal(err)
		}
		st, _ := f.Stat()
		total += st.Size()
		f.Close()
		step, reason := 16<<k>>1, "periodic"
		if k == 0 {
			step, reason = -1, "setup"
		}
		wins = append(wins, map[string]any{"first_step": step, "last_step": step, "reason": reason, "snapshot": name,
			"start_time_us": t0 + int64(k)*stepUS, "end_time_us": t0 + int64(k+1)*stepUS})
		snaps = append(snaps, name)
	}
	var phases strings.Builder
	for s := 0; s < 16<<*benchWindows; s += 7 {
		fmt.Fprintf(&phases, `{"phase":"optimizer","rank":0,"step":%d,"start_time_us":%d,"end_time_us":%d,"allocated_before_bytes":%d,"allocated_after_bytes":%d,"max_allocated_before_bytes":%d,"max_allocated_after_bytes":%d}`+"\n",
			s, t0+int64(s), t0+int64(s)+1, 1<<30, 1<<30, 2<<30, 2<<30)
	}
	proc, _ := json.Marshal(map[string]any{"rank": 0, "max_allocated_bytes": 2 << 30, "snapshots": snaps,
		"history": map[string]any{"context": "alloc", "record_steps": "auto", "switchable": true, "mode": "windows"}, "stack_windows": wins})
	for name, data := range map[string][]byte{"rank0/process.json": proc, "rank0/phases.jsonl": []byte(phases.String()),
		"manifest.json": []byte(`{"schema_version":1,"name":"bench","ranks":[]}`)} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(total)
	resetPeakRSS()
	b.ResetTimer()
	for range b.N {
		set, err := Snapshots(context.Background(), []string{dir}, SnapshotOptions{SpillAbove: -1})
		if err != nil {
			b.Fatal(err)
		}
		if in := set.Report.Inputs; len(in) != 1 || len(in[0].StackWindows) != *benchWindows || len(in[0].Devices) != 1 {
			b.Fatalf("%d inputs", len(in))
		}
		set.Close()
	}
	b.StopTimer()
	if hwm := peakRSS(); hwm > 0 {
		b.ReportMetric(float64(hwm)/(1<<20), "peak-RSS-MB")
	}
}
