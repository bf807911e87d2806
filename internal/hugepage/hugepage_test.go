package hugepage

import (
	"os"
	"runtime"
	"strings"
	"testing"
)

func TestMake(t *testing.T) {
	for _, n := range []int{0, 1, 1000, MinBytes/8 - 1, MinBytes / 8, 3 << 20} {
		s := Make[int64](n)
		if len(s) != n || cap(s) != n {
			t.Fatalf("Make(%d): len %d cap %d", n, len(s), cap(s))
		}
		for i := range s {
			if s[i] != 0 {
				t.Fatalf("Make(%d)[%d] = %d, want 0", n, i, s[i])
			}
			s[i] = int64(i)
		}
		c := MakeCap[uint32](n/2, n)
		if len(c) != n/2 || cap(c) != n {
			t.Fatalf("MakeCap(%d,%d): len %d cap %d", n/2, n, len(c), cap(c))
		}
	}
}

// TestAdviseTakesEffect checks, where the kernel offers huge pages on
// request, that a large slice made here lands in a VMA marked for them
// (the "hg" flag of /proc/self/smaps).
func TestAdviseTakesEffect(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("huge pages are advised on Linux only")
	}
	mode, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil || !strings.Contains(string(mode), "[madvise]") && !strings.Contains(string(mode), "[always]") {
		t.Skipf("transparent huge pages unavailable (%q)", mode)
	}
	s := Make[byte](64 << 20)
	s[len(s)/2] = 1
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Skip(err)
	}
	if !strings.Contains(string(smaps), " hg") {
		t.Fatalf("no VMA marked hg (MADV_HUGEPAGE) after Make of 64 MiB")
	}
	runtime.KeepAlive(s)
}
