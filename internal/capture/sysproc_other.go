//go:build !linux && !windows

package capture

import "syscall"

// childSysProcAttr: no parent-death signal outside Linux.
func childSysProcAttr() *syscall.SysProcAttr { return nil }
