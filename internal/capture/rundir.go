package capture

import (
	"path/filepath"
	"strings"
)

// CommandName derives a bundle name from a command line: the first *.py
// script, else the module after -m, else the program's base name.
func CommandName(argv []string) string {
	for i, a := range argv {
		if strings.HasSuffix(a, ".py") && i > 0 {
			return strings.TrimSuffix(filepath.Base(a), ".py")
		}
	}
	for i, a := range argv {
		if (a == "-m" || a == "--module") && i+1 < len(argv) {
			return argv[i+1]
		}
	}
	if len(argv) == 0 {
		return "run"
	}
	return filepath.Base(argv[0])
}
