// Package testfixture locates test inputs: the real PyTorch artifacts in
// ../shared/fixtures beside the repository (tests skip when it is absent)
// and the repository's own testdata, with the real trainer bundles of
// testdata/bundles/trainers extracted for a test.
package testfixture

import (
	"archive/tar"
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ulikunitz/xz"
)

// Root returns the repository root (the folder holding go.mod) above the
// test's working directory.
func Root(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("testfixture: no go.mod above the working directory")
		}
		dir = parent
	}
}

// Path returns ../shared/fixtures/name relative to the repository root.
// Without the shared fixtures it falls back to the repository's copies of
// the small ones (committed so that a fresh clone tests them):
// testdata/snapshots/name.xz or testdata/traces/real/name[.xz], an .xz copy
// decompressed to a temporary file with the original bytes; it skips the
// test when none is there.
func Path(t testing.TB, name string) string {
	t.Helper()
	p := filepath.Join(Root(t), "..", "shared", "fixtures", name)
	if _, err := os.Stat(p); err == nil {
		return p
	}
	for _, dir := range [][]string{{"snapshots"}, {"traces", "real"}} {
		if c := Testdata(t, append(dir, name)...); fileExists(c) {
			return c
		}
		if c := Testdata(t, append(dir, name+".xz")...); fileExists(c) {
			return unxz(t, c, name)
		}
	}
	t.Skipf("shared fixture %s not present", name)
	return ""
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// unxz decompresses src into the test's temporary folder as name.
func unxz(t testing.TB, src, name string) string {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	r, err := xz.NewReader(bufio.NewReaderSize(in, 1<<20)) // xz reads byte by byte
	if err != nil {
		t.Fatalf("%s: %v", src, err)
	}
	dst := filepath.Join(t.TempDir(), name)
	out, err := os.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, r); err != nil {
		t.Fatalf("%s: %v", src, err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return dst
}

// Python returns the python3 interpreter for a test to run, and skips the
// test when there is none.
func Python(t testing.TB) string {
	t.Helper()
	p, err := PythonPath()
	if err != nil {
		t.Skip("python3 not found")
	}
	return p
}

// PythonPath finds python3 once. It returns the interpreter itself
// (sys.executable) when that is named python3 too: the python3 on PATH is
// often a launcher, such as a pyenv shim, a shell script that costs more
// than the interpreter's own start (about 1.5 s a run on a loaded 2-core
// machine, where the tests start Python over a hundred times).
var PythonPath = sync.OnceValues(func() (string, error) {
	p, err := exec.LookPath("python3")
	if err != nil {
		return "", err
	}
	out, err := exec.Command(p, "-c", "import sys; print(sys.executable)").Output()
	if exe := strings.TrimSpace(string(out)); err == nil && filepath.IsAbs(exe) && filepath.Base(exe) == "python3" {
		return exe, nil
	}
	return p, nil
})

// Testdata returns a path under the repository's testdata folder.
func Testdata(t testing.TB, elem ...string) string {
	t.Helper()
	return filepath.Join(append([]string{Root(t), "testdata"}, elem...)...)
}

// TrainerBundles names the real trainer bundles of
// testdata/bundles/trainers (see its README.md).
var TrainerBundles = []string{"hf_trainer", "accelerate", "lightning_roots", "lightning_manual", "ddp", "fsdp2",
	"fsdp2_sim2", "plain_accum_ckpt", "compiled", "oom", "leak"}

// TrainerBundle extracts testdata/bundles/trainers/name.tar.xz, a real
// ptscope run bundle with the facts its process measured (facts.json), into
// a temporary folder of the test and returns that folder.
func TrainerBundle(t testing.TB, name string) string {
	t.Helper()
	dir := t.TempDir()
	if err := ExtractTrainerBundle(Root(t), name, dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

// ExtractTrainerBundle extracts trainer bundle name of the repository at
// root into dir (for a package's TestMain that shares one extraction).
func ExtractTrainerBundle(root, name, dir string) error {
	return ExtractBundle(filepath.Join(root, "testdata", "bundles", "trainers", name+".tar.xz"), dir)
}

// ExtractBundle extracts a bundle packed by scripts/pack_trainer_bundles.py
// (NAME.tar.xz, the bundle's files at its root) into dir.
func ExtractBundle(archive, dir string) error {
	name := strings.TrimSuffix(filepath.Base(archive), ".tar.xz")
	f, err := os.Open(archive)
	if err != nil {
		return err
	}
	defer f.Close()
	xr, err := xz.NewReader(bufio.NewReader(f))
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	tr := tar.NewReader(xr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if h.Typeflag != tar.TypeReg || !filepath.IsLocal(h.Name) {
			continue
		}
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return fmt.Errorf("%s: %s: %w", name, h.Name, err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return err
		}
	}
}

// Facts are what a trainer's process measured about itself (facts.json of
// a trainer bundle, written by scripts/gpu/trainers/_common.py).
type Facts struct {
	Trainer              string `json:"trainer"`
	WorldSize            int    `json:"world_size"`
	MaxMemoryAllocated   int64  `json:"max_memory_allocated_bytes"`
	MaxMemoryReserved    int64  `json:"max_memory_reserved_bytes"`
	MemoryAllocatedEnd   int64  `json:"memory_allocated_end_bytes"`
	OptimizerSteps       int    `json:"optimizer_steps"`
	MicroBatches         int    `json:"micro_batches"`
	ForwardRootsPerStep  int    `json:"forward_roots_per_step"`
	ParameterBytes       int64  `json:"parameter_bytes"`
	GradientBytes        int64  `json:"gradient_bytes"`
	OptimizerStateBytes  int64  `json:"optimizer_state_bytes"`
	LeakedBytesPerStep   int64  `json:"leaked_bytes_per_step"`
	MemoryCapBytes       int64  `json:"memory_cap_bytes"`
	OOMStep              int    `json:"oom_step"`
	GradientAsBucketView bool   `json:"gradient_as_bucket_view"`
	Backend              string `json:"backend"`
	Config               string `json:"config"`
}

// ReadFacts reads facts.json of an extracted trainer bundle.
func ReadFacts(t testing.TB, dir string) Facts {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "facts.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f Facts
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatalf("%s: %v", dir, err)
	}
	return f
}

// CopyFile copies src to dst, making dst's folder.
func CopyFile(t testing.TB, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// EditJSON rewrites the JSON object in file path through edit (a
// process.json, a manifest).
func EditJSON(t testing.TB, path string, edit func(m map[string]any)) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	edit(m)
	if raw, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
}
