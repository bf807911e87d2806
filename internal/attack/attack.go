// Package attack makes hostile inputs for ptscope's readers, in the spirit of
// Go's own trace test generators: small programs of code instead of large
// files in the repository. Each Case is one input of one class
// (decompression bombs, deep nesting, huge strings, many values, length
// fields that lie, quadratic opcodes, truncations and mutations of real
// artifacts, fields of the wrong type) with what ptscope must answer: an
// exit code and a line it must print, within the time and memory bounds of
// docs/security.md. The tests run every case through the real command: in
// a child process, whose peak RSS and CPU time they measure, when the case
// is about such a bound, else in their own process, in parallel; the fuzz
// targets of the decoders take the small cases as seeds.
//
// Nothing here is an exploit of a known bug: the cases are the shapes an
// attacker (or a damaged file) would try first, kept as regression tests.
package attack

import (
	"bytes"
	"encoding/binary"
	"strings"
)

// Case is one hostile input.
type Case struct {
	Name  string // class/variant, also the file name stem
	Class string // bomb, nesting, string, values, length, cpu, coercion, format
	// Command is the ptscope subcommand that reads the input ("analyze" or
	// "trace").
	Command string
	// File is the file name the input is written under (its suffix matters
	// to nothing but humans: ptscope detects formats by content).
	File string
	// Make returns the input's bytes (compressed where the case says so).
	Make func() []byte
	// Args are flags given before the input (e.g. --max-memory); "{tmp}"
	// in one is a temporary folder of the test's, "{second}" the file
	// Second makes (diff's other side).
	Args   []string
	Second func() []byte
	// Stdin: the input is piped to the command's standard input and named
	// "-" (the harness writes it to the pipe).
	Stdin bool
	// Exit is the exit code ptscope must return; Want is a text that its
	// output (stdout and stderr) must contain, NotWant one it must not.
	Exit    int
	Want    string
	NotWant string
	// MaxRSS overrides the bound on peak RSS (default 512 MiB).
	MaxRSS int64
	// MaxOutput bounds what the command writes: stdout and the files in
	// {tmp} (0: no bound).
	MaxOutput int64
	// Small cases are cheap enough to seed the fuzzers.
	Small bool
}

// Pickle opcodes used by the generators.
const (
	opProto      = 0x80
	opFrame      = 0x95
	opStop       = '.'
	opNone       = 'N'
	opMark       = '('
	opEmptyDict  = '}'
	opEmptyList  = ']'
	opEmptyTuple = ')'
	opMemoize    = 0x94
	opBinget     = 'h'
	opLongBinget = 'j'
	opPop        = '0'
	opReduce     = 'R'
	opTuple      = 't'
	opSetitems   = 'u'
	opAppends    = 'e'
	opBinint     = 'J'
	opBinunicode = 'X'
	opUnicode8   = 0x8d
	opShortUni   = 0x8c
	opLong       = 'L'
	opInt        = 'I'
	opGlobal     = 'c'
)

// pickleHead is a protocol-4 pickle's first bytes, without a FRAME (the
// decoders accept both).
var pickleHead = []byte{opProto, 4}

func shortStr(s string) []byte {
	return append([]byte{opShortUni, byte(len(s))}, s...)
}

func u64(n uint64) []byte { return binary.LittleEndian.AppendUint64(nil, n) }

// Cases returns every case, in a fixed order.
func Cases() []Case {
	var cs []Case
	cs = append(cs, bombs()...)
	cs = append(cs, nesting()...)
	cs = append(cs, strs()...)
	cs = append(cs, values()...)
	cs = append(cs, cpu()...)
	cs = append(cs, budget()...)
	cs = append(cs, coercion()...)
	cs = append(cs, formats()...)
	cs = append(cs, issue28Shared()...)
	cs = append(cs, issue28Trace()...)
	cs = append(cs, issue28Escapes()...)
	cs = append(cs, issue28Absurd()...)
	cs = append(cs, families()...)
	return cs
}

