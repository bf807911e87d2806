package load

import (
	"os"
	"runtime"
	"strings"
	"testing"
)

// TestTempNote checks the tmpfs warning against the kernel's own view of
// the temporary directory (/proc/self/mounts), on Linux where both exist.
func TestTempNote(t *testing.T) {
	if runtime.GOOS != "linux" {
		if tempNote() != "" {
			t.Fatal("a tmpfs note off Linux")
		}
		return
	}
	mounts, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		t.Skip("no /proc/self/mounts")
	}
	check := func(dir string) {
		t.Setenv("TMPDIR", dir)
		want := mountType(string(mounts), dir) == "tmpfs"
		note := tempNote()
		if (note != "") != want {
			t.Errorf("TMPDIR=%s: note %q, want tmpfs=%v", dir, note, want)
		}
		if want && !strings.Contains(note, "TMPDIR") {
			t.Errorf("note %q does not say what to do", note)
		}
	}
	check(t.TempDir())
	if _, err := os.Stat("/dev/shm"); err == nil {
		check("/dev/shm") // tmpfs on every common distribution
	}
}

// mountType is the type of the mount that holds dir: the longest mount
// point that is a prefix of it.
func mountType(mounts, dir string) string {
	best, typ := "", ""
	for _, line := range strings.Split(mounts, "\n") {
		f := strings.Fields(line)
		if len(f) < 3 {
			continue
		}
		mp := f[1]
		if (dir == mp || strings.HasPrefix(dir, strings.TrimSuffix(mp, "/")+"/")) && len(mp) > len(best) {
			best, typ = mp, f[2]
		}
	}
	return typ
}
