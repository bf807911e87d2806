package capture

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/ptscope/ptscope/internal/bundle"
)

// companionFS is the pure-Python companion: sitecustomize.py (chains to any
// existing sitecustomize, then boots the companion) and ptscope_companion/.
//
//go:embed companion/sitecustomize.py companion/ptscope_companion/*.py
var companionFS embed.FS

// companionFiles lists the embedded companion: file paths relative to
// "companion" (slash-separated) with their content, and the folders.
func companionFiles() (files map[string][]byte, dirs map[string]bool, err error) {
	files, dirs = map[string][]byte{}, map[string]bool{}
	err = fs.WalkDir(companionFS, "companion", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(p, "companion"), "/")
		if d.IsDir() {
			dirs[rel] = true
			return nil
		}
		data, err := companionFS.ReadFile(p)
		files[rel] = data
		return err
	})
	return files, dirs, err
}

// companionHash is a short content hash of the embedded companion, so that
// different ptscope versions unpack into different folders.
func companionHash(files map[string][]byte) string {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	h := sha256.New()
	for _, n := range names {
		fmt.Fprintf(h, "%s\x00%d\x00", n, len(files[n]))
		h.Write(files[n])
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// Companion is the companion unpacked for one run.
type Companion struct {
	Dir     string // the folder to put first on PYTHONPATH
	Warning string // why the cache was not used ("" when it was, or when there was none to use)
	temp    bool   // Dir is this run's own folder
}

// Remove deletes a folder unpacked for this run only (the cache stays).
func (c *Companion) Remove() {
	if c != nil && c.temp {
		_ = os.RemoveAll(c.Dir)
	}
}

// InstallCompanion unpacks the companion for a run. The training process
// executes what is in that folder, so it must be private: a cache folder
// (cacheDir, else the user cache directory's "ptscope", else
// $TMPDIR/ptscope-cache-<uid>) is used only when it is a real folder
// owned by this user that no one else can write to (made 0700 when it is
// not), in a path whose folders are owned by this user or root and are not
// writable by others (unless sticky, as /tmp); the unpacked copy in it is
// used only when it holds exactly the embedded files, byte for byte (plus
// Python's __pycache__), and is replaced otherwise. When no cache folder
// can be trusted, the companion is unpacked into a new folder of a unique
// name (os.MkdirTemp, 0700) that Companion.Remove deletes after the run,
// and Warning says why. A folder another user created is never used.
func InstallCompanion(cacheDir string) (*Companion, error) {
	files, dirs, err := companionFiles()
	if err != nil {
		return nil, err
	}
	sum := companionHash(files)
	var candidates []string
	if cacheDir != "" {
		candidates = []string{cacheDir}
	} else {
		if d, err := os.UserCacheDir(); err == nil {
			candidates = append(candidates, filepath.Join(d, "ptscope"))
		}
		candidates = append(candidates, filepath.Join(os.TempDir(), fmt.Sprintf("ptscope-cache-%d", os.Getuid())))
	}
	var reasons []string
	for _, c := range candidates {
		dir, err := installCached(c, sum, files, dirs)
		if err == nil {
			return &Companion{Dir: dir}, nil
		}
		reasons = append(reasons, err.Error())
	}
	tmp, err := os.MkdirTemp("", "ptscope-companion-")
	if err != nil {
		return nil, fmt.Errorf("unpack companion: %w (%s)", err, strings.Join(reasons, "; "))
	}
	if err := unpackCompanion(tmp, files, dirs); err != nil {
		_ = os.RemoveAll(tmp)
		return nil, err
	}
	return &Companion{Dir: tmp, temp: true,
		Warning: fmt.Sprintf("companion cache not used (%s); unpacked for this run in %s", strings.Join(reasons, "; "), tmp)}, nil
}

// installCached returns cacheDir/companion-<sum>, verified, unpacking it
// first if it is missing or not exactly the embedded files; an error says
// why cacheDir cannot be trusted.
func installCached(cacheDir, sum string, files map[string][]byte, dirs map[string]bool) (string, error) {
	abs, err := filepath.Abs(cacheDir)
	if err != nil {
		return "", err
	}
	parent := filepath.Dir(abs)
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return "", fmt.Errorf("%s: %v", parent, err)
	}
	// Resolve the parent once and work on the resolved path, after checking
	// that no one else can swap any folder on it.
	real, err := filepath.EvalSymlinks(parent)
	if err != nil {
		return "", fmt.Errorf("%s: %v", parent, err)
	}
	if err := checkAncestors(real); err != nil {
		return "", err
	}
	cacheDir = filepath.Join(real, filepath.Base(abs))
	if err := os.Mkdir(cacheDir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("%s: %v", cacheDir, err)
	}
	if err := checkPrivateDir(cacheDir); err != nil {
		return "", err
	}
	dst := filepath.Join(cacheDir, "companion-"+sum)
	verr := verifyCompanion(dst, files, dirs)
	if verr == nil {
		return dst, nil
	}
	if !errors.Is(verr, fs.ErrNotExist) {
		// not what ptscope unpacked (tampered, cut short, extra files):
		// move it out of the way; the folder is private, so rename works
		stale, err := os.MkdirTemp(cacheDir, ".companion-stale-")
		if err != nil {
			return "", fmt.Errorf("%s: %v", cacheDir, err)
		}
		err = os.Rename(dst, filepath.Join(stale, "c"))
		_ = os.RemoveAll(stale)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("%s: %v (and it cannot be replaced: %v)", dst, verr, err)
		}
	}
	tmp, err := os.MkdirTemp(cacheDir, ".companion-tmp-")
	if err != nil {
		return "", fmt.Errorf("%s: %v", cacheDir, err)
	}
	defer os.RemoveAll(tmp)
	if err := unpackCompanion(tmp, files, dirs); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, dst); err != nil {
		// another ptscope may have won the race: use its copy if it is right
		if verifyCompanion(dst, files, dirs) == nil {
			return dst, nil
		}
		return "", fmt.Errorf("%s: %v", dst, err)
	}
	if err := verifyCompanion(dst, files, dirs); err != nil {
		return "", err
	}
	return dst, nil
}

