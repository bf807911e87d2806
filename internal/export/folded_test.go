package export

import (
	"bufio"
	"bytes"
	"strconv"
	"strings"
	"testing"
)

func TestFolded(t *testing.T) { checkFolded(t, testMemory(t), validateTorchPeak) }

// checkFolded: the folded stacks of m at the peak add up to the peak
// allocated bytes, within 1% of torch's max_memory_allocated (torchPeak),
// in lines flamegraph.pl and speedscope parse ("frame;frame;frame COUNT",
// root first); at the end of the trace they add up to what was left.
func checkFolded(t *testing.T, m *Memory, torchPeak int64) {
	at, desc, err := m.Resolve(Point{Kind: AtPeak})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	sum, err := WriteFolded(&buf, m, at, desc)
	if err != nil {
		t.Fatal(err)
	}
	total, lines := parseFolded(t, buf.Bytes())
	if total != sum.Bytes || lines != sum.Lines {
		t.Errorf("file holds %d B in %d lines, summary says %d B in %d", total, lines, sum.Bytes, sum.Lines)
	}
	if total != m.AllocatedAt(m.Peak) {
		t.Errorf("folded total %d B, peak allocated %d B", total, m.AllocatedAt(m.Peak))
	}
	if !within(total, torchPeak, 0.01) {
		t.Errorf("folded total %d B not within 1%% of torch's %d B", total, torchPeak)
	}
	// Root first: the training script's module frame starts the Python stacks.
	if !strings.HasPrefix(buf.String(), "<module> (") && !strings.Contains(buf.String(), "\n<module> (") {
		t.Errorf("no stack starts at the script's <module> frame:\n%.600s", buf.String())
	}

	// At the end of the trace the total is what was still allocated.
	var end bytes.Buffer
	n := m.Entries() - 1
	if _, err := WriteFolded(&end, m, n, "end"); err != nil {
		t.Fatal(err)
	}
	if total, _ := parseFolded(t, end.Bytes()); total != m.AllocatedAt(n) || total != m.Replay.End.Allocated {
		t.Errorf("folded total at the end %d B, allocated %d B, final blocks %d B", total, m.AllocatedAt(n), m.Replay.End.Allocated)
	}
}

// parseFolded reads folded stacks as flamegraph.pl does (the count after
// the last space) and checks every line's shape.
func parseFolded(t *testing.T, b []byte) (total int64, lines int) {
	t.Helper()
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	seen := map[string]bool{}
	for sc.Scan() {
		line := sc.Text()
		sp := strings.LastIndexByte(line, ' ')
		if sp <= 0 {
			t.Fatalf("line without a count: %q", line)
		}
		n, err := strconv.ParseInt(line[sp+1:], 10, 64)
		if err != nil || n <= 0 {
			t.Fatalf("bad count in %q", line)
		}
		stack := line[:sp]
		if seen[stack] {
			t.Fatalf("stack repeated: %q", stack)
		}
		seen[stack] = true
		for _, f := range strings.Split(stack, ";") {
			if strings.TrimSpace(f) == "" {
				t.Fatalf("empty frame in %q", line)
			}
		}
		total += n
		lines++
	}
	return total, lines
}
