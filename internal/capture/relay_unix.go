//go:build !windows

package capture

import (
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// relay passes the command's stderr on to ptscope's when that is a pipe or
// a socket (and its stdout too when ptscope's stdout and stderr are the
// same pipe, as with `2>&1 | tee log`, so that their order is kept), and
// notes whether the command's output ended mid-line: ptscope's own lines
// after the run must start on a line of their own, and a pipe cannot be
// asked what was last written to it. On a terminal or a file the streams
// are inherited as they are (lineStart asks those).
type relay struct {
	r, w *os.File // the pipe the command writes to
	out  *os.File // ptscope's stderr
	done chan struct{}

	mu      sync.Mutex
	last    byte // the last byte passed on
	copied  bool
	stopped bool // out failed (a closed pipe): the command's writes now fail too
}

// newRelay returns the command's stdout and stderr: stdout and stderr
// themselves, or the write end of a relay (nil when there is none).
func newRelay(stdout, stderr io.Writer) (io.Writer, io.Writer, *relay) {
	errF, ok := stderr.(*os.File)
	if !ok {
		return stdout, stderr, nil
	}
	st, err := errF.Stat()
	if err != nil || st.Mode()&(os.ModeNamedPipe|os.ModeSocket) == 0 {
		return stdout, stderr, nil
	}
	r, w, err := os.Pipe()
	if err != nil {
		return stdout, stderr, nil
	}
	rl := &relay{r: r, w: w, out: errF, done: make(chan struct{}), last: '\n'}
	childOut := stdout
	if outF, ok := stdout.(*os.File); ok {
		if ost, err := outF.Stat(); err == nil && os.SameFile(ost, st) {
			childOut = w
		}
	}
	go rl.copy()
	return childOut, w, rl
}

func (rl *relay) copy() {
	defer close(rl.done)
	buf := make([]byte, 32<<10)
	for {
		n, err := rl.r.Read(buf)
		if n > 0 {
			if _, werr := rl.out.Write(buf[:n]); werr != nil {
				// as if the command wrote to the closed pipe itself
				rl.mu.Lock()
				rl.stopped = true
				rl.mu.Unlock()
				rl.r.Close()
				return
			}
			rl.mu.Lock()
			rl.last, rl.copied = buf[n-1], true
			rl.mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

// started closes ptscope's copy of the command's end.
func (rl *relay) started() {
	if rl != nil {
		rl.w.Close()
	}
}

// abort undoes newRelay when the command did not start.
func (rl *relay) abort() {
	if rl != nil {
		rl.w.Close()
		<-rl.done
		rl.r.Close()
	}
}

// finish waits until every writer closed the pipe, at most wait (a
// background process the command left may hold it: its output goes on
// being passed on while ptscope lives).
func (rl *relay) finish(wait time.Duration) {
	if rl == nil {
		return
	}
	select {
	case <-rl.done:
		rl.r.Close()
	case <-time.After(wait):
	}
}

// midLine reports whether the command's output ended without a newline.
func (rl *relay) midLine() bool {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	return rl.copied && !rl.stopped && rl.last != '\n'
}

// lineStart returns what to write to status before ptscope's first line
// after the run so that it starts on a line of its own, when status is the
// command's stderr: a newline when the command's output ended mid-line (as
// the relay saw it, or as the last byte of a file shows); on a terminal, a
// row of spaces that wraps to a new line only when the cursor is not at the
// start of one, then a return and a clear (what zsh does before a prompt).
func lineStart(status, cmdStderr io.Writer, rl *relay) string {
	if rl != nil {
		if rl.midLine() {
			return "\n"
		}
		return ""
	}
	f, ok := status.(*os.File)
	g, ok2 := cmdStderr.(*os.File)
	if !ok || !ok2 {
		return ""
	}
	st, err := f.Stat()
	gst, err2 := g.Stat()
	if err != nil || err2 != nil || !os.SameFile(st, gst) {
		return ""
	}
	switch {
	case st.Mode()&os.ModeCharDevice != 0:
		if _, cols := terminalSize(f.Fd()); cols > 0 {
			return strings.Repeat(" ", cols) + "\r\x1b[K"
		}
	case st.Mode().IsRegular() && st.Size() > 0:
		// the stream is open for writing only: read the file anew
		r, err := os.Open("/dev/fd/" + strconv.Itoa(int(f.Fd())))
		if err != nil {
			return ""
		}
		defer r.Close()
		rst, err := r.Stat()
		if err != nil || !os.SameFile(rst, st) {
			return ""
		}
		var b [1]byte
		if _, err := r.ReadAt(b[:], rst.Size()-1); err == nil && b[0] != '\n' {
			return "\n"
		}
	}
	return ""
}
