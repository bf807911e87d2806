package load

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ptscope/ptscope/internal/input"
)

// TestMemoryTimelineInput: prof.export_memory_timeline's output (HTA's
// memory_timeline.raw.gz) named on the command line is refused by trace
// and analyze with what it is; in a folder it is skipped with a warning.
func TestMemoryTimelineInput(t *testing.T) {
	tl := filepath.Join("..", "..", "testdata", "peers", "hta", "memory_analysis", "memory_timeline.raw.gz")
	if _, err := Traces(context.Background(), []string{tl}, TraceOptions{}); err == nil || !strings.Contains(err.Error(), "prof.export_memory_timeline") ||
		!strings.Contains(err.Error(), "not a Kineto trace") {
		t.Errorf("trace: %v", err)
	}
	if _, err := Snapshots(context.Background(), []string{tl}, SnapshotOptions{}); err == nil || !strings.Contains(err.Error(), "prof.export_memory_timeline") ||
		!strings.Contains(err.Error(), "not an allocator snapshot") {
		t.Errorf("analyze: %v", err)
	}
	dir := t.TempDir()
	b, err := os.ReadFile(tl)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "step5.raw.json.gz"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	var warn bytes.Buffer
	src := input.NewSource(0, nil, &warn)
	if _, err := Traces(context.Background(), []string{dir}, TraceOptions{Source: src}); err == nil || !strings.Contains(warn.String(), "skipped 1 file of the output of prof.export_memory_timeline") {
		t.Errorf("folder: %v; warnings %q", err, warn.String())
	}
}
