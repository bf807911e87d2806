package attack

import (
	"fmt"
)

// Three families of the suite's own, beyond the inputs of issue 28:
//
//   - bidi: names holding the Unicode bidirectional controls ("Trojan
//     Source": U+202E prints the rest of a line reversed), which cannot
//     drive a terminal but change what it shows; they print escaped.
//   - unmatched: frees the trace never saw allocated, as a wrapped ring
//     buffer has a few of; each is an allocation from before the
//     recording, so 200,000 of them, or a thousand of one address, made
//     peaks no device holds.
//   - trace-shape: traces whose times and links are absurd: times beyond
//     any clock, 100,000 launches and kernels sharing one correlation id,
//     200,000 operators each inside the previous one.
func families() []Case {
	var cs []Case
	cs = append(cs, bidiCases()...)
	cs = append(cs, unmatchedCases()...)
	cs = append(cs, traceShapeCases()...)
	return cs
}

const bidiJSON = `\u202e\u2066\u200f`

func bidiCases() []Case {
	return []Case{
		{
			Name: "bidi/snapshot-frames", Class: "bidi", Command: "analyze", File: "bidi.json",
			Make: func() []byte {
				return snapshotJSONFrames(`[{"filename": "train` + bidiJSON + `yp.py", "line": 7, "name": "step` + bidiJSON + `"}]`)
			},
			Exit: 0, Want: `train\u202e\u2066\u200fyp.py`, NotWant: "\u202e", Small: true,
		},
		{
			Name: "bidi/trace-names", Class: "bidi", Command: "trace", File: "bidi.pt.trace.json",
			Make: func() []byte {
				return traceEvents(50, func(i int) string {
					return fmt.Sprintf(`{"ph": "X", "cat": "cpu_op", "name": "aten::mm%s", "pid": 1, "tid": 1, "ts": %d, "dur": 5}`, bidiJSON, 10*i)
				})
			},
			Exit: 0, Want: `aten::mm\u202e\u2066\u200f`, NotWant: "\u202e", Small: true,
		},
	}
}

func unmatchedCases() []Case {
	return []Case{
		{
			// 200,000 frees of addresses never allocated, 1 GiB each,
			// within one 2 MiB segment.
			Name: "unmatched/frees-1GiB", Class: "unmatched", Command: "analyze", File: "frees.json", Args: []string{"--json"},
			Make: func() []byte {
				es := make([]string, 0, 200_000)
				for i := 0; i < 200_000; i++ {
					es = append(es, absurdEntry("free_completed", 1<<44+uint64(i)<<30, 1<<30, i))
				}
				return absurdJSON(es...)
			},
			Exit: 0, Want: "is more than the 2.00 MiB ever reserved",
		},
		{
			// A thousand frees of one address the trace never allocated.
			Name: "unmatched/frees-one-address", Class: "unmatched", Command: "analyze", File: "again.json",
			Make: func() []byte {
				es := []string{absurdEntry("alloc", 1<<30, 512, 0), absurdEntry("free_completed", 1<<30, 512, 1)}
				for i := 0; i < 1000; i++ {
					es = append(es, absurdEntry("free_completed", 5<<40, 1<<20, 2+i))
				}
				return absurdJSON(es...)
			},
			Exit: 2, Want: "999 of 1002 trace entries are invalid (first: device_traces[0][3]: free_completed at 0x50000000000, which the trace freed before with no alloc between", Small: true,
		},
	}
}

func traceShapeCases() []Case {
	return []Case{
		{
			Name: "trace-shape/times", Class: "trace-shape", Command: "trace", File: "times.pt.trace.json",
			Make: func() []byte {
				return traceEvents(60, func(i int) string {
					switch i {
					case 20:
						return `{"ph": "X", "cat": "cpu_op", "name": "aten::far", "pid": 1, "tid": 1, "ts": 9.2e15, "dur": 5}`
					case 30:
						return `{"ph": "X", "cat": "cpu_op", "name": "aten::long", "pid": 1, "tid": 1, "ts": 300, "dur": 9.2e15}`
					case 40:
						return `{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": -9.2e15, "dur": 9.2e15, "args": {"stream": 7, "device": 0}}`
					}
					return ""
				})
			},
			Exit: 0, Want: "3 events had a field of the wrong type or an impossible value, read as 0 or dropped", NotWant: "46744074", Small: true,
		},
		{
			Name: "trace-shape/one-correlation", Class: "trace-shape", Command: "trace", File: "corr.pt.trace.json",
			Make: func() []byte {
				return traceEvents(200_000, func(i int) string {
					if i%2 == 0 {
						return fmt.Sprintf(`{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": %d, "dur": 2, "args": {"correlation": 1}}`, 5*i)
					}
					return fmt.Sprintf(`{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": %d, "dur": 3, "args": {"correlation": 1, "stream": 7, "device": 0}}`, 5*i+2)
				})
			},
			Exit: 0, Want: "100,000",
		},
		{
			Name: "trace-shape/nested", Class: "trace-shape", Command: "trace", File: "nested.pt.trace.json",
			Make: func() []byte {
				const n = 200_000
				return traceEvents(n, func(i int) string {
					return fmt.Sprintf(`{"ph": "X", "cat": "cpu_op", "name": "aten::f%d", "pid": 1, "tid": 1, "ts": %d, "dur": %d}`, i%7, i, 2*(n-i))
				})
			},
			Exit: 0, Want: "200,000 events",
		},
	}
}
