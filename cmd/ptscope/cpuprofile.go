//go:build cpuprofile

package main

import (
	"fmt"
	"os"
	"runtime/pprof"
)

// cpuProfileBuilt: this binary has the CPU-profile hook.
const cpuProfileBuilt = true

// startCPUProfile starts the CPU profile that PTSCOPE_CPUPROFILE=FILE asks
// for (go tool pprof FILE), for performance work on real inputs. It is
// built only with -tags cpuprofile: runtime/pprof is a second of an
// empty-cache build that a user never needs (docs/build.md). The returned
// stop function is never nil.
func startCPUProfile() (stop func(), err error) {
	p := os.Getenv("PTSCOPE_CPUPROFILE")
	if p == "" {
		return func() {}, nil
	}
	f, err := os.Create(p)
	if err == nil {
		err = pprof.StartCPUProfile(f)
	}
	if err != nil {
		return func() {}, fmt.Errorf("PTSCOPE_CPUPROFILE: %v", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
