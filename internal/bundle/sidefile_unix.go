//go:build !windows

package bundle

import (
	"errors"
	"syscall"
)

// sideOpenFlags: never follow a symlink in the last component, never wait
// for a FIFO's writer.
const sideOpenFlags = syscall.O_NOFOLLOW | syscall.O_NONBLOCK

func isSymlinkErr(err error) bool { return errors.Is(err, syscall.ELOOP) }
