//go:build windows

package capture

import (
	"context"
	"errors"
	"syscall"

	"github.com/ptscope/ptscope/internal/bundle"
)

// Result is the outcome of Run.
type Result struct {
	Dir      string
	ExitCode int
	Signal   syscall.Signal
	Manifest bundle.Manifest
}

// ErrNotFound wraps a command that could not be started.
var ErrNotFound = errors.New("command not found")

// Run is not supported on this platform (PyTorch CUDA capture needs Linux).
func Run(ctx context.Context, opts Options, argv []string) (*Result, error) {
	return nil, errors.New("ptscope run is not supported on Windows")
}

// WatchMain: there is no watch process on this platform.
func WatchMain() (code int, isWatch bool) { return 0, false }
