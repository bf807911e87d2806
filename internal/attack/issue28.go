package attack

import (
	"bytes"
	"fmt"
	"strings"
)

// The inputs of issue 28 (tried by someone who did not write this suite),
// made by code: values shared through the memo, storms of references,
// traces that made an analysis quadratic, names holding terminal escapes,
// absurd numbers.

// settingsNest is a snapshot whose allocator_settings hold, under "x", a
// value shared 20 ways 8 levels deep (20^8 = 25.6e9 leaves unshared): 551
// bytes that printing the settings turned into 10 GB.
func settingsNest(tuple, frames bool) []byte {
	return snapshotPickle(func(p *pk) {
		p.str("allocator_settings").op(opEmptyDict)
		p.memo()
		p.op(opMark).str("x")
		nest(p, tuple, frames)
		p.op(opSetitems)
	}, func(p *pk) {
		p.op(opMark)
		p.pair(1<<30, nil)
		p.pair(1<<30+512, nil)
		p.op(opAppends)
	})
}

// nest writes the shared value of settingsNest.
func nest(p *pk, tuple, frames bool) {
	var prev int
	if frames {
		prev = p.frame("train.py", 7, "step")
	} else {
		p.str("leaf")
		prev = p.memo()
	}
	for lvl := 0; lvl < 8; lvl++ {
		p.op(opPop)
		if tuple {
			p.op(opMark)
			for i := 0; i < 20; i++ {
				p.get(prev)
			}
			p.op(opTuple)
			prev = p.memo()
			continue
		}
		p.op(opEmptyList)
		cur := p.memo()
		p.op(opMark)
		for i := 0; i < 20; i++ {
			p.get(prev)
		}
		p.op(opAppends)
		prev = cur
	}
}

// batchOf is one APPENDS batch of n references to slot.
func batchOf(slot, n int) []byte {
	p := &pk{}
	p.op(opMark)
	for i := 0; i < n; i++ {
		p.get(slot)
	}
	p.op(opAppends)
	return p.b
}

func issue28Shared() []Case {
	return []Case{
		{
			Name: "shared/settings-list", Class: "shared", Command: "analyze", File: "settings.pickle",
			Make: func() []byte { return settingsNest(false, false) },
			Exit: 0, Want: "device 0: 4 trace entries", MaxOutput: 64 << 10,
		},
		{
			Name: "shared/settings-tuple", Class: "shared", Command: "analyze", File: "tuples.pickle",
			Make: func() []byte { return settingsNest(true, false) },
			Exit: 0, Want: "device 0: 4 trace entries", MaxOutput: 64 << 10,
		},
		{
			Name: "shared/settings-frames", Class: "shared", Command: "export", File: "frames.pickle",
			Args: []string{"memory-viz"},
			Make: func() []byte { return settingsNest(true, true) },
			Exit: 0, Want: `"allocator_settings"`, MaxOutput: 64 << 10,
		},
		{
			// 30M references to one trace entry (a 2-byte BINGET each):
			// one row each cost 10.9 GB and over 60 s.
			Name: "shared/entry-refs-gzip", Class: "shared", Command: "analyze", File: "refs.pickle.gz",
			Make: func() []byte {
				var slot int
				p := newPK()
				p.op(opEmptyDict)
				p.memo()
				p.op(opMark).str("segments").op(opEmptyList).str("device_traces").op(opEmptyList, opEmptyList, opMark)
				slot = p.entry("alloc", 1<<30, 512, nil)
				p.op(opAppends)
				return Repeat(Gzip, p.b, batchOf(slot, 1000), 30_000, []byte{'a', opSetitems, opStop})
			},
			Exit: 2, Want: "30000000 of 30000001 trace entries are invalid (first: device_traces[0][1] is the same entry as an earlier one",
		},
		// 540 MB of JSON and 7.4 GB for the page before: now 0.25 and 0.8 MB
		framesStorm("shared/frames-10m", nil, "a stack of 10000000 frames (cut to the", 64<<10),
		framesStorm("shared/frames-10m-json", []string{"--json"}, `"invalid_stacks":1`, 4<<20),
		framesStorm("shared/frames-10m-html", []string{"--html", "{tmp}/page.html"}, "a stack of 10000000 frames", 4<<20),
		{
			// 16M memoized empty lists: 2 bytes each, about 100 of memory.
			Name: "shared/memoized-lists-gzip", Class: "shared", Command: "analyze", File: "lists.pickle.gz",
			Make: func() []byte {
				p := newPK()
				p.op(opEmptyDict)
				p.memo()
				p.op(opMark).str("segments").op(opEmptyList).str("device_traces").op(opEmptyList, opEmptyList, opMark)
				return Repeat(Gzip, p.b, []byte{opEmptyList, opMemoize}, 16<<20, []byte{opAppends, 'a', opSetitems, opStop})
			},
			Exit: 2, Want: "more than 16 bytes a byte",
		},
	}
}

