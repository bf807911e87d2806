//go:build !windows

package capture

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// ownedByMe checks that st (of path) belongs to this process's user.
func ownedByMe(path string, st fs.FileInfo) error {
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	if uid := os.Geteuid(); int(sys.Uid) != uid {
		return fmt.Errorf("%s is owned by uid %d, not by this user (uid %d)", path, sys.Uid, uid)
	}
	return nil
}

// checkPrivateDir checks that dir is a folder (not a symlink) owned by this
// user that no one else can write to, and makes it 0700 if it is not (no one
// else could have written in it, so nothing planted by another user is in
// it; 0700 keeps it so and keeps others out of it).
func checkPrivateDir(dir string) error {
	st, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("%s is not a folder (%v)", dir, st.Mode().Type())
	}
	if err := ownedByMe(dir, st); err != nil {
		return err
	}
	if perm := st.Mode().Perm(); perm&0o022 != 0 {
		return fmt.Errorf("%s is writable by others (mode %04o)", dir, perm)
	} else if perm != 0o700 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("%s: %v", dir, err)
		}
	}
	return nil
}

// checkAncestors checks that no one but this user and root can replace a
// folder on the (symlink-free) path dir: every folder from dir up to the
// root is owned by this user or root, and is not writable by everyone
// unless it is sticky (as /tmp is). Group-writable folders are accepted
// (user-private groups make home folders group-writable).
func checkAncestors(dir string) error {
	uid := uint32(os.Geteuid())
	for p := dir; ; p = filepath.Dir(p) {
		st, err := os.Lstat(p)
		if err != nil {
			return err
		}
		sys, ok := st.Sys().(*syscall.Stat_t)
		if ok && sys.Uid != 0 && sys.Uid != uid {
			return fmt.Errorf("%s is owned by uid %d, neither this user (uid %d) nor root", p, sys.Uid, uid)
		}
		if st.Mode().Perm()&0o002 != 0 && st.Mode()&fs.ModeSticky == 0 {
			return fmt.Errorf("%s is writable by everyone (mode %04o) and not sticky", p, st.Mode().Perm())
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}
