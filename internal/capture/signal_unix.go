//go:build !windows

package capture

import (
	"os"
	"os/signal"
	"sync"
	"syscall"
	"unsafe"
)

// terminalForeground reports whether ptscope runs in the foreground process
// group of its controlling terminal, in which case a terminal-generated
// SIGINT/SIGQUIT already reached the command (same process group).
func terminalForeground() bool {
	for _, fd := range []uintptr{0, 1, 2} {
		var pgrp int32
		_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, fd, uintptr(syscall.TIOCGPGRP), uintptr(unsafe.Pointer(&pgrp)))
		if errno == 0 {
			return int(pgrp) == syscall.Getpgrp()
		}
	}
	return false
}

// keepBrokenPipes makes a write to a closed pipe on ptscope's own stdout or
// stderr an EPIPE error instead of a death by SIGPIPE (the Go runtime's
// default for fds 1 and 2), so that `ptscope run ... 2>&1 | head` returns
// the command's status. The signal is handled, not ignored: an ignored
// SIGPIPE would be inherited by the command, a handled one is reset to the
// default in it. A SIGPIPE ignored when ptscope started stays ignored (as
// it would for a shell's children).
func keepBrokenPipes() {
	pipeOnce.Do(func() {
		if !signal.Ignored(syscall.SIGPIPE) {
			signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
		}
	})
}

var pipeOnce sync.Once

// terminalSize returns the rows and columns of the terminal on fd, or 0, 0.
func terminalSize(fd uintptr) (rows, cols int) {
	var ws struct{ Row, Col, X, Y uint16 }
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, fd, uintptr(syscall.TIOCGWINSZ), uintptr(unsafe.Pointer(&ws)))
	if errno != 0 {
		return 0, 0
	}
	return int(ws.Row), int(ws.Col)
}
