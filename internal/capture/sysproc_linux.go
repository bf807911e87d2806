package capture

import "syscall"

// childSysProcAttr makes the command die with ptscope: the kernel sends it
// SIGKILL when the thread that started it ends (Run keeps that thread
// locked until the command is waited for). The command's own children are
// the watch's job (see watch_unix.go).
func childSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
