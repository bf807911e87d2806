package rundir

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestSanitizeName(t *testing.T) {
	cases := map[string]string{
		"gpt2s_train_fp32_b4_ctx512.pickle": "gpt2s_train_fp32_b4_ctx512.pickle",
		"my run (rank 0)":                   "my_run_rank_0",
		"../../etc/passwd":                  "etc_passwd",
		"":                                  "run",
		"...":                               "run",
		"日本語":                               "run",
		"a//b\\c":                           "a_b_c",
		"__x__":                             "x",
		strings.Repeat("a", 100):            strings.Repeat("a", 64),
		strings.Repeat("a", 63) + "_b":      strings.Repeat("a", 63),
	}
	for in, want := range cases {
		if got := SanitizeName(in); got != want {
			t.Errorf("SanitizeName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestNewRunDir(t *testing.T) {
	out := filepath.Join(t.TempDir(), "runs") // created on demand
	now := time.Date(2026, 11, 21, 15, 4, 5, 0, time.Local)

	dir1, err := newRunDir(out, "snap shot", now)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(out, "20261121_150405_snap_shot"); dir1 != want {
		t.Fatalf("dir %q, want %q", dir1, want)
	}
	checkLatest(t, out, "20261121_150405_snap_shot")

	// Same second, same name: _2, then _3; latest follows.
	dir2, err := newRunDir(out, "snap shot", now)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(dir2) != "20261121_150405_snap_shot_2" {
		t.Fatalf("second dir %q", dir2)
	}
	checkLatest(t, out, "20261121_150405_snap_shot_2")
	dir3, _ := newRunDir(out, "snap shot", now)
	if filepath.Base(dir3) != "20261121_150405_snap_shot_3" {
		t.Fatalf("third dir %q", dir3)
	}
	checkLatest(t, out, "20261121_150405_snap_shot_3")

	// A file written through latest lands in the newest folder.
	if err := os.WriteFile(filepath.Join(out, LatestName, "x.txt"), []byte("hi"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir3, "x.txt")); err != nil {
		t.Errorf("write through latest: %v", err)
	}
	// No temporary files are left behind.
	ents, _ := os.ReadDir(out)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("left over %s", e.Name())
		}
	}
}

func checkLatest(t *testing.T, out, want string) {
	t.Helper()
	target, err := os.Readlink(filepath.Join(out, LatestName))
	if err != nil {
		t.Fatalf("latest is not a symlink: %v", err)
	}
	if target != want {
		t.Errorf("latest -> %q, want %q (relative)", target, want)
	}
}

// TestNewRunDirReplacesLatestFile: a text-file latest (left by a system
// without symlinks) is replaced by a link.
func TestNewRunDirReplacesLatestFile(t *testing.T) {
	out := t.TempDir()
	if err := os.WriteFile(filepath.Join(out, LatestName), []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir, err := NewRunDir(out, "x")
	if err != nil {
		t.Fatal(err)
	}
	checkLatest(t, out, filepath.Base(dir))
	if !strings.HasSuffix(dir, "_x") || len(filepath.Base(dir)) != len("20060102_150405_x") {
		t.Errorf("dir %q does not match YYYYMMDD_HHMMSS_x", dir)
	}
}

func TestPointLatestFallbackFile(t *testing.T) {
	out := t.TempDir()
	noLinks := func(string, string) error { return errors.New("symlinks not supported") }
	for _, target := range []string{"20260101_000000_a", "20260101_000001_b"} {
		if err := os.Mkdir(filepath.Join(out, target), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := pointLatest(out, target, noLinks); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(out, LatestName))
		if err != nil || string(b) != target+"\n" {
			t.Errorf("latest file = %q, %v; want %q", b, err, target)
		}
	}
	// Once symlinks work again, the file is replaced by a link.
	if err := pointLatest(out, "20260101_000000_a", os.Symlink); err != nil {
		t.Fatal(err)
	}
	checkLatest(t, out, "20260101_000000_a")
}

func TestNewRunDirLatestIsFolder(t *testing.T) {
	out := t.TempDir()
	if err := os.Mkdir(filepath.Join(out, LatestName), 0o755); err != nil {
		t.Fatal(err)
	}
	dir, err := NewRunDir(out, "x")
	if err == nil {
		t.Fatal("no error when latest is a folder")
	}
	if dir == "" {
		t.Error("run folder path not returned with the latest error")
	} else if fi, serr := os.Stat(dir); serr != nil || !fi.IsDir() {
		t.Errorf("run folder not created: %v", serr)
	}
}

func TestNewRunDirErrors(t *testing.T) {
	if _, err := NewRunDir("", "x"); err == nil {
		t.Error("empty outDir accepted")
	}
	f := filepath.Join(t.TempDir(), "file")
	os.WriteFile(f, nil, 0o644)
	if _, err := NewRunDir(f, "x"); err == nil {
		t.Error("outDir that is a file accepted")
	}
}

// TestNewRunDirConcurrent: parallel runs in the same second get distinct
// folders, and latest ends up pointing at one of them.
func TestNewRunDirConcurrent(t *testing.T) {
	out := t.TempDir()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.Local)
	const n = 8
	dirs := make([]string, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			d, err := newRunDir(out, "job", now)
			if err != nil {
				t.Error(err)
			}
			dirs[i] = d
		}(i)
	}
	wg.Wait()
	seen := map[string]bool{}
	for _, d := range dirs {
		if seen[d] {
			t.Errorf("folder %s handed out twice", d)
		}
		seen[d] = true
	}
	target, err := os.Readlink(filepath.Join(out, LatestName))
	if err != nil || !seen[filepath.Join(out, target)] {
		t.Errorf("latest -> %q (%v), not one of the run folders", target, err)
	}
}

func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "report.json")
	if err := WriteFileAtomic(p, []byte("one")); err != nil {
		t.Fatal(err)
	}
	if err := WriteFileAtomic(p, []byte("two")); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	if string(b) != "two" {
		t.Errorf("content %q", b)
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o644 {
		t.Errorf("mode %v", fi.Mode())
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Errorf("%d entries in folder, want 1 (temporary file left?)", len(ents))
	}
	if err := WriteFileAtomic(filepath.Join(dir, "missing", "x"), nil); err == nil {
		t.Error("write into a missing folder gave no error")
	}
}
