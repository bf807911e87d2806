//go:build !linux

package snapshot

import (
	"io"
	"os"
)

func mapFile(f *os.File, size int, _ int) (data []byte, unmap func(), err error) {
	data = make([]byte, size)
	if _, err := io.ReadFull(f, data); err != nil {
		return nil, nil, err
	}
	return data, func() {}, nil
}

func dropPages(data []byte, lo, hi int) {}
