// Package rundir makes the run folders of --out (OUT/YYYYMMDD_HHMMSS_<name>/
// with OUT/latest pointing at the newest) and writes files into them
// atomically. Every command's --out and ptscope run's bundles use it.
package rundir

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// LatestName is the entry in an output folder that points at the newest run
// folder: a relative symlink, or a text file holding the folder's name where
// symlinks cannot be made.
const LatestName = "latest"

// maxNameLen bounds the sanitised name part of a run folder.
const maxNameLen = 64

// NewRunDir creates outDir/YYYYMMDD_HHMMSS_<name>/ (local time; name is
// sanitised to letters, digits, '.', '-' and '_'), adding _2, _3, ... if that
// folder exists, and points outDir/latest at it. It returns the new folder's
// path. If the folder was made but latest could not be updated, it returns
// the path together with the error.
func NewRunDir(outDir, name string) (string, error) {
	return newRunDir(outDir, name, time.Now())
}

func newRunDir(outDir, name string, now time.Time) (string, error) {
	base, err := prepare(outDir, name, now)
	if err != nil {
		return "", err
	}
	var dir string
	for n := 1; ; n++ {
		dir = filepath.Join(outDir, candidate(base, n))
		err := os.Mkdir(dir, 0o755)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrExist) || n >= 10000 {
			return "", fmt.Errorf("rundir: creating run folder: %w", err)
		}
	}
	if err := pointLatest(outDir, filepath.Base(dir), os.Symlink); err != nil {
		return dir, err
	}
	return dir, nil
}

// prepare checks and makes outDir, and returns the run folder's first
// name: the time and the sanitized name.
func prepare(outDir, name string, now time.Time) (string, error) {
	if outDir == "" {
		return "", errors.New("rundir: empty output folder")
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return "", fmt.Errorf("rundir: creating output folder: %w", err)
	}
	return now.Format("20060102_150405") + "_" + SanitizeName(name), nil
}

// candidate is the n-th name tried for a run folder (from 1): base, then
// base_2, base_3, ...
func candidate(base string, n int) string {
	if n > 1 {
		return base + "_" + strconv.Itoa(n)
	}
	return base
}

// pointLatest makes outDir/latest refer to the folder named target (a name
// inside outDir), replacing any previous link or file atomically. symlink
// is os.Symlink except in tests.
func pointLatest(outDir, target string, symlink func(oldname, newname string) error) error {
	latest := filepath.Join(outDir, LatestName)
	if fi, err := os.Lstat(latest); err == nil && fi.IsDir() {
		return fmt.Errorf("rundir: cannot point %s at %s: it is a folder", latest, target)
	}
	for try := 0; try < 10; try++ {
		tmp := filepath.Join(outDir, "."+LatestName+".tmp-"+strconv.FormatUint(rand.Uint64(), 36))
		err := symlink(target, tmp)
		if errors.Is(err, fs.ErrExist) {
			continue // name taken by a concurrent run; pick another
		}
		if err != nil {
			break
		}
		if err := os.Rename(tmp, latest); err != nil {
			os.Remove(tmp)
			return fmt.Errorf("rundir: updating %s: %w", latest, err)
		}
		return nil
	}
	// No symlinks here (some filesystems, Windows without privileges):
	// write the folder name instead.
	if err := WriteFileAtomic(latest, []byte(target+"\n")); err != nil {
		return fmt.Errorf("rundir: updating %s: %w", latest, err)
	}
	return nil
}

// SanitizeName turns a free-form name (an input file name, --name) into a
// safe folder-name part: runs of characters other than ASCII letters,
// digits, '.', '-' and '_' become one '_', leading and trailing '_' and '.'
// are dropped, and the result is at most 64 bytes. An empty result is "run".
func SanitizeName(name string) string {
	var b strings.Builder
	under := false
	for _, r := range name {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_'
		if !ok || r == '_' {
			if !under {
				b.WriteByte('_')
				under = true
			}
			continue
		}
		b.WriteRune(r)
		under = false
	}
	s := strings.Trim(b.String(), "_.")
	if len(s) > maxNameLen {
		s = strings.TrimRight(s[:maxNameLen], "_.")
	}
	if s == "" {
		return "run"
	}
	return s
}

