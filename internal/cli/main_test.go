package cli

import (
	"os"
	"testing"

	"github.com/ptscope/ptscope/internal/capture"
)

// TestMain makes text output independent of the terminal the tests run in:
// without COLUMNS, reports into buffers are laid out for 100 columns.
// It also lets this test binary be the watch process of `run`.
func TestMain(m *testing.M) {
	if code, ok := capture.WatchMain(); ok {
		os.Exit(code)
	}
	os.Unsetenv("COLUMNS")
	os.Exit(m.Run())
}
