// Package testfixture locates test inputs: the real PyTorch artifacts in
// ../shared/fixtures beside the repository (tests skip when it is absent)
// and the repository's own testdata.
package testfixture

import (
	"os"
	"path/filepath"
	"testing"
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

// Path returns ../shared/fixtures/name relative to the repository root,
// skipping the test when the shared fixtures are not there.
func Path(t testing.TB, name string) string {
	t.Helper()
	p := filepath.Join(Root(t), "..", "shared", "fixtures", name)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("shared fixture %s not present", name)
	}
	return p
}

// Testdata returns a path under the repository's testdata folder.
func Testdata(t testing.TB, elem ...string) string {
	t.Helper()
	return filepath.Join(append([]string{Root(t), "testdata"}, elem...)...)
}
