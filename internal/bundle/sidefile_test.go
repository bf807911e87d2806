//go:build !windows

package bundle

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// plant replaces path with a hostile kind of file.
func plant(t *testing.T, path, kind string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	_ = os.Remove(path)
	var err error
	switch kind {
	case "fifo":
		err = syscall.Mkfifo(path, 0o644)
	case "symlink to /dev/zero":
		err = os.Symlink("/dev/zero", path)
	case "symlink to a valid file":
		// a file that would parse as any side file, outside the bundle
		out := filepath.Join(t.TempDir(), "elsewhere.json")
		writeFile(t, out, `{"schema_version":1}`+"\n")
		err = os.Symlink(out, path)
	case "device":
		err = syscall.Mknod(path, syscall.S_IFCHR|0o644, 1<<8|5) // 1:5 is /dev/zero on Linux
		if err != nil {
			t.Skipf("mknod: %v (needs root)", err)
		}
	case "folder":
		err = os.Mkdir(path, 0o755)
	case "oversized":
		// sparse: costs no disk, and no memory unless it is read
		var f *os.File
		if f, err = os.Create(path); err == nil {
			err = f.Truncate(MaxJSONLSideFileBytes + 1)
			f.Close()
		}
	case "one long line":
		// a sparse file of zeros just under the .jsonl cap, without a newline
		var f *os.File
		if f, err = os.Create(path); err == nil {
			err = f.Truncate(MaxJSONLSideFileBytes)
			f.Close()
		}
	default:
		t.Fatalf("unknown kind %q", kind)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// within runs fn and fails the test if it takes longer than d (a FIFO
// that is opened blocks forever).
func within[T any](t *testing.T, d time.Duration, fn func() T) T {
	t.Helper()
	ch := make(chan T, 1)
	go func() { ch <- fn() }()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		t.Fatalf("still running after %v (blocked on a special file?)", d)
	}
	panic("unreachable")
}

func TestReadBundleHostileSideFiles(t *testing.T) {
	t.Parallel()
	files := []string{"manifest.json", "rank0/process.json", "rank0/oom.json", "rank0/phases.jsonl", "rank0/live.jsonl", "rank0/tensors.jsonl"}
	kinds := map[string]string{ // what the error must say
		"fifo":                    "a named pipe",
		"symlink to /dev/zero":    "a symlink",
		"symlink to a valid file": "a symlink",
		"device":                  "a device",
		"folder":                  "a folder",
		"oversized":               "more than the",
		"one long line":           "", // per file below
	}
	for _, name := range files {
		for kind, want := range kinds {
			t.Run(name+"/"+kind, func(t *testing.T) {
				t.Parallel()
				dir := t.TempDir()
				writeFile(t, filepath.Join(dir, "manifest.json"), `{"schema_version":1}`)
				writeFile(t, filepath.Join(dir, "rank0", "snapshot_end.pickle"), "x")
				plant(t, filepath.Join(dir, name), kind)
				if kind == "one long line" {
					if strings.HasSuffix(name, ".jsonl") {
						want = "byte offset 0: a line longer than 1.00 MiB"
					} else {
						want = "more than the 64.0 MiB"
					}
				}
				var before, after syscall.Rusage
				_ = syscall.Getrusage(syscall.RUSAGE_SELF, &before)
				err := within(t, 5*time.Second, func() error { _, err := ReadBundle(dir); return err })
				_ = syscall.Getrusage(syscall.RUSAGE_SELF, &after)
				if err == nil {
					t.Fatal("ReadBundle accepted it")
				}
				if msg := err.Error(); !strings.Contains(msg, filepath.Join(dir, name)) || !strings.Contains(msg, want) || strings.Contains(msg, "\n") {
					t.Errorf("error %q: want one line naming %s and saying %q", msg, name, want)
				}
				// Maxrss is the process's high-water mark (KiB on Linux):
				// the tests around may raise it, never by the 1 GiB a read
				// of these files would cost.
				if grew := (after.Maxrss - before.Maxrss) << 10; grew > 256<<20 {
					t.Errorf("peak RSS grew by %d MiB", grew>>20)
				}
			})
		}
	}
}

func TestReadSideFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, "a.json")
	writeFile(t, p, "12345")
	if data, err := ReadSideFile(p, 5); err != nil || string(data) != "12345" {
		t.Errorf("at the limit: %q %v", data, err)
	}
	if _, err := ReadSideFile(p, 4); err == nil || !strings.Contains(err.Error(), "5 bytes, more than the 4 B") {
		t.Errorf("over the limit: %v", err)
	}
	if _, err := ReadSideFile(filepath.Join(dir, "missing.json"), 5); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing: %v, want fs.ErrNotExist", err)
	}
	plant(t, filepath.Join(dir, "p"), "fifo")
	if _, err := within(t, 5*time.Second, func() error { _, err := ReadSideFile(filepath.Join(dir, "p"), 5); return err }), errNotRegular; !errors.Is(err, errNotRegular) {
		t.Errorf("fifo: %v", err)
	}
}

func TestCountLines(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tt := range []struct {
		data string
		n    int
	}{{"", 0}, {"a\n", 1}, {"a\nb", 2}, {"a\nb\n\n", 3}} {
		p := filepath.Join(dir, "log")
		writeFile(t, p, tt.data)
		if n, err := countLines(p, 1<<20); err != nil || n != tt.n {
			t.Errorf("%q: %d %v, want %d", tt.data, n, err, tt.n)
		}
	}
	plant(t, filepath.Join(dir, "log"), "symlink to /dev/zero")
	if _, err := countLines(filepath.Join(dir, "log"), 1<<20); !errors.Is(err, errNotRegular) {
		t.Errorf("symlink: %v", err)
	}
}

// FinishManifest runs after every `ptscope run` on a folder the command
// could write to: hostile side files become warnings, never a hang.
func TestFinishManifestHostileSideFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	plant(t, filepath.Join(dir, "rank0", "process.json"), "fifo")
	plant(t, filepath.Join(dir, "rank1", "process.json"), "symlink to /dev/zero")
	plant(t, filepath.Join(dir, "companion.log"), "fifo")
	plant(t, filepath.Join(dir, ".ptscope", "proc", "1.json"), "fifo")
	plant(t, filepath.Join(dir, "rank0", "live.jsonl"), "fifo")
	m := within(t, 5*time.Second, func() *Manifest {
		m := &Manifest{}
		FinishManifest(dir, m, nil)
		return m
	})
	got := strings.Join(m.Warnings, "\n")
	for _, want := range []string{"rank0/process.json: not a regular file (a named pipe)", "rank1/process.json: not a regular file (a symlink)", "companion.log: not a regular file (a named pipe)"} {
		if !strings.Contains(got, want) {
			t.Errorf("warnings %q: want %q", got, want)
		}
	}
}