// framesStorm is a snapshot of two allocations whose stack is one frames
// list of 10M references to one frame, shared by both (a 20 MB pickle,
// 40 KB compressed): 6.2 s and 950 MB, with --json 540 MB of output, with
// --html over 60 s and 7.4 GB.
func framesStorm(name string, args []string, want string, maxOutput int64) Case {
	return Case{
		Name: name, Class: "shared", Command: "analyze", File: "frames.pickle.xz", Args: args,
		Make: func() []byte {
			p := newPK()
			p.op(opEmptyDict)
			p.memo()
			p.op(opMark).str("segments").op(opEmptyList).str("device_traces").op(opEmptyList, opEmptyList, opMark)
			p.op(opEmptyDict)
			p.memo()
			p.op(opMark).str("action").str("alloc").str("addr").int(1 << 30).str("size").int(512).str("stream").int(0).str("frames")
			p.op(opEmptyList)
			list := p.memo()
			p.op(opMark)
			fr := p.frame("train.py", 7, "step")
			for i := 0; i < 999; i++ {
				p.get(fr)
			}
			p.op(opAppends)
			q := &pk{slot: p.slot}
			q.op(opSetitems)
			q.entry("alloc", 1<<30+512, 512, func() { q.get(list) })
			q.op(opAppends, 'a', opSetitems, opStop)
			return Repeat(Xz, p.b, batchOf(fr, 1000), 9_999, q.b)
		},
		Exit: 0, Want: want, MaxOutput: maxOutput,
	}
}

func issue28Trace() []Case {
	return []Case{
		{
			// GPU events no launch matches, after the first step's host
			// span and before any of its GPU work: 240k took over 60 s.
			Name: "cpu/trace-unlaunched", Class: "cpu", Command: "trace", File: "unlaunched.pt.trace.json",
			Make: func() []byte {
				return traceEvents(240_001, func(i int) string {
					if i == 0 {
						return `{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 10}`
					}
					return fmt.Sprintf(`{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": %d, "dur": 1, "args": {"stream": 7, "device": 0}}`, 20+i)
				})
			},
			Exit: 0, Want: "240,000",
		},
	}
}

// Names that drive a terminal: set the window title, clear the screen,
// an 8-bit CSI.
const escJSON = `\u001b]0;owned\u0007\u001b[2J\u009b31m`

func issue28Escapes() []Case {
	return []Case{
		{
			Name: "escape/snapshot-frames", Class: "escape", Command: "analyze", File: "frames.json",
			Make: func() []byte {
				return snapshotJSONFrames(`[{"filename": "train` + escJSON + `.py", "line": 7, "name": "step` + escJSON + `"}]`)
			},
			Exit: 0, Want: `train\x1b]0;owned\x07\x1b[2J\u009b31m.py`, NotWant: "\x1b",
		},
		{
			// diff against the same snapshot with plain frames: the stack
			// with the hostile names is listed as gone
			Name: "escape/diff-frames", Class: "escape", Command: "diff", File: "frames.json", Args: []string{"{second}"},
			Make: func() []byte {
				return snapshotJSONFrames(`[{"filename": "train` + escJSON + `.py", "line": 7, "name": "step` + escJSON + `"}]`)
			},
			Second: func() []byte { return jsonSnapshot(20, func(int, string) string { return "" }) },
			Exit:   0, Want: `train\x1b]0;owned\x07\x1b[2J\u009b31m.py`, NotWant: "\x1b",
		},
		{
			Name: "escape/trace-names", Class: "escape", Command: "trace", File: "names.pt.trace.json",
			Make: func() []byte {
				return traceEvents(100, func(i int) string {
					if i%2 == 0 {
						return fmt.Sprintf(`{"ph": "X", "cat": "cpu_op", "name": "aten::mm%s", "pid": 1, "tid": 1, "ts": %d, "dur": 5}`, escJSON, 10*i)
					}
					return fmt.Sprintf(`{"ph": "X", "cat": "kernel", "name": "gemm%s", "pid": 0, "tid": 7, "ts": %d, "dur": 3, "args": {"stream": 7, "device": 0}}`, escJSON, 10*i)
				})
			},
			Exit: 0, Want: `aten::mm\x1b]0;owned\x07\x1b[2J`, NotWant: "\x1b",
		},
	}
}

// snapshotJSONFrames is a small valid JSON snapshot whose entries have the
// given frames.
func snapshotJSONFrames(frames string) []byte {
	return []byte(strings.Replace(string(jsonSnapshot(20, func(int, string) string { return "" })), `[{"filename": "train.py", "line": 7, "name": "step"}]`, frames, -1))
}

