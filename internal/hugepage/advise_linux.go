//go:build linux

package hugepage

import "syscall"

const madvHugepage = 14 // MADV_HUGEPAGE

func advise(addr, n uintptr) {
	_, _, _ = syscall.Syscall(syscall.SYS_MADVISE, addr, n, madvHugepage)
}
