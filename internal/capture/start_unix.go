//go:build !windows

package capture

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// lookPath finds argv[0] as a shell does, or says why it cannot run it.
func lookPath(name string) (string, error) {
	p, err := exec.LookPath(name)
	if err == nil || errors.Is(err, exec.ErrDot) && p != "" {
		return p, nil // a shell runs a program found through "." on PATH too
	}
	if strings.Contains(name, "/") {
		st, serr := os.Stat(name)
		switch {
		case serr != nil && errors.Is(serr, fs.ErrNotExist):
			return "", &StartError{Name: name, Reason: "no such file or directory", Code: 127, Err: serr}
		case serr == nil && st.IsDir():
			return "", &StartError{Name: name, Reason: "is a folder", Code: 126, Err: syscall.EISDIR}
		case serr != nil:
			return "", &StartError{Name: name, Reason: serr.Error(), Code: 126, Err: serr}
		}
		return "", &StartError{Name: name, Reason: "permission denied (not executable)", Code: 126, Err: fs.ErrPermission}
	}
	// A shell that finds only a non-executable file of that name says
	// "permission denied" (126).
	for _, d := range filepath.SplitList(os.Getenv("PATH")) {
		if d == "" {
			d = "."
		}
		if st, err := os.Stat(filepath.Join(d, name)); err == nil && !st.IsDir() {
			return "", &StartError{Name: name, Reason: fmt.Sprintf("permission denied (%s is not executable)", filepath.Join(d, name)), Code: 126, Err: fs.ErrPermission}
		}
	}
	return "", &StartError{Name: name, Reason: "command not found", Code: 127}
}

// startError explains why execve failed for a command lookPath found.
func startError(name string, err error) *StartError {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return &StartError{Name: name, Reason: err.Error(), Code: 126, Err: err}
	}
	switch errno {
	case syscall.ENOENT:
		return &StartError{Name: name, Reason: "cannot execute: required file not found (the #! interpreter or the program's loader is missing)", Code: 127, Err: err}
	case syscall.ENOEXEC:
		return &StartError{Name: name, Reason: "cannot execute: exec format error (a script without a #! line? a binary for another machine?)", Code: 126, Err: err}
	case syscall.EACCES, syscall.EPERM:
		return &StartError{Name: name, Reason: "cannot execute: permission denied (of the program, its #! interpreter, or a noexec mount)", Code: 126, Err: err}
	}
	return &StartError{Name: name, Reason: "cannot execute: " + errno.Error(), Code: 126, Err: err}
}