// absurdJSON is a JSON snapshot of one 2 MiB segment and entries.
func absurdJSON(entries ...string) []byte {
	var b bytes.Buffer
	b.WriteString(`{"segments": [{"device": 0, "address": 1073741824, "total_size": 2097152, "allocated_size": 0, "active_size": 0, "requested_size": 0, "stream": 0, "segment_type": "large", "blocks": [{"address": 1073741824, "size": 2097152, "requested_size": 0, "state": "inactive"}]}], "device_traces": [[`)
	b.WriteString(strings.Join(entries, ", "))
	b.WriteString("]]}")
	return b.Bytes()
}

func absurdEntry(action string, addr, size uint64, t int) string {
	return fmt.Sprintf(`{"action": "%s", "addr": %d, "size": %d, "stream": 0, "time_us": %d, "frames": [{"filename": "train.py", "line": 7, "name": "step"}]}`, action, addr, size, 1000+t)
}

func issue28Absurd() []Case {
	return []Case{
		{
			Name: "absurd/alloc-2^62", Class: "absurd", Command: "analyze", File: "huge.json",
			Make: func() []byte {
				var es []string
				for i := 0; i < 4; i++ {
					es = append(es, absurdEntry("alloc", 1<<40+uint64(i)*4096, 1<<62, i))
				}
				return absurdJSON(es...)
			},
			Exit: 2, Want: "4 of 4 trace entries are invalid (first: device_traces[0][0]: alloc of size 4611686018427387904, more than any device holds", Small: true,
		},
		{
			Name: "absurd/size-2^63-1", Class: "absurd", Command: "analyze", File: "max.json",
			Make: func() []byte {
				return absurdJSON(absurdEntry("alloc", 1<<40, 1<<63-1, 0), absurdEntry("alloc", 2<<40, 512, 1), absurdEntry("free_completed", 2<<40, 512, 2))
			},
			Exit: 0, Want: "invalid-entries: 1 of 3 trace entries", Small: true,
		},
		{
			Name: "absurd/free-unknown-1TiB", Class: "absurd", Command: "analyze", File: "free.json", Args: []string{"--json"},
			Make: func() []byte {
				return absurdJSON(absurdEntry("alloc", 1<<30, 512, 0), absurdEntry("free_completed", 7<<40, 1<<40, 1))
			},
			Exit: 0, Want: "the peak of 1.00 TiB allocated is more than the 2.00 MiB ever reserved", Small: true,
		},
		{
			// 1M allocations at one address (78 MB of pickle): the
			// entries are judged and refused.
			Name: "absurd/same-address", Class: "absurd", Command: "analyze", File: "same.pickle.gz",
			Make: func() []byte { return sameAddress(1000) },
			Exit: 2, Want: "999999 of 1000000 trace entries are invalid (first: device_traces[0][1]: alloc at 0x40000000, which the trace allocated before",
		},
		{
			// The issue's 10M (a 4.77 GiB peak, an end of 0 B; a 270 KB
			// gzip of a 780 MB pickle): refused as the bomb it is before
			// the decode of all of it.
			Name: "absurd/same-address-10m", Class: "absurd", Command: "analyze", File: "same10m.pickle.gz",
			Make: func() []byte { return sameAddress(10000) },
			Exit: 2, Want: "refused as a decompression bomb",
		},
		{
			Name: "absurd/blocks-past-segment", Class: "absurd", Command: "analyze", File: "blocks.json",
			Make: func() []byte {
				b := absurdJSON(absurdEntry("alloc", 1<<41, 512, 0), absurdEntry("free_completed", 1<<41, 512, 1))
				return bytes.Replace(b, []byte(`"blocks": [{"address": 1073741824, "size": 2097152,`), []byte(`"blocks": [{"address": 1073741824, "size": 2147483648,`), 1)
			},
			Exit: 2, Want: "blocks[0] ends past the segment's total_size 2097152", Small: true,
		},
		{
			Name: "absurd/not-an-entry", Class: "absurd", Command: "analyze", File: "seven.json",
			Make: func() []byte {
				return []byte(`{"segments": [], "device_traces": [[7]]}`)
			},
			Exit: 2, Want: "1 of 1 trace entries are invalid (first: device_traces[0][0] is a int, expected a dict)", Small: true,
		},
	}
}

// sameAddress is a gzipped snapshot pickle of blocks x 1000 allocations of
// 512 bytes at one address.
func sameAddress(blocks int) []byte {
	p := newPK()
	p.op(opEmptyDict)
	p.memo()
	p.op(opMark).str("segments").op(opEmptyList).str("device_traces").op(opEmptyList, opEmptyList)
	e := &pk{slot: p.slot}
	e.op(opMark)
	for i := 0; i < 1000; i++ {
		e.entry("alloc", 1<<30, 512, nil)
	}
	e.op(opAppends)
	return Repeat(Gzip, p.b, e.b, blocks, []byte{'a', opSetitems, opStop})
}