func bombs() []Case {
	var cs []Case
	for _, b := range []struct {
		c     Compression
		total int64
	}{{Zstd, 4 << 30}, {Gzip, 2 << 30}, {Xz, 1 << 30}} {
		c := b.c
		total := b.total
		cs = append(cs, Case{
			Name: "bomb/pickle-zeros-" + string(c), Class: "bomb", Command: "analyze",
			File: "zeros.pickle" + c.Ext(),
			Make: func() []byte { return Bomb(c, pickleHead, 0, total, nil) },
			Exit: 2, Want: "offset 2: opcode 0x00: unknown opcode",
		})
	}
	cs = append(cs,
		Case{
			// A valid pickle whose only value is a 4 GiB string: refused at
			// its length field, before it is read.
			Name: "bomb/pickle-string-zstd", Class: "bomb", Command: "analyze", File: "string.pickle.zst",
			Make: func() []byte {
				head := append(append(append([]byte(nil), pickleHead...), opUnicode8), u64(4<<30)...)
				return Bomb(Zstd, head, 'a', 4<<30, []byte{opStop})
			},
			Exit: 2, Want: "exceeds the limit",
		},
		Case{
			Name: "bomb/json-brackets-zstd", Class: "bomb", Command: "analyze", File: "brackets.json.zst",
			Make: func() []byte { return Bomb(Zstd, nil, '[', 1<<30, nil) },
			Exit: 2, Want: "nested deeper than",
		},
		Case{
			Name: "bomb/trace-name-zstd", Class: "bomb", Command: "trace", File: "name.pt.trace.json.zst",
			Make: func() []byte {
				head := []byte(`{"traceEvents": [{"ph": "X", "cat": "cpu_op", "ts": 1, "dur": 1, "name": "`)
				return Bomb(Zstd, head, 'a', 2<<30, []byte(`"}]}`))
			},
			// a 2 GiB name in a few hundred KB: refused by its ratio at
			// 128 MiB (input.BombRatio)
			Exit: 2, Want: "refused as a decompression bomb",
		},
		Case{
			// Pickle text after a valid start: the first opcodes pass, the
			// stream must still be refused as soon as it goes wrong, not
			// after it was inflated.
			Name: "bomb/pickle-late-zeros-gzip", Class: "bomb", Command: "analyze", File: "late.pickle.gz",
			Make: func() []byte {
				head := append(append([]byte(nil), pickleHead...), opEmptyDict, opMemoize, opMark)
				for i := 0; i < 1000; i++ {
					head = append(head, shortStr("k")...)
					head = append(head, opNone)
				}
				return Bomb(Gzip, head, 0, 2<<30, nil)
			},
			Exit: 2, Want: "unknown opcode",
		},
	)
	return cs
}

func nesting() []Case {
	return []Case{
		{
			Name: "nesting/json-segments", Class: "nesting", Command: "analyze", File: "segments.json",
			Make: func() []byte {
				return append([]byte(`{"segments":`), bytes.Repeat([]byte{'['}, 10_000_000)...)
			},
			Exit: 2, Want: "nested deeper than",
		},
		{
			Name: "nesting/json-objects", Class: "nesting", Command: "analyze", File: "objects.json",
			Make: func() []byte {
				return append([]byte(`{"segments":[`), bytes.Repeat([]byte(`{"a":`), 100_000)...)
			},
			Exit: 2, Want: "nested deeper than", Small: true,
		},
		{
			// go-json decodes an event recursively: an event nested a
			// million deep must be refused by the splitter.
			Name: "nesting/trace-event", Class: "nesting", Command: "trace", File: "deep.pt.trace.json",
			Make: func() []byte {
				var b bytes.Buffer
				b.WriteString(`{"traceEvents": [{"ph": "X", "name": "deep", "ts": 1, "dur": 1, "args": {"Input Dims": `)
				b.Write(bytes.Repeat([]byte{'['}, 1_000_000))
				b.Write(bytes.Repeat([]byte{']'}, 1_000_000))
				b.WriteString(`}}]}`)
				return b.Bytes()
			},
			Exit: 2, Want: "no readable event",
		},
		{
			Name: "nesting/trace-header", Class: "nesting", Command: "trace", File: "header.pt.trace.json",
			Make: func() []byte {
				var b bytes.Buffer
				b.WriteString(`{"deviceProperties": `)
				b.Write(bytes.Repeat([]byte{'['}, 1_000_000))
				b.Write(bytes.Repeat([]byte{']'}, 1_000_000))
				b.WriteString(`, "traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 1, "dur": 1}]}`)
				return b.Bytes()
			},
			Exit: 2, Want: "nested deeper than",
		},
		{
			Name: "nesting/pickle-marks", Class: "nesting", Command: "analyze", File: "marks.pickle",
			Make: func() []byte {
				b := append([]byte(nil), pickleHead...)
				b = append(b, bytes.Repeat([]byte{opMark}, 16_000_000)...)
				return append(b, opNone, opStop)
			},
			Exit: 2, Want: "not an allocator snapshot",
		},
		{
			// Lists nested a million deep, each inside the previous one.
			Name: "nesting/pickle-lists", Class: "nesting", Command: "analyze", File: "lists.pickle",
			Make: func() []byte {
				b := append([]byte(nil), pickleHead...)
				const n = 1_000_000
				for i := 0; i < n; i++ {
					b = append(b, opEmptyList, opMark)
				}
				for i := 0; i < n; i++ {
					b = append(b, opAppends)
				}
				return append(b, opStop)
			},
			Exit: 2, Want: "segments[0] is a list, expected a dict",
		},
	}
}

