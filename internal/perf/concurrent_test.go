package perf

import (
	"sync/atomic"
	"testing"
)

// TestParallel checks that every index runs once.
func TestParallel(t *testing.T) {
	for _, n := range []int{0, 1, 2, 3, 100} {
		var calls atomic.Int64
		seen := make([]int32, n)
		parallel(n, func(i int) {
			calls.Add(1)
			atomic.AddInt32(&seen[i], 1)
		})
		if calls.Load() != int64(n) {
			t.Errorf("n=%d: %d calls", n, calls.Load())
		}
		for i, c := range seen {
			if c != 1 {
				t.Errorf("n=%d: index %d ran %d times", n, i, c)
			}
		}
	}
}

// TestTaskPanic checks that a task's panic is raised in the goroutine
// that waits for it, where the CLI recovers.
func TestTaskPanic(t *testing.T) {
	for name, wait := range map[string]func(){
		"async": func() { async(func() int { panic("boom") })() },
		"parallel": func() {
			parallel(4, func(i int) {
				if i == 2 {
					panic("boom")
				}
			})
		},
	} {
		func() {
			defer func() {
				if r := recover(); r != "boom" {
					t.Errorf("%s: recovered %v, want boom", name, r)
				}
			}()
			wait()
		}()
	}
}
