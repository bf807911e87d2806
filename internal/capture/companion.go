package capture

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
)

// companionFS is the pure-Python companion: sitecustomize.py (chains to any
// existing sitecustomize, then boots the companion) and ptscope_companion/.
//
//go:embed companion/sitecustomize.py companion/ptscope_companion/*.py
var companionFS embed.FS

// companionHash is a short content hash of the embedded companion, so that
// different ptscope versions unpack into different folders.
func companionHash() (string, error) {
	h := sha256.New()
	var names []string
	err := fs.WalkDir(companionFS, "companion", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			names = append(names, p)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	sort.Strings(names)
	for _, n := range names {
		data, err := companionFS.ReadFile(n)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", n, len(data))
		h.Write(data)
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// InstallCompanion unpacks the companion under cacheDir ("" = the user cache
// directory, else the temporary directory) and returns the folder to put
// first on PYTHONPATH. An existing unpacked copy of the same content is
// reused; a new one is written to a temporary folder and renamed into place.
func InstallCompanion(cacheDir string) (string, error) {
	if cacheDir != "" {
		return installCompanion(cacheDir)
	}
	var errs []error
	if d, err := os.UserCacheDir(); err == nil {
		dir, err := installCompanion(filepath.Join(d, "ptscope"))
		if err == nil {
			return dir, nil
		}
		errs = append(errs, err)
	}
	dir, err := installCompanion(filepath.Join(os.TempDir(), fmt.Sprintf("ptscope-cache-%d", os.Getuid())))
	if err == nil {
		return dir, nil
	}
	return "", errors.Join(append(errs, err)...)
}

func installCompanion(cacheDir string) (string, error) {
	sum, err := companionHash()
	if err != nil {
		return "", err
	}
	dst := filepath.Join(cacheDir, "companion-"+sum)
	if st, err := os.Stat(filepath.Join(dst, "sitecustomize.py")); err == nil && st.Mode().IsRegular() {
		return dst, nil
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return "", fmt.Errorf("companion cache %s: %w", cacheDir, err)
	}
	tmp, err := os.MkdirTemp(cacheDir, ".companion-tmp-")
	if err != nil {
		return "", fmt.Errorf("companion cache %s: %w", cacheDir, err)
	}
	defer os.RemoveAll(tmp)
	err = fs.WalkDir(companionFS, "companion", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel("companion", p)
		target := filepath.Join(tmp, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		data, err := companionFS.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
	if err != nil {
		return "", fmt.Errorf("unpack companion: %w", err)
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, dst); err != nil {
		// another ptscope won the race: use its copy
		if _, serr := os.Stat(filepath.Join(dst, "sitecustomize.py")); serr == nil {
			return dst, nil
		}
		return "", fmt.Errorf("companion cache %s: %w", dst, err)
	}
	return dst, nil
}