func strs() []Case {
	return []Case{
		{
			// A length field that claims a terabyte in a 20-byte file.
			Name: "length/pickle-string", Class: "length", Command: "analyze", File: "lie.pickle",
			Make: func() []byte {
				b := append(append([]byte(nil), pickleHead...), opUnicode8)
				return append(append(b, u64(1<<40)...), "abc."...)
			},
			Exit: 2, Want: "BINUNICODE8", Small: true,
		},
		{
			Name: "length/pickle-frame", Class: "length", Command: "analyze", File: "frame.pickle",
			Make: func() []byte {
				b := append(append([]byte(nil), pickleHead...), opFrame)
				return append(append(b, u64(1<<62)...), opNone, opStop)
			},
			Exit: 2, Want: "not an allocator snapshot", Small: true,
		},
		{
			Name: "string/json-zstd", Class: "string", Command: "analyze", File: "string.json.zst",
			Make: func() []byte {
				return Bomb(Zstd, []byte(`{"segments": [], "x": "`), 'a', 2<<30, []byte(`"}`))
			},
			Exit: 2, Want: "exceeds the limit",
		},
		{
			Name: "string/trace-header-zstd", Class: "string", Command: "trace", File: "header.pt.trace.json.zst",
			Make: func() []byte {
				return Bomb(Zstd, []byte(`{"traceName": "`), 'a', 2<<30, []byte(`", "traceEvents": []}`))
			},
			Exit: 2, Want: "not a snapshot, trace or bundle",
		},
	}
}

func values() []Case {
	return []Case{
		{
			// Python keeps this in about 130 MB (one pointer per push).
			Name: "values/pickle-none-pushes", Class: "values", Command: "analyze", File: "nones.pickle",
			Make: func() []byte {
				b := append([]byte(nil), pickleHead...)
				b = append(b, bytes.Repeat([]byte{opNone}, 16<<20)...)
				return append(b, opStop)
			},
			Exit: 2, Want: "not an allocator snapshot",
		},
		{
			Name: "values/pickle-empty-dicts", Class: "values", Command: "analyze", File: "dicts.pickle",
			Make: func() []byte {
				b := append([]byte(nil), pickleHead...)
				b = append(b, bytes.Repeat([]byte{opEmptyDict}, 4<<20)...)
				return append(b, opStop)
			},
			// refused by the decoder's charge for what it holds (64 B a
			// container) at its first check past 64 MiB of it
			Exit: 2, Want: "more than 16 bytes a byte (a pickle of empty containers",
		},
		{
			Name: "values/json-arrays", Class: "values", Command: "analyze", File: "arrays.json",
			// The values of keys the snapshot has no use for are skipped,
			// not built.
			Make: func() []byte {
				var b bytes.Buffer
				b.WriteString(`{"segments": [], "x": [`)
				b.WriteString(strings.Repeat("[],", 8<<20))
				b.WriteString(`[]]}`)
				return b.Bytes()
			},
			Exit: 0, Want: "No device has trace entries or segments",
		},
	}
}

func cpu() []Case {
	return []Case{
		{
			// REDUCE on a memoized 100,000-item tuple, a million times:
			// quadratic if each REDUCE copies its arguments.
			Name: "cpu/pickle-reduce", Class: "cpu", Command: "analyze", File: "reduce.pickle",
			Make: func() []byte {
				b := append([]byte(nil), pickleHead...)
				b = append(b, opGlobal)
				b = append(b, "builtins\nlist\n"...)
				b = append(b, opMemoize, opMark)
				for i := 0; i < 100_000; i++ {
					b = append(b, opNone)
				}
				b = append(b, opTuple, opMemoize, opPop, opPop)
				for i := 0; i < 1_000_000; i++ {
					b = append(b, opBinget, 0, opBinget, 1, opReduce, opPop)
				}
				return append(b, opNone, opStop)
			},
			Exit: 2, Want: "not an allocator snapshot",
		},
		{
			// Text LONG with 8 MiB of digits: Python refuses more than 4300.
			Name: "cpu/pickle-long-digits", Class: "cpu", Command: "analyze", File: "digits.pickle",
			Make: func() []byte {
				b := []byte{opProto, 2, opLong}
				b = append(b, bytes.Repeat([]byte{'7'}, 8<<20)...)
				return append(b, "L\n."...)
			},
			Exit: 2, Want: "offset 2: LONG: line longer than 1 MiB",
		},
		{
			Name: "cpu/pickle-int-digits", Class: "cpu", Command: "analyze", File: "int.pickle",
			Make: func() []byte {
				b := []byte{opProto, 2, opInt}
				b = append(b, bytes.Repeat([]byte{'9'}, 5000)...)
				return append(b, "\n."...)
			},
			Exit: 2, Want: "INT: integer of 5000 digits exceeds the limit of 4300 digits", Small: true,
		},
	}
}
