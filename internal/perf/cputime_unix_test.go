//go:build unix

package perf

import "syscall"

// processCPU is the CPU time the process has used (user + system), in ns:
// benchmarks report it beside wall time, which other work on a shared
// machine distorts.
func processCPU() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
