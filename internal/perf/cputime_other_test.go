//go:build !unix

package perf

func processCPU() int64 { return 0 }
