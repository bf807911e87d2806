//go:build !windows

package capture

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ptscope/ptscope/internal/bundle"
)

// The live tailer follows a bundle that the command can write to: a FIFO
// planted as live.jsonl is skipped, never a hang.
func TestTailerFIFO(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, "rank0", "live.jsonl")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		tl := newTailer(dir)
		tl.poll()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the tailer blocked on a FIFO")
	}
}

// The live tailer drops a line that never ends instead of buffering it.
func TestTailerLongLine(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, "rank0", "live.jsonl")
	writeFile(t, p, strings.Repeat("x", bundle.MaxJSONLLineBytes+10))
	tl := newTailer(dir)
	tl.poll()
	if n := len(tl.partial["rank0"]); n != 0 {
		t.Errorf("partial line of %d bytes kept", n)
	}
	f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("xx\n" + `{"time_us":5,"rank":0,"step":2,"allocated_bytes":7}` + "\n")
	f.Close()
	tl.poll()
	if s := tl.last["rank0"]; s.Step != 2 || s.AllocatedBytes != 7 {
		t.Errorf("sample after the long line: %+v", s)
	}
}
