package perf

import (
	"bytes"
	"encoding/json"
	"runtime"
	"testing"
)

// TestAnalyzeSameOnAnyProcs checks that the concurrent tasks give the
// same result whatever the parallelism: the real traces analysed with
// GOMAXPROCS 1 (tasks one after another) and 4, repeatedly, marshal to
// the same JSON.
func TestAnalyzeSameOnAnyProcs(t *testing.T) {
	for _, name := range []string{gpt2Trace, "gpt2tiny_with_stack.pt.trace.json"} {
		tr := readTrace(t, name)
		opts := []Options{{}, {GroupByShape: true, Annotations: true}}
		for _, opt := range opts {
			var want []byte
			for _, procs := range []int{1, 4, 4, 1, 4} {
				prev := runtime.GOMAXPROCS(procs)
				got, err := json.Marshal(Analyze(tr, opt))
				runtime.GOMAXPROCS(prev)
				if err != nil {
					t.Fatal(err)
				}
				if want == nil {
					want = got
				} else if !bytes.Equal(got, want) {
					t.Fatalf("%s %+v: GOMAXPROCS=%d gives another result", name, opt, procs)
				}
			}
		}
	}
}
