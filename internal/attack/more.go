package attack

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/ptscope/ptscope/internal/snapshot/snapgen"
)

func budget() []Case {
	return []Case{
		{
			// Valid pickle opcodes that cost ~80 bytes of memory per byte
			// of input (4M empty dicts, as in Python): within the default
			// budget it runs to its (wrong-shape) end; with --max-memory
			// 128MiB it stops where the budget ran out.
			Name: "budget/pickle-empty-dicts", Class: "budget", Command: "analyze", File: "dicts.pickle",
			Args: []string{"--max-memory", "128MiB"},
			Make: func() []byte {
				b := append([]byte(nil), pickleHead...)
				b = append(b, bytes.Repeat([]byte{opEmptyDict}, 4<<20)...)
				return append(b, opStop)
			},
			Exit: 2, Want: "over the memory budget (--max-memory 128 MiB",
			MaxRSS: 200 << 20,
		},
		{
			// A valid JSON snapshot whose 150,000 allocations each have a
			// stack of their own: it is read within 64 MiB, and the
			// analysis, which needs more, is stopped by the watchdog.
			Name: "budget/json-analysis", Class: "budget", Command: "analyze", File: "values.json",
			Args: []string{"--max-memory", "64MiB"},
			Make: func() []byte {
				var b bytes.Buffer
				b.WriteString(`{"segments": [], "device_traces": [[`)
				for i := 0; i < 150_000; i++ {
					fmt.Fprintf(&b, `{"action": "alloc", "addr": %d, "size": 512, "frames": [{"filename": "f%d.py", "line": %d, "name": "g"}]}, `, i*512, i, i)
				}
				b.WriteString(`{"action": "alloc", "addr": 0, "size": 512}]]}`)
				return b.Bytes()
			},
			Exit: 2, Want: "over the memory budget (--max-memory 64.0 MiB",
			MaxRSS: 128 << 20,
		},
	}
}

// jsonSnapshot is a small valid JSON snapshot of n alloc/free pairs whose
// field values field may replace (snapgen.JSONSnapshot).
func jsonSnapshot(n int, field func(i int, key string) string) []byte {
	return snapgen.JSONSnapshot(n, 1_700_000_000_000_000, `[{"filename": "train.py", "line": 7, "name": "step"}]`, field)
}

func traceEvents(n int, ev func(i int) string) []byte {
	var b strings.Builder
	b.WriteString(`{"schemaVersion": 1, "traceEvents": [` + "\n")
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteString(",\n")
		}
		if s := ev(i); s != "" {
			b.WriteString("  " + s)
			continue
		}
		fmt.Fprintf(&b, `  {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": %d, "dur": 5}`, 10*i)
	}
	b.WriteString("\n]}")
	return []byte(b.String())
}

func coercion() []Case {
	return []Case{
		{
			Name: "coercion/json-size-str", Class: "coercion", Command: "analyze", File: "sizes.json",
			Make: func() []byte {
				return jsonSnapshot(50, func(i int, k string) string {
					if k == "size" && i%25 == 4 {
						return `"512"`
					}
					return ""
				})
			},
			Exit: 0, Want: "invalid-entries", Small: true,
		},
		{
			Name: "coercion/json-negative-size", Class: "coercion", Command: "analyze", File: "negative.json",
			Make: func() []byte {
				return jsonSnapshot(50, func(i int, k string) string {
					if k == "size" && i == 10 {
						return "-1073741824"
					}
					return ""
				})
			},
			Exit: 0, Want: "alloc of size -1073741824", Small: true,
		},
		{
			Name: "coercion/json-time-back", Class: "coercion", Command: "analyze", File: "time.json",
			Make: func() []byte {
				return jsonSnapshot(50, func(i int, k string) string {
					if k == "time_us" && i == 30 {
						return "5"
					}
					return ""
				})
			},
			Exit: 0, Want: "is before the previous entry", Small: true,
		},
		{
			Name: "coercion/json-mostly-invalid", Class: "coercion", Command: "analyze", File: "mostly.json",
			Make: func() []byte {
				return jsonSnapshot(50, func(i int, k string) string {
					if k == "size" && i%3 != 0 {
						return `"NaN"`
					}
					return ""
				})
			},
			Exit: 2, Want: "66 of 100 trace entries are invalid", Small: true,
		},
		{
			// The parallel reader leaves wrong-typed entries to the general
			// decoder: same counts either way.
			Name: "coercion/pickle-size-str", Class: "coercion", Command: "analyze", File: "sizes.pickle",
			Make: func() []byte {
				var b bytes.Buffer
				if err := snapgen.Write(&b, snapgen.Options{Entries: 60_000, Seed: 5, StrSizeEvery: 1000}); err != nil {
					panic(err)
				}
				return b.Bytes()
			},
			Exit: 0, Want: "60 of 60000 trace entries are malformed",
		},
		{
			Name: "coercion/trace-bad-fields", Class: "coercion", Command: "trace", File: "fields.pt.trace.json",
			Make: func() []byte {
				return traceEvents(100, func(i int) string {
					switch i {
					case 20:
						return `{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": "noon", "dur": 5}`
					case 40:
						return `{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 400, "dur": -50}`
					}
					return ""
				})
			},
			Exit: 0, Want: "2 events had a field of the wrong type", Small: true,
		},
		{
			Name: "coercion/trace-mostly-invalid", Class: "coercion", Command: "trace", File: "mostly.pt.trace.json",
			Make: func() []byte {
				return traceEvents(100, func(i int) string {
					if i%4 != 0 {
						return fmt.Sprintf(`{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": %d, "dur": "NaN"}`, i)
					}
					return ""
				})
			},
			Exit: 2, Want: "75 of 100 events are invalid", Small: true,
		},
	}
}

