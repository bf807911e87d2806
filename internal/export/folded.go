package export

import (
	"bufio"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/ptscope/ptscope/internal/snapshot"
)

// FoldedSummary says what a folded-stacks export holds.
type FoldedSummary struct {
	Event int
	At    string
	Bytes int64 // sum of every line: the allocated bytes at Event
	Lines int
}

// WriteFolded writes the allocations alive just after entry at as folded
// stacks, one line per stack: "root;...;leaf BYTES", the format of
// flamegraph.pl and speedscope. The lines add up to the allocated bytes at
// that entry (at the peak: the peak). Frames read "name (path/file.py:123)";
// a stack that was not recorded is one frame, "<no stack recorded>".
func WriteFolded(w io.Writer, m *Memory, at int, atDesc string) (*FoldedSummary, error) {
	s := m.Snap
	bytes := map[snapshot.StackID]int64{}
	for k := range m.Replay.Allocs {
		a := &m.Replay.Allocs[k]
		if a.Alive(at) {
			bytes[a.Stack] += a.Size
		}
	}
	// Different stack ids always differ in their frames, but two may print
	// alike (frames differing only in what the text leaves out): merge.
	lines := map[string]int64{}
	for id, n := range bytes {
		lines[foldedStack(s, id)] += n
	}
	keys := make([]string, 0, len(lines))
	for k := range lines {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	bw := bufio.NewWriterSize(w, 1<<16)
	sum := &FoldedSummary{Event: at, At: atDesc, Lines: len(keys)}
	for _, k := range keys {
		bw.WriteString(k)
		bw.WriteByte(' ')
		bw.WriteString(strconv.FormatInt(lines[k], 10))
		bw.WriteByte('\n')
		sum.Bytes += lines[k]
	}
	return sum, bw.Flush()
}

// foldedStack renders stack id root first, frames joined by ';'.
func foldedStack(s *snapshot.Snapshot, id snapshot.StackID) string {
	if int(id) >= len(s.Stacks) || len(s.Stacks[id]) == 0 {
		return noStack
	}
	ids := s.Stacks[id]
	var b strings.Builder
	for i := len(ids) - 1; i >= 0; i-- {
		if i != len(ids)-1 {
			b.WriteByte(';')
		}
		b.WriteString(foldedFrame(s.Frames[ids[i]]))
	}
	return b.String()
}

// foldedFrame is frameText without the characters the format reserves:
// ';' separates frames and a line ends at a newline.
func foldedFrame(f snapshot.Frame) string {
	t := frameText(f)
	if strings.ContainsAny(t, ";\n\r") {
		t = strings.NewReplacer(";", ":", "\n", " ", "\r", " ").Replace(t)
	}
	return t
}
