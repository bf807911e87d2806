package perf

import (
	"runtime"
	"sync/atomic"
)

// The analyses of a trace run as tasks over the read-only model: each
// writes only its own results, and whoever needs them waits. A task's
// panic is raised again in the goroutine that waits, where the CLI and
// the server recover from it, as they would had it run there.

// task is work running in its own goroutine.
type task struct {
	done chan struct{}
	p    any // the panic it raised, if any
}

// start runs fn in a new goroutine.
func start(fn func()) *task {
	t := &task{done: make(chan struct{})}
	go func() {
		defer close(t.done)
		defer func() { t.p = recover() }()
		fn()
	}()
	return t
}

// wait waits for the task and raises its panic again.
func (t *task) wait() {
	<-t.done
	if t.p != nil {
		panic(t.p)
	}
}

// async runs fn in a new goroutine; the function it returns waits for
// fn's result.
func async[T any](fn func() T) func() T {
	var v T
	t := start(func() { v = fn() })
	return func() T {
		t.wait()
		return v
	}
}

// parallel calls fn(0) ... fn(n-1) on up to GOMAXPROCS goroutines and
// waits for them.
func parallel(n int, fn func(i int)) {
	workers := min(n, runtime.GOMAXPROCS(0))
	if workers <= 1 {
		for i := 0; i < n; i++ {
			fn(i)
		}
		return
	}
	var next atomic.Int64
	ts := make([]*task, workers)
	for w := range ts {
		ts[w] = start(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				fn(i)
			}
		})
	}
	for _, t := range ts {
		t.wait()
	}
}
