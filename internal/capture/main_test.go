package capture

import (
	"os"
	"testing"
)

// TestMain lets this test binary be the watch process Run starts (a copy
// of the running binary).
func TestMain(m *testing.M) {
	if code, ok := WatchMain(); ok {
		os.Exit(code)
	}
	os.Exit(m.Run())
}
