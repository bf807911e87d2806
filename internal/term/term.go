// Package term tells how text output should look where it goes: whether a
// stream is a terminal, how wide lines may be, and whether to use colour.
package term

import (
	"io"
	"os"
	"strconv"
	"strings"
)

// DefaultWidth is the line width when neither COLUMNS nor a terminal says.
const DefaultWidth = 100

// MinWidth is the narrowest width reports lay themselves out for.
const MinWidth = 40

// IsTerminal reports whether w is a terminal.
func IsTerminal(w io.Writer) bool {
	f, ok := unwrap(w).(*os.File)
	return ok && isTerminal(f.Fd())
}

// Width is the line width for output to w: $COLUMNS when set to a number,
// else the terminal's width when w is one, else DefaultWidth; never below
// MinWidth.
func Width(w io.Writer) int {
	if n, err := strconv.Atoi(strings.TrimSpace(os.Getenv("COLUMNS"))); err == nil && n > 0 {
		return max(n, MinWidth)
	}
	if f, ok := unwrap(w).(*os.File); ok {
		if n := width(f.Fd()); n > 0 {
			return max(n, MinWidth)
		}
	}
	return DefaultWidth
}

// Color reports whether output to w may use ANSI colour: a terminal, and
// neither NO_COLOR (https://no-color.org) nor TERM=dumb set.
func Color(w io.Writer) bool {
	if os.Getenv("NO_COLOR") != "" || os.Getenv("TERM") == "dumb" {
		return false
	}
	return IsTerminal(w)
}
