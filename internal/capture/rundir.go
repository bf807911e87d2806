package capture

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// newRunDir creates outDir/YYYYMMDD_HHMMSS_<name>/ and points outDir/latest
// at it. It mirrors report.NewRunDir (internal/report), to be switched to it
// once that package is in the tree.
func newRunDir(outDir, name string, now time.Time) (string, error) {
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return "", fmt.Errorf("--out %s: %w", outDir, err)
	}
	base := now.Format("20060102_150405") + "_" + sanitizeName(name)
	dir := filepath.Join(outDir, base)
	for i := 2; ; i++ {
		err := os.Mkdir(dir, 0o755)
		if err == nil {
			break
		}
		if !errors.Is(err, os.ErrExist) || i > 1000 {
			return "", fmt.Errorf("--out %s: %w", outDir, err)
		}
		dir = filepath.Join(outDir, fmt.Sprintf("%s_%d", base, i))
	}
	latest := filepath.Join(outDir, "latest")
	tmp := filepath.Join(outDir, fmt.Sprintf(".latest-%d", os.Getpid()))
	_ = os.Remove(tmp)
	if err := os.Symlink(filepath.Base(dir), tmp); err == nil {
		if err := os.Rename(tmp, latest); err != nil {
			_ = os.Remove(tmp)
		}
	}
	return dir, nil
}

func sanitizeName(name string) string {
	var b strings.Builder
	for _, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	s := strings.Trim(b.String(), "._")
	if s == "" {
		s = "run"
	}
	if len(s) > 64 {
		s = s[:64]
	}
	return s
}

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
