package testfixture

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ulikunitz/xz"
)

// machinePath matches the absolute paths PyTorch records of the machine it
// ran on: a file in a Python environment (two folders or more before
// site-packages/) or in a working copy of the repository (two folders or
// more, none starting with a dot, before scripts/gpu/ or examples/).
// scripts/scrub_paths.py makes such paths relative.
var machinePath = regexp.MustCompile(`/(?:[\w.+-]+/){2,}(?:site-packages|dist-packages)/|/(?:[\w+-][\w.+-]*/){2,}(?:scripts/gpu|examples)/`)

// gpuFolder matches the GPU machine's own folders that logs and manifests of
// kept GPU results record (the checkout's copy a command ran in, its output
// folder): any absolute path under /tmp, /work, /root, /home or /opt.
// scripts/scrub_paths.py makes them "." and "$OUT".
var gpuFolder = regexp.MustCompile(`(?:^|[^\w./$-])/(?:tmp|work|root|home|opt)/`)

// TestTestdataHasNoMachinePaths reads every recorded artifact kept in the
// repository (testdata folders, the built-in sample, kept GPU results),
// decompressed, and fails on a path of the machine that recorded it.
func TestTestdataHasNoMachinePaths(t *testing.T) {
	root := Root(t)
	n := 0
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			switch d.Name() {
			case ".git", "node_modules", "fuzz", "bin":
				return filepath.SkipDir
			}
			return nil
		}
		if !recorded(rel) {
			return nil
		}
		data, err := readAll(p)
		if err != nil {
			t.Errorf("%s: %v", rel, err)
			return nil
		}
		n++
		loc := machinePath.FindIndex(data)
		if loc == nil && strings.HasPrefix(rel, "scripts/gpu/results/") {
			loc = gpuFolder.FindIndex(data)
		}
		if loc != nil {
			lo, hi := max(loc[0]-20, 0), min(loc[1]+40, len(data))
			t.Errorf("%s: a machine path at byte %d (%q): run scripts/scrub_paths.py on it", rel, loc[0], data[lo:hi])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 20 {
		t.Fatalf("read only %d recorded files; the walk misses the testdata", n)
	}
}

// recorded reports whether the repository path rel holds data recorded on a
// machine rather than code.
func recorded(rel string) bool {
	return strings.Contains(rel, "/testdata/") || strings.HasPrefix(rel, "testdata/") ||
		strings.HasPrefix(rel, "internal/cli/sample/") || strings.HasPrefix(rel, "scripts/gpu/results/")
}

// readAll returns the file's bytes, decompressed when it is xz or gzip.
func readAll(p string) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var r io.Reader = bufio.NewReaderSize(f, 1<<20) // xz reads byte by byte
	switch {
	case strings.HasSuffix(p, ".xz"):
		if r, err = xz.NewReader(r); err != nil {
			return nil, err
		}
	case strings.HasSuffix(p, ".gz"), strings.HasSuffix(p, ".tgz"):
		if r, err = gzip.NewReader(r); err != nil {
			return nil, err
		}
	}
	var b bytes.Buffer
	_, err = io.Copy(&b, io.LimitReader(r, 256<<20))
	return b.Bytes(), err
}

// scripts/scrub_paths.py rewrites a real snapshot's machine paths and only
// them: on the built-in sample with a venv and a working-copy prefix put
// back in front of its frames, the result is the sample itself, byte for
// byte (the same protocol, the same objects shared), and a file with
// nothing to scrub is left as it was.
func TestScrubPaths(t *testing.T) {
	py, err := PythonPath()
	if err != nil {
		t.Skip("python3 not found")
	}
	root := Root(t)
	sample, err := readAll(filepath.Join(root, "internal", "cli", "sample", "gpt2s_train_fp32_b4_ctx512.pickle.xz"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	orig, dirty := filepath.Join(dir, "orig.pickle"), filepath.Join(dir, "dirty.pickle")
	if err := os.WriteFile(orig, sample, 0o644); err != nil {
		t.Fatal(err)
	}
	// the paths as the GPU machine recorded them (scrub_paths' rules undone)
	undo := `import pickle, sys
def f(v, memo):
    if id(v) in memo: return memo[id(v)][1]
    if isinstance(v, str):
        w = v
        if v.startswith("site-packages/"): w = "/opt/venv/lib/python3.12/" + v
        elif v.startswith("scripts/gpu/") or v.startswith("examples/"): w = "/home/u/repo/" + v
        out = v if w == v else w
    elif isinstance(v, dict):
        out = {}; memo[id(v)] = (v, out)
        for k, x in v.items(): out[f(k, memo)] = f(x, memo)
        return out
    elif isinstance(v, list):
        out = []; memo[id(v)] = (v, out); out.extend(f(x, memo) for x in v); return out
    elif isinstance(v, tuple): out = tuple(f(x, memo) for x in v)
    else: return v
    memo[id(v)] = (v, out)
    return out
d = open(sys.argv[1], "rb").read()
open(sys.argv[2], "wb").write(pickle.dumps(f(pickle.loads(d), {}), protocol=d[1]))
`
	if out, err := exec.Command(py, "-c", undo, orig, dirty).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	before, _ := os.ReadFile(dirty)
	if !machinePath.Match(before) {
		t.Fatal("the dirtied sample holds no machine path")
	}
	script := filepath.Join(root, "scripts", "scrub_paths.py")
	out, err := exec.Command(py, script, dirty, orig).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "scrubbed "+dirty) || !strings.Contains(string(out), "unchanged "+orig) {
		t.Fatalf("%v: %s", err, out)
	}
	after, _ := os.ReadFile(dirty)
	if !bytes.Equal(after, sample) {
		t.Errorf("scrubbed: %d bytes, the sample %d; not the same bytes", len(after), len(sample))
	}
	if kept, _ := os.ReadFile(orig); !bytes.Equal(kept, sample) {
		t.Error("a file with nothing to scrub was rewritten")
	}
}
