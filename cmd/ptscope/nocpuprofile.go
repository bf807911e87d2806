//go:build !cpuprofile

package main

import (
	"errors"
	"os"
)

// cpuProfileBuilt: this binary has the CPU-profile hook.
const cpuProfileBuilt = false

// startCPUProfile refuses PTSCOPE_CPUPROFILE in a binary built without
// -tags cpuprofile (cpuprofile.go), rather than ignoring it silently.
func startCPUProfile() (stop func(), err error) {
	if os.Getenv("PTSCOPE_CPUPROFILE") != "" {
		return func() {}, errors.New("PTSCOPE_CPUPROFILE: this binary was built without -tags cpuprofile")
	}
	return func() {}, nil
}
