//go:build !linux

package mapfile

import "os"

// Map maps files on Linux only.
func Map(*os.File, int, Options) ([]byte, func(), error) { return nil, nil, ErrUnsupported }

// DropPages does nothing where files are not mapped.
func DropPages([]byte, int, int) {}
