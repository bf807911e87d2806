package term

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// ProgressDelay is how long work runs before a progress line appears:
// quick commands print nothing.
const ProgressDelay = time.Second

// Progress is a one-line indicator on a terminal's stderr for work that
// takes more than ProgressDelay: "analyze: reading snap.pickle  41 MiB of
// 88 MiB  1.2 s". It draws nothing when its writer is not a terminal. Its
// methods may be called from any goroutine.
type Progress struct {
	w       io.Writer
	start   time.Time
	label   atomic.Value // string
	done    atomic.Int64
	total   atomic.Int64
	stop    chan struct{}
	stopped sync.WaitGroup
	once    sync.Once
}

// StartProgress starts an indicator on w (usually stderr) labelled label.
// Stop it when the work is done, before writing the result.
func StartProgress(w io.Writer, label string) *Progress {
	p := &Progress{w: w, start: time.Now(), stop: make(chan struct{})}
	p.label.Store(label)
	if !IsTerminal(w) {
		return p
	}
	p.stopped.Add(1)
	go p.loop()
	return p
}

// SetLabel changes what the line says is being done.
func (p *Progress) SetLabel(label string) { p.label.Store(label) }

// SetBytes reports done of total bytes (total 0: unknown).
func (p *Progress) SetBytes(done, total int64) {
	p.done.Store(done)
	p.total.Store(total)
}

// Add counts n more bytes done.
func (p *Progress) Add(n int64) { p.done.Add(n) }

// Stop clears the line and stops drawing.
func (p *Progress) Stop() {
	if p == nil {
		return
	}
	p.once.Do(func() {
		close(p.stop)
		p.stopped.Wait()
	})
}

func (p *Progress) loop() {
	defer p.stopped.Done()
	select {
	case <-p.stop:
		return
	case <-time.After(ProgressDelay):
	}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	drawn := 0
	for {
		line := p.line()
		pad := max(drawn-len(line), 0)
		fmt.Fprintf(p.w, "\r%s%*s", line, pad, "")
		drawn = len(line)
		select {
		case <-p.stop:
			fmt.Fprintf(p.w, "\r%*s\r", drawn, "")
			return
		case <-tick.C:
		}
	}
}

func (p *Progress) line() string {
	s := Printable(p.label.Load().(string)) // labels hold file names
	done, total := p.done.Load(), p.total.Load()
	switch {
	case total > 0:
		s += fmt.Sprintf("  %d%%", min(100, done*100/total))
	case done > 0:
		s += fmt.Sprintf("  %.1f MB", float64(done)/1e6)
	}
	s += fmt.Sprintf("  %.1f s", time.Since(p.start).Seconds())
	if w := Width(p.w) - 1; len(s) > w {
		s = s[:w]
	}
	return s
}
