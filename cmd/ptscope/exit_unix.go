//go:build !windows

package main

import (
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/ptscope/ptscope/internal/cli"
)

// exitLike ends ptscope the way a shell reports the command `run` ran:
// with its exit code, or with 128+N when signal N killed it. For SIGHUP,
// SIGINT, SIGTERM and SIGKILL ptscope then dies of the same signal, so that
// a calling shell sees the death (and, say, stops a loop after Ctrl-C). The
// Go runtime turns any other signal raised on itself into a crash with a
// stack dump (SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL, SIGQUIT, SIGTRAP,
// SIGSYS) or catches and drops it (SIGUSR1, SIGPIPE, SIGALRM, ...): for
// those ptscope exits with 128+N, as a shell does.
func exitLike(st cli.Status) {
	if reraiseSafe(st.Signal) {
		signal.Reset(st.Signal)
		_ = syscall.Kill(os.Getpid(), st.Signal)
		time.Sleep(100 * time.Millisecond) // let the default action land
	}
	os.Exit(st.Code)
}

// reraiseSafe reports whether ptscope can die of sig by raising it on itself
// (the Go runtime's default action for it is the system's).
func reraiseSafe(sig syscall.Signal) bool {
	switch sig {
	case syscall.SIGHUP, syscall.SIGINT, syscall.SIGTERM, syscall.SIGKILL:
		return true
	}
	return false
}
