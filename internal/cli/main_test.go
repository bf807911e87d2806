package cli

import (
	"os"
	"testing"
)

// TestMain makes text output independent of the terminal the tests run in:
// without COLUMNS, reports into buffers are laid out for 100 columns.
func TestMain(m *testing.M) {
	os.Unsetenv("COLUMNS")
	os.Exit(m.Run())
}
