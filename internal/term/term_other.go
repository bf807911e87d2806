//go:build !(linux || darwin || freebsd || netbsd || openbsd)

package term

func isTerminal(uintptr) bool { return false }

func width(uintptr) int { return 0 }
