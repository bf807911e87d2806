//go:build !linux

package load

// inMemoryTemp is false where ptscope cannot tell (see tmpfs_linux.go).
func inMemoryTemp() bool { return false }
