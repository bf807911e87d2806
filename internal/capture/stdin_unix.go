//go:build !windows

package capture

import (
	"io"
	"os"
	"syscall"
)

// stdinClosed reports whether r is ptscope's own standard input and was
// closed when ptscope started (`ptscope run cmd <&-`): the Go runtime then
// opens /dev/null read-write as fd 0 (runtime.checkfds), where a shell's
// </dev/null opens it read-only. The command then starts with fd 0 closed
// too, as it would have without ptscope.
func stdinClosed(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok || f != os.Stdin {
		return false
	}
	var st, null syscall.Stat_t
	if syscall.Fstat(0, &st) != nil || syscall.Stat(os.DevNull, &null) != nil {
		return false
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFCHR || st.Rdev != null.Rdev {
		return false
	}
	fl, _, errno := syscall.Syscall(syscall.SYS_FCNTL, 0, syscall.F_GETFL, 0)
	return errno == 0 && int(fl)&syscall.O_ACCMODE == syscall.O_RDWR
}
