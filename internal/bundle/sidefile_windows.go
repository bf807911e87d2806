//go:build windows

package bundle

const sideOpenFlags = 0

func isSymlinkErr(error) bool { return false }
