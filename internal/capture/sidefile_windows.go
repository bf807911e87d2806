//go:build windows

package capture

const sideOpenFlags = 0

func isSymlinkErr(error) bool { return false }