// unpackCompanion writes the embedded files under dir.
func unpackCompanion(dir string, files map[string][]byte, dirs map[string]bool) error {
	names := make([]string, 0, len(dirs))
	for d := range dirs {
		names = append(names, d)
	}
	sort.Strings(names) // parents first
	for _, d := range names {
		if d == "" {
			continue
		}
		if err := os.Mkdir(filepath.Join(dir, filepath.FromSlash(d)), 0o755); err != nil {
			return fmt.Errorf("unpack companion: %w", err)
		}
	}
	for n, data := range files {
		if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(n)), data, 0o644); err != nil {
			return fmt.Errorf("unpack companion: %w", err)
		}
	}
	return nil
}

// verifyCompanion checks that dir, a folder owned by this user, holds
// exactly the embedded files as regular files with the same bytes, plus
// nothing but Python's __pycache__ folders. An error wraps fs.ErrNotExist
// when dir is missing.
func verifyCompanion(dir string, files map[string][]byte, dirs map[string]bool) error {
	st, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("%s: not a folder", dir)
	}
	if err := ownedByMe(dir, st); err != nil {
		return err
	}
	seen := 0
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if rel == "." {
			return nil
		}
		if parent := strings.TrimPrefix(path.Dir(rel), "."); d.IsDir() && path.Base(rel) == "__pycache__" && dirs[parent] {
			return filepath.SkipDir // what Python compiled from the verified sources
		}
		switch {
		case d.IsDir() && dirs[rel]:
			return nil
		case d.Type().IsRegular():
			want, ok := files[rel]
			if !ok {
				return fmt.Errorf("%s: not a companion file", p)
			}
			got, err := bundle.ReadSideFile(p, int64(len(want)))
			if err != nil || !bytes.Equal(got, want) {
				return fmt.Errorf("%s: content differs from this ptscope's companion", p)
			}
			seen++
			return nil
		}
		return fmt.Errorf("%s: not a companion file (%v)", p, d.Type())
	})
	if err != nil {
		return err
	}
	if seen != len(files) {
		return fmt.Errorf("%s: %d of the companion's %d files", dir, seen, len(files))
	}
	return nil
}