// WriteFileAtomic writes data to path so that readers see either the old
// file or the complete new one: it writes a temporary file in the same
// folder, syncs it and renames it over path. The file gets mode 0644.
func WriteFileAtomic(path string, data []byte) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return fmt.Errorf("rundir: writing %s: %w", path, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
			err = fmt.Errorf("rundir: writing %s: %w", path, err)
		}
	}()
	if _, err = f.Write(data); err != nil {
		return err
	}
	if err = f.Chmod(0o644); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// File is one file of a run folder: a name inside the folder and its bytes.
type File struct {
	Name string
	Data []byte
}

// Write makes a run folder for name under outDir holding files, whole or
// not at all: the files are written into a hidden temporary folder
// (outDir/.YYYYMMDD_HHMMSS_<name>.tmp-*), which is renamed to the run
// folder once every file is there, and outDir/latest is pointed at it
// last. A write that fails (a full disk) or a ctx that ends (Ctrl-C)
// removes the temporary folder and leaves outDir and latest as they were.
// temp, when not nil, is told the temporary folder (and returns the
// function that forgets it), so that a caller that abandons Write can
// remove it. Write returns the folder even when only the latest link
// could not be updated (with that error), so that the caller can still
// report it.
func Write(ctx context.Context, outDir, name string, files []File, temp func(string) func()) (dir string, err error) {
	if outDir == "" {
		return "", errors.New("rundir: empty output folder")
	}
	for _, f := range files {
		if f.Name == "" || f.Name != filepath.Base(f.Name) || f.Name[0] == '.' {
			return "", fmt.Errorf("rundir: invalid file name %q", f.Name)
		}
	}
	base, err := prepare(outDir, name, time.Now())
	if err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(outDir, "."+base+".tmp-")
	if err != nil {
		return "", fmt.Errorf("rundir: creating run folder: %w", err)
	}
	if temp != nil {
		defer temp(tmp)()
	}
	defer func() {
		if err != nil {
			os.RemoveAll(tmp)
		}
	}()
	if err := os.Chmod(tmp, 0o755); err != nil { // MkdirTemp makes it private
		return "", fmt.Errorf("rundir: creating run folder: %w", err)
	}
	for _, f := range files {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		if err := writeFile(filepath.Join(tmp, f.Name), f.Data); err != nil {
			return "", fmt.Errorf("rundir: writing %s: %w", filepath.Join(outDir, base, f.Name), err)
		}
	}
	syncDir(tmp)
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if dir, err = renameFree(tmp, outDir, base); err != nil {
		return "", err
	}
	if err := ctx.Err(); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	return dir, pointLatest(outDir, filepath.Base(dir), os.Symlink)
}

// renameFree renames the complete folder tmp to outDir/base, or base_2,
// base_3, ... when that name is taken (renaming over a folder that holds
// files fails; run folders always hold files).
func renameFree(tmp, outDir, base string) (string, error) {
	for n := 1; n < 10000; n++ {
		dir := filepath.Join(outDir, candidate(base, n))
		if _, err := os.Lstat(dir); err == nil {
			continue
		}
		err := os.Rename(tmp, dir)
		if err == nil {
			return dir, nil
		}
		if _, serr := os.Lstat(dir); serr != nil {
			return "", fmt.Errorf("rundir: creating run folder: %w", err)
		}
		// taken by a concurrent run between Lstat and Rename: next name
	}
	return "", fmt.Errorf("rundir: creating run folder: no free name for %s", base)
}

// writeFile writes a new file and syncs it.
func writeFile(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// syncDir makes a folder's entries durable, where folders can be synced
// (best effort: some filesystems and Windows cannot).
func syncDir(dir string) {
	if f, err := os.Open(dir); err == nil {
		f.Sync()
		f.Close()
	}
}
