package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// SignalContext returns a context that ends at the first SIGINT (Ctrl-C)
// or SIGTERM, for Main: the command then stops within a second with exit
// 130. From then on the signals have their default action again, so a
// second Ctrl-C kills at once. stop releases the signals.
func SignalContext() (ctx context.Context, stop func()) {
	ctx, stop = signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop()
	}()
	return ctx, stop
}

// interruptGrace is how long an interrupted command has to stop on its
// own (its readers check the context every MiB or so, its writers at each
// write) before invoke returns without it.
const interruptGrace = 400 * time.Millisecond

// interrupted ends an interrupted command: the temporary files it still
// holds are removed, one line is printed, and the exit code is 130.
func (e *env) interrupted() int {
	e.temps.removeAll()
	fmt.Fprintln(e.stderr, "ptscope: interrupted")
	return ExitInterrupted
}

// doneOrNever is ctx.Done(), or a channel that never closes for a command
// that handles signals itself.
func doneOrNever(ctx context.Context, never bool) <-chan struct{} {
	if never {
		return nil
	}
	return ctx.Done()
}

// tempFiles are the temporary files and folders a command is writing its
// output into (renamed into place when complete), so that an interrupted
// command that did not get to remove them is cleaned up by invoke.
type tempFiles struct {
	mu    sync.Mutex
	paths map[string]bool
}

// temp registers path (a temporary file or folder) and returns the
// function that forgets it, once it was renamed into place or removed.
func (e *env) temp(path string) (forget func()) {
	if e.temps == nil {
		e.temps = &tempFiles{}
	}
	t := e.temps
	t.mu.Lock()
	if t.paths == nil {
		t.paths = map[string]bool{}
	}
	t.paths[path] = true
	t.mu.Unlock()
	return func() {
		t.mu.Lock()
		delete(t.paths, path)
		t.mu.Unlock()
	}
}

func (t *tempFiles) removeAll() {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for p := range t.paths {
		os.RemoveAll(p)
	}
	t.paths = nil
}

// ctxWriter fails its writes once ctx is done, so that a long write of an
// output file stops at Ctrl-C.
type ctxWriter struct {
	ctx context.Context
	w   io.Writer
}

func (c ctxWriter) Write(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.w.Write(p)
}

// raw is stdout as Main was given it (see env.rawStdout).
func (e *env) raw() io.Writer {
	if e.rawStdout != nil {
		return e.rawStdout
	}
	return e.stdout
}
