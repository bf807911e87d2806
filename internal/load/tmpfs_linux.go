//go:build linux

package load

import (
	"os"
	"syscall"
)

// tmpfsMagic is the f_type statfs reports for tmpfs (linux/magic.h).
const tmpfsMagic = 0x01021994

// inMemoryTemp reports whether the temporary directory (TMPDIR, else /tmp)
// lives in memory (tmpfs): spill files there take RAM, not disk, so
// streaming or spilling bounds the process's RSS but not the machine's use
// of memory.
func inMemoryTemp() bool {
	var st syscall.Statfs_t
	if err := syscall.Statfs(os.TempDir(), &st); err != nil {
		return false
	}
	return int64(st.Type) == tmpfsMagic
}
