package snapshot

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"

	"github.com/ptscope/ptscope/internal/input"
	"github.com/ptscope/ptscope/internal/pickle"
	"github.com/ptscope/ptscope/internal/spillmem"
)

// readPickle reads a pickle to its STOP into memory (up to half the memory
// budget), checking its opcodes as they arrive: a stream that goes wrong
// (a decompression bomb behind a valid header, garbage, a length that lies)
// is refused at its offset, before the rest of it is inflated. The check
// runs on a goroutine of its own, a few reads behind the decompressor, so
// that it costs no time on two cores. size is the input size when known
// (0 if not).
//
// With an arena, the pickle is held in it (the limit stays half the budget,
// now of disk rather than memory, against decompression bombs).
func readPickle(r io.Reader, size int, arena *spillmem.Arena, src *input.Source) ([]byte, error) {
	limit := src.MaxInMemory()
	sc := newScanAhead(pickle.NewScanner(pickle.Options{MaxString: src.MaxString(), LimitNote: src.BudgetNote()}))
	checked := 0
	data, err := readAllFuncIn(r, spillmem.MakeCap[byte](arena, 0, size+1), arena, func(buf []byte) error {
		if int64(len(buf)) > limit {
			return fmt.Errorf("offset %d: the decompressed pickle passes %d bytes, half the memory budget (%s)",
				len(buf), limit, src.BudgetNote())
		}
		if err := sc.feed(buf); err != nil {
			return err
		}
		if len(buf)-checked >= 16<<20 {
			checked = len(buf)
			if err := src.Check(); err != nil {
				return fmt.Errorf("offset %d: %w", len(buf), err)
			}
		}
		return nil
	})
	if serr := sc.wait(); err == nil || err == errStop {
		err = serr
	}
	switch {
	case err == nil || err == errStop:
		return data, nil
	case errors.As(err, new(*pickle.Error)):
		// The decoder's own message for the first bad opcode, which may
		// come before the one the scanner stopped at.
		b := newBuilder(nil, src)
		derr := func() error { _, err := pickle.DecodeBytes(data, b.pickleOptions()); return err }()
		if derr != nil && !truncation(derr) {
			return nil, derr
		}
		if derr != nil && truncation(derr) {
			// The decoder reads on where the scanner stopped (frames whose
			// lengths lie, say): read the rest unchecked, as before.
			data, err = readAllFuncIn(r, data, arena, func(buf []byte) error {
				if int64(len(buf)) > limit {
					return fmt.Errorf("offset %d: the decompressed pickle passes %d bytes, half the memory budget (%s)",
						len(buf), limit, src.BudgetNote())
				}
				return nil
			})
			if err == nil {
				return data, nil
			}
			return nil, fmt.Errorf("offset %d: %w", len(data), err)
		}
		return nil, err
	}
	return nil, fmt.Errorf("offset %d: %w", len(data), err)
}

// scanAhead runs a pickle.Scanner on its own goroutine over the growing
// input. feed hands it the input read so far and returns the scanner's
// error, or errStop once it saw STOP, as soon as it knows; wait waits for it
// to catch up and returns the same.
type scanAhead struct {
	jobs chan []byte
	done chan struct{}
	err  atomic.Pointer[error]
}

func newScanAhead(sc *pickle.Scanner) *scanAhead {
	a := &scanAhead{jobs: make(chan []byte, 4), done: make(chan struct{})}
	go func() {
		defer close(a.done)
		for buf := range a.jobs {
			if a.err.Load() != nil {
				continue // drain
			}
			err := sc.Feed(buf)
			if err == nil && sc.Done() {
				err = errStop
			}
			if err != nil {
				a.err.Store(&err)
			}
		}
	}()
	return a
}

func (a *scanAhead) feed(buf []byte) error {
	if p := a.err.Load(); p != nil {
		return *p
	}
	a.jobs <- buf // blocks when the scanner is 4 reads behind
	return nil
}

func (a *scanAhead) wait() error {
	close(a.jobs)
	<-a.done
	if p := a.err.Load(); p != nil {
		return *p
	}
	return nil
}

// errStop ends readAllFuncIn early without an error.
var errStop = errors.New("stop")

// truncation reports whether err is the decoder reaching the end of its input.
func truncation(err error) bool {
	var pe *pickle.Error
	return errors.As(err, &pe) && (strings.HasPrefix(pe.Msg, "input ends") || strings.HasPrefix(pe.Msg, "expected a newline"))
}

// maxRead bounds one read of readAllFuncIn, so that check runs at least that
// often (with scanAhead's queue, a bomb is refused within a few of them).
const maxRead = 128 << 10

// readAllFuncIn reads r to its end, appending to buf (grown in arena; nil:
// the heap), calling check with the bytes read so far after each read; an
// error from check stops it (the bytes read are returned with the error).
func readAllFuncIn(r io.Reader, buf []byte, arena *spillmem.Arena, check func([]byte) error) ([]byte, error) {
	for reads := 0; ; reads++ {
		spillmem.PollSparse(arena, reads) // every 32 MiB
		if len(buf) == cap(buf) {
			nb := spillmem.MakeCap[byte](arena, len(buf), 2*cap(buf)+64<<10) // double: append grows large slices by 1.25x
			for lo := 0; lo < len(buf); lo += 16 << 20 {
				copy(nb[lo:], buf[lo:min(lo+16<<20, len(buf))])
				arena.Poll() // a spilled copy maps both halves' pages
			}
			buf = nb
		}
		n, err := r.Read(buf[len(buf):min(cap(buf), len(buf)+maxRead)])
		buf = buf[:len(buf)+n]
		if n > 0 {
			if cerr := check(buf); cerr != nil {
				return buf, cerr
			}
		}
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}
