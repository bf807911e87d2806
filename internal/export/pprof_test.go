package export

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/google/pprof/profile"
)

// TestPProf checks the pprof export of a real training snapshot with
// pprof itself.
func TestPProf(t *testing.T) {
	t.Parallel()
	checkPProf(t, testMemory(t), validateTorchPeak)
}

// checkPProf: `go tool pprof -top -sample_index=inuse_space` reads the
// export of m at its peak and reports as its total the peak allocated
// bytes, within 1% of what torch measured in the process (torchPeak).
func checkPProf(t *testing.T, m *Memory, torchPeak int64) {
	at, desc, err := m.Resolve(Point{Kind: AtPeak})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	sum, err := WritePProf(&buf, m, at, desc)
	if err != nil {
		t.Fatal(err)
	}
	if sum.InuseBytes != m.AllocatedAt(m.Peak) {
		t.Errorf("in-use %d B, peak allocated %d B", sum.InuseBytes, m.AllocatedAt(m.Peak))
	}
	if !within(sum.InuseBytes, torchPeak, 0.01) {
		t.Errorf("in-use %d B is not within 1%% of torch's max_memory_allocated %d B", sum.InuseBytes, torchPeak)
	}
	if sum.AllocBytes < sum.InuseBytes || sum.AllocObjects < sum.InuseObjects {
		t.Errorf("alloc totals %d B / %d below in-use %d B / %d", sum.AllocBytes, sum.AllocObjects, sum.InuseBytes, sum.InuseObjects)
	}

	// The library reads it back with the same totals.
	p, err := profile.Parse(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	var totals [4]int64
	for _, s := range p.Sample {
		for i, v := range s.Value {
			totals[i] += v
		}
		if len(s.Label["category"]) != 1 || len(s.Label["stream"]) != 1 || len(s.NumLabel["bytes"]) != 1 {
			t.Fatalf("sample labels %v %v", s.Label, s.NumLabel)
		}
	}
	if totals != [4]int64{sum.InuseObjects, sum.InuseBytes, sum.AllocObjects, sum.AllocBytes} {
		t.Errorf("parsed totals %v, summary %+v", totals, sum)
	}

	// go tool pprof, the real consumer.
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	file := filepath.Join(t.TempDir(), "mem.pb.gz")
	if err := os.WriteFile(file, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(goTool, "tool", "pprof", "-top", "-sample_index=inuse_space", "-unit=B", file).CombinedOutput()
	if err != nil {
		t.Fatalf("go tool pprof: %v\n%s", err, out)
	}
	// "Showing nodes accounting for 5538270208B, 100% of 5538270208B total"
	mt := regexp.MustCompile(`of (\d+)B total`).FindSubmatch(out)
	if mt == nil {
		t.Fatalf("no total in pprof output:\n%s", out)
	}
	total, _ := strconv.ParseInt(string(mt[1]), 10, 64)
	if total != sum.InuseBytes {
		t.Errorf("go tool pprof total %d B, want the peak %d B", total, sum.InuseBytes)
	}
	if !strings.Contains(string(out), "(transformers/") {
		t.Errorf("no Python function of transformers in the top list:\n%s", out)
	}
	t.Logf("go tool pprof -top:\n%s", firstLines(string(out), 12))
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "\n")
}
