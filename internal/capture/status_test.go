package capture

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/ptscope/ptscope/internal/bundle"
)

func TestTailerAndStatus(t *testing.T) {
	dir := t.TempDir()
	live := filepath.Join(dir, "rank0", "live.jsonl")
	writeFile(t, live, `{"time_us":1,"rank":0,"step":3,"phase":"forward","allocated_bytes":1073741824,"reserved_bytes":2147483648,"max_allocated_bytes":1610612736,"device_used_bytes":3221225472}`+"\n"+`{"time_us":2,"ra`)
	writeFile(t, filepath.Join(dir, "rank1", "live.jsonl"), `{"time_us":1,"rank":1,"step":2,"phase":null,"allocated_bytes":512}`+"\n")
	tl := newTailer(dir)
	tl.poll()
	line := tl.statusLine()
	want := "ptscope r0 step 3 forward alloc 1.00 GiB (peak 1.50 GiB) rsv 2.00 GiB dev 3.00 GiB | r1 step 2 - alloc 512 B (peak 0 B) rsv 0 B dev 0 B"
	if line != want {
		t.Errorf("status line\n got %q\nwant %q", line, want)
	}
	// the torn line completes later: the tailer picks it up from where it stopped
	f, err := os.OpenFile(live, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`nk":0,"step":4,"phase":"backward","allocated_bytes":5,"max_allocated_bytes":4294967296}` + "\n")
	f.Close()
	tl.poll()
	if s := tl.last["rank0"]; s.Step != 4 || s.Phase != "backward" {
		t.Errorf("after append: %+v", s)
	}
	if p := tl.peak["rank0"]; p.MaxAllocatedBytes != 4294967296 || p.DeviceUsedBytes != 3221225472 || p.MaxReservedBytes != 2147483648 {
		t.Errorf("peaks %+v", p)
	}

	var buf bytes.Buffer
	res := &Result{Dir: dir, ExitCode: 128 + 9, Signal: syscall.SIGKILL, Manifest: bundle.Manifest{DurationNs: 1500000000, Ranks: []bundle.RankInfo{
		{Dir: "rank0", Rank: 0, DeviceName: "NVIDIA H100 80GB HBM3", Steps: 9, MaxAllocatedBytes: 1 << 30, Snapshots: []string{"a", "b"}, OOM: &bundle.OOM{Step: 7}},
	}}}
	writeSummary(&buf, res, tl)
	out := buf.String()
	for _, w := range []string{"(killed by signal 9, killed, 1.50 s)", "NVIDIA H100 80GB HBM3", "4.00 GiB", "3.00 GiB", "step 7", "max device used"} {
		if !strings.Contains(out, w) {
			t.Errorf("summary lacks %q:\n%s", w, out)
		}
	}
}
