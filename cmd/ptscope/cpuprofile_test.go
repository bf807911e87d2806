package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCPUProfileHook: PTSCOPE_CPUPROFILE writes a profile in a binary built
// with -tags cpuprofile, and is refused (not ignored) in one built without.
// go test -tags cpuprofile ./cmd/ptscope runs the first case.
func TestCPUProfileHook(t *testing.T) {
	stop, err := startCPUProfile()
	if err != nil {
		t.Fatalf("without the variable: %v", err)
	}
	stop()
	p := filepath.Join(t.TempDir(), "cpu.prof")
	t.Setenv("PTSCOPE_CPUPROFILE", p)
	stop, err = startCPUProfile()
	if !cpuProfileBuilt {
		if err == nil || !strings.Contains(err.Error(), "-tags cpuprofile") {
			t.Fatalf("err = %v, want a refusal naming -tags cpuprofile", err)
		}
		stop()
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 1e6; i++ {
		_ = strings.Repeat("x", i%7)
	}
	stop()
	if st, err := os.Stat(p); err != nil || st.Size() == 0 {
		t.Fatalf("profile: %v", err)
	}
}