func formats() []Case {
	valid := func() []byte { return jsonSnapshot(50, func(int, string) string { return "" }) }
	return []Case{
		{
			Name: "format/json-bom", Class: "format", Command: "analyze", File: "bom.json",
			Make: func() []byte { return append([]byte("\ufeff"), valid()...) },
			Exit: 0, Want: "== device 0: 100 trace entries", Small: true,
		},
		{
			Name: "format/trace-bom", Class: "format", Command: "trace", File: "bom.pt.trace.json",
			Make: func() []byte { return append([]byte("\ufeff"), traceEvents(20, func(int) string { return "" })...) },
			Exit: 0, Want: "20 events", Small: true,
		},
		{
			Name: "format/pickle-stdin", Class: "format", Command: "analyze", File: "stdin.pickle.zst", Stdin: true,
			Make: func() []byte {
				var b bytes.Buffer
				if err := snapgen.Write(&b, snapgen.Options{Entries: 3000, Seed: 2}); err != nil {
					panic(err)
				}
				return compress(Zstd, b.Bytes())
			},
			Exit: 0, Want: "3,000 trace entries",
		},
		{
			Name: "format/trace-stdin", Class: "format", Command: "trace", File: "stdin.pt.trace.json.gz", Stdin: true,
			Make: func() []byte { return compress(Gzip, traceEvents(30, func(int) string { return "" })) },
			Exit: 0, Want: "30 events",
		},
		{
			// Escape bytes in a file name reach the terminal escaped.
			Name: "format/escape-name", Class: "format", Command: "analyze", File: "evil\x1b]0;owned\x07\x1b[2J.pickle",
			Make: func() []byte { return []byte{opProto, 4, 0xff} },
			Exit: 2, Want: `evil\x1b]0;owned\a\x1b[2J.pickle`, NotWant: "\x1b", Small: true,
		},
	}
}

// Mutate returns n variants of data, each damaged in one of the ways files
// get damaged (deterministic for a seed): cut short, bytes overwritten with
// random ones, a stretch zeroed, deleted or repeated.
func Mutate(data []byte, seed uint64, n int) [][]byte {
	rng := newRand(seed)
	out := make([][]byte, 0, n)
	for i := 0; i < n && len(data) > 0; i++ {
		b := append([]byte(nil), data...)
		at := rng.intn(len(b))
		span := 1 + rng.intn(min(len(b)-at, 4096))
		switch i % 5 {
		case 0: // cut short
			b = b[:at]
		case 1: // random bytes
			for k := 0; k < 1+rng.intn(8); k++ {
				b[rng.intn(len(b))] = byte(rng.intn(256))
			}
		case 2: // a zeroed stretch
			clear(b[at : at+span])
		case 3: // a deleted stretch
			b = append(b[:at], b[at+span:]...)
		case 4: // a repeated stretch
			b = append(b[:at+span], append(append([]byte(nil), data[at:at+span]...), data[at+span:]...)...)
		}
		out = append(out, b)
	}
	return out
}

// rand is a small deterministic generator (splitmix64), so that the
// mutations are the same on every machine and Go version.
type rand struct{ s uint64 }

func newRand(seed uint64) *rand { return &rand{seed} }

func (r *rand) next() uint64 {
	r.s += 0x9e3779b97f4a7c15
	z := r.s
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

func (r *rand) intn(n int) int { return int(r.next() % uint64(n)) }
