//go:build !windows

package capture

import (
	"os"
	"os/signal"
	"syscall"
	"time"
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

// ExitLike ends ptscope the way the command ended: killed by the same
// signal, else with the same exit code.
func ExitLike(res *Result) {
	if res.Signal != 0 {
		signal.Reset(res.Signal)
		_ = syscall.Kill(os.Getpid(), res.Signal)
		time.Sleep(100 * time.Millisecond) // let the default action land
	}
	os.Exit(res.ExitCode)
}

// terminalSize returns the rows and columns of the terminal on fd, or 0, 0.
func terminalSize(fd uintptr) (rows, cols int) {
	var ws struct{ Row, Col, X, Y uint16 }
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, fd, uintptr(syscall.TIOCGWINSZ), uintptr(unsafe.Pointer(&ws)))
	if errno != 0 {
		return 0, 0
	}
	return int(ws.Row), int(ws.Col)
}
