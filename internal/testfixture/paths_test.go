package testfixture

import (
	"bytes"
	"compress/gzip"
	"io"
	"io/fs"
	"os"
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
		if loc := machinePath.FindIndex(data); loc != nil {
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
	var r io.Reader = f
	switch {
	case strings.HasSuffix(p, ".xz"):
		if r, err = xz.NewReader(f); err != nil {
			return nil, err
		}
	case strings.HasSuffix(p, ".gz"), strings.HasSuffix(p, ".tgz"):
		if r, err = gzip.NewReader(f); err != nil {
			return nil, err
		}
	}
	var b bytes.Buffer
	_, err = io.Copy(&b, io.LimitReader(r, 256<<20))
	return b.Bytes(), err
}
