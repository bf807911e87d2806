package export

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ptscope/ptscope/internal/memory"
	"github.com/ptscope/ptscope/internal/snapshot"
	"github.com/ptscope/ptscope/internal/testfixture"
)

func writeVizPickle(t *testing.T, m *Memory, w Window, minSize int64) ([]byte, *MemVizSummary) {
	t.Helper()
	var buf bytes.Buffer
	sum, err := WriteMemVizPickle(&buf, m.Snap, []MemVizDevice{{m, w}}, minSize)
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), sum
}

// TestMemVizPickleEqualsJSON: Python's own unpickler and json module read
// the two forms of each export as the same object (whole, cut to a step,
// to large allocations; expandable segments; OOM entries).
func TestMemVizPickleEqualsJSON(t *testing.T) {
	py, err := testfixture.PythonPath()
	if err != nil {
		t.Skip("no python3")
	}
	dir := t.TempDir()
	type tc struct {
		name string
		m    *Memory
		w    func(*Memory) Window
		min  int64
	}
	val := testMemory(t)
	exp := loadMemory(t, testfixture.Testdata(t, "snapshots", "expandable_gpt2_2l.pickle.xz"), 0)
	oom := loadMemory(t, testfixture.Testdata(t, "snapshots", "oom_fragmentation.pickle.xz"), 0)
	var args []string
	for _, c := range []tc{
		{"whole", val, FullWindow, 0},
		{"step", val, func(m *Memory) Window { w, _ := m.StepWindow(1, 2); return w }, 0},
		{"large", val, FullWindow, 1 << 20},
		{"expandable", exp, func(m *Memory) Window { return Window{10, m.Entries() / 2} }, 0},
		{"oom", oom, FullWindow, 0},
	} {
		w := c.w(c.m)
		j, _ := writeViz(t, c.m, w, c.min)
		p, _ := writeVizPickle(t, c.m, w, c.min)
		jp, pp := filepath.Join(dir, c.name+".json"), filepath.Join(dir, c.name+".pickle")
		os.WriteFile(jp, j, 0o644)
		os.WriteFile(pp, p, 0o644)
		args = append(args, jp, pp)
	}
	script := `
import json, pickle, sys
a = sys.argv[1:]
for i in range(0, len(a), 2):
    j = json.load(open(a[i]))
    p = pickle.load(open(a[i + 1], "rb"))
    assert j == p, a[i]
    assert len(p["segments"]) > 0 and "device_traces" in p, a[i]
print("ok", len(a) // 2)
`
	out, err := exec.Command(py, append([]string{"-c", script}, args...)...).CombinedOutput()
	if err != nil || string(out) != "ok 5\n" {
		t.Fatalf("python: %v\n%s", err, out)
	}
}

// TestMemVizPickleReadBack: ptscope's pickle reader reads the pickle
// export and analyses it to the original's peak, end state and steps; the
// file is about as small as the snapshot PyTorch wrote (frames memoized).
func TestMemVizPickleReadBack(t *testing.T) {
	m := testMemory(t)
	p, sum := writeVizPickle(t, m, FullWindow(m), 0)
	s, err := snapshot.Read(bytes.NewReader(p))
	if err != nil {
		t.Fatal(err)
	}
	a := memory.Analyze(s, 0, memory.Options{})
	orig := memory.Analyze(m.Snap, 0, memory.Options{})
	if a.Result.Peak != orig.Result.Peak || a.Result.End != orig.Result.End || len(a.Result.Steps) != len(orig.Result.Steps) ||
		sum.Entries != m.Entries() || len(s.Frames) != len(m.Snap.Frames) {
		t.Errorf("read back: peak %+v, end %+v, %d frames; original %+v, %+v, %d", a.Result.Peak, a.Result.End, len(s.Frames),
			orig.Result.Peak, orig.Result.End, len(m.Snap.Frames))
	}
	j, _ := writeViz(t, m, FullWindow(m), 0)
	if m.Snap.InputBytes > 0 && int64(len(p)) > 2*m.Snap.InputBytes {
		t.Errorf("pickle export %d B, original %d B decompressed (JSON %d B)", len(p), m.Snap.InputBytes, len(j))
	}
	t.Logf("pickle %d B, JSON %d B, original %d B", len(p), len(j), m.Snap.InputBytes)
}

// TestPickleInts: Python reads every integer encoding the tree uses
// (BININT1, BININT2, BININT, LONG1 of any length, negative values).
func TestPickleInts(t *testing.T) {
	py, err := testfixture.PythonPath()
	if err != nil {
		t.Skip("no python3")
	}
	vals := []int64{0, 255, 256, 65535, 65536, -1, -129, 1 << 31, -(1 << 31) - 1, 1 << 47, 1<<62 + 5, -1 << 63}
	var buf bytes.Buffer
	pt := newPickleTree(&buf, &snapshot.Snapshot{})
	pt.list()
	var want []string
	for _, v := range vals {
		pt.int(v)
		want = append(want, strconv.FormatInt(v, 10))
	}
	pt.uint(1<<64 - 1)
	want = append(want, "18446744073709551615")
	pt.end()
	if err := pt.flush(); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, "-c", "import pickle,sys; print(' '.join(map(str, pickle.loads(sys.stdin.buffer.read()))))")
	cmd.Stdin = bytes.NewReader(buf.Bytes())
	out, err := cmd.Output()
	if err != nil || string(bytes.TrimSpace(out)) != strings.Join(want, " ") {
		t.Errorf("python read %q (%v), want %s", out, err, strings.Join(want, " "))
	}
}
