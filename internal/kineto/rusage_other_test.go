//go:build !linux

package kineto

import "time"

// threadCPU is not measured here (cpuMBps reports nothing).
func threadCPU() time.Duration { return 0 }
