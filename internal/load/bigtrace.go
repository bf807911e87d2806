package load

import (
	"context"
	"io"
	"os"

	"github.com/ptscope/ptscope/internal/input"
	"github.com/ptscope/ptscope/internal/kineto"
	"github.com/ptscope/ptscope/internal/perf"
	"github.com/ptscope/ptscope/internal/units"
)

// A trace too large to hold is analysed with bounded memory by
// perf.AnalyzeStream (docs/trace.md, "Traces larger than memory"); load
// decides when, from the trace's size and the memory budget, and opens it.

// bigTraceBytes is the estimated JSON size from which a trace is streamed
// by default: a quarter of the memory budget (the in-memory path takes
// about 0.6 times the JSON size).
func bigTraceBytes(src *input.Source) int64 { return src.Budget() / 4 }

// windowEvents is the number of events a window holds: about 200 bytes of
// model and analysis each, a 16th of the budget, at most 128 MiB (two
// windows are in memory at once: one analysed, the next being built).
func windowEvents(src *input.Source) int64 { return min(src.Budget()/16, 128<<20) / 200 }

// traceSize estimates the JSON size of a trace file: its size, or ten
// times that when compressed (Kineto traces compress 10 to 20 times); -1
// when unknown (a pipe, the standard input).
func traceSize(path string) int64 { return expandedSize(path, 10) }

// expandedSize is the size of the regular file at path, times factor when
// it is compressed (gzip, zstd, ...); -1 when unknown (a pipe, the
// standard input, an error).
func expandedSize(path string, factor int64) int64 {
	st, err := os.Stat(path)
	if err != nil || !st.Mode().IsRegular() {
		return -1
	}
	f, err := os.Open(path)
	if err != nil {
		return -1
	}
	defer f.Close()
	raw := make([]byte, 6)
	n, _ := io.ReadFull(f, raw)
	if input.Detect(raw[:n]) != input.None {
		return factor * st.Size()
	}
	return st.Size()
}

// streamOptions tune the streaming path (tests force small windows).
type streamOptions struct {
	windowEvents int64 // 0: windowEvents()
	notify       func(string)
}

// streamTrace opens path and analyses it with perf.AnalyzeStream.
func streamTrace(ctx context.Context, path string, ro kineto.Options, a perf.Options, so streamOptions) (*perf.Rank, error) {
	ro.Source = input.Or(ro.Source)
	r, err := ro.Source.Open(path)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	w := so.windowEvents
	if w <= 0 {
		w = windowEvents(ro.Source)
	}
	return perf.AnalyzeStream(ctx, r, ro, a, perf.StreamOptions{Path: path, Name: input.Name(path), WindowEvents: w, Notify: so.notify})
}

// tempNote is what a spill notice adds when the temporary directory is in
// memory: the spill bounds ptscope's RSS, not the machine's memory.
func tempNote() string {
	if !inMemoryTemp() {
		return ""
	}
	return "; " + os.TempDir() + " is tmpfs, so the spill files take memory too: set TMPDIR to a directory on disk"
}

// thresholdNote names the size above which an input is streamed or
// spilled: the option's own value, or (option 0, the default) a quarter
// of the memory budget.
func thresholdNote(src *input.Source, option, above int64) string {
	if option == 0 {
		return "a quarter of " + src.BudgetNote()
	}
	return units.Bytes(above)
}
