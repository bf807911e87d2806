package snapshot

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
)

// pk writes pickle opcodes for the shared-reference tests. Every dict and
// list it opens is memoized, as Python's pickler does; the slot numbers
// come back so that a test can reference them again.
type pk struct {
	b    []byte
	slot int
}

func newPK() *pk { return &pk{b: []byte{0x80, 4}} }

func (p *pk) memo() int { p.b = append(p.b, 0x94); p.slot++; return p.slot - 1 }
func (p *pk) str(s string) *pk {
	p.b = append(append(p.b, 0x8c, byte(len(s))), s...)
	return p
}
func (p *pk) int(n int64) *pk {
	p.b = append(p.b, 0x8a, 8)
	p.b = binary.LittleEndian.AppendUint64(p.b, uint64(n))
	return p
}
func (p *pk) get(slot int) *pk {
	p.b = append(p.b, 'j')
	p.b = binary.LittleEndian.AppendUint32(p.b, uint32(slot))
	return p
}
func (p *pk) op(ops ...byte) *pk { p.b = append(p.b, ops...); return p }

// entry writes an alloc entry whose frames are written by frames.
func (p *pk) entry(addr, size int64, frames func()) int {
	p.op('}')
	s := p.memo()
	p.op('(').str("action").str("alloc").str("addr").int(addr).str("size").int(size).str("stream").int(0).str("frames")
	frames()
	p.op('u')
	return s
}

// traceWith writes {"segments": [], "device_traces": [[...]]} whose one
// device list body writes.
func traceWith(body func(p *pk)) []byte {
	p := newPK()
	p.op('}')
	p.memo()
	p.op('(').str("segments").op(']')
	p.memo()
	p.str("device_traces").op(']')
	p.memo()
	p.op(']')
	p.memo()
	body(p)
	p.op('a', 'u', '.')
	return p.b
}

func noFrames(p *pk) func() { return func() { p.op(']') } }

// TestSharedEntryCountsOnce: an entry referenced again through the memo
// is one entry; the repeats are dropped and counted invalid, and a trace
// made mostly of repeats is refused, however many there are (30M such
// references cost 10.9 GB before).
func TestSharedEntryCountsOnce(t *testing.T) {
	few := traceWith(func(p *pk) {
		p.op('(')
		first := p.entry(4096, 512, noFrames(p))
		for i := int64(1); i < 10; i++ {
			p.entry(4096+i*512, 512, noFrames(p))
		}
		p.get(first).get(first)
		p.op('e')
	})
	s, err := Read(bytes.NewReader(few))
	if err != nil {
		t.Fatal(err)
	}
	iv := s.Traces[0].Invalid
	if s.Traces[0].Len() != 10 || iv.Count != 2 || iv.Dropped != 2 || !strings.Contains(iv.First, "device_traces[0][10] is the same entry as an earlier one") {
		t.Errorf("%d entries, invalid %+v", s.Traces[0].Len(), iv)
	}
	storm := traceWith(func(p *pk) {
		p.op('(')
		first := p.entry(4096, 512, noFrames(p))
		p.op('e')
		for i := 0; i < 500; i++ { // 2.5 MB: the parallel reader tries it
			p.op('(')
			for j := 0; j < 1000; j++ {
				p.get(first)
			}
			p.op('e')
		}
	})
	for _, workers := range []int{0, 2} {
		_, err = read(bytes.NewReader(storm), len(storm), workers)
		if err == nil || !strings.Contains(err.Error(), "500000 of 500001 trace entries are invalid") {
			t.Errorf("workers %d: %v", workers, err)
		}
	}
}

// TestSharedFramesWalkedOnce: a frames list of 5,000 frames shared by two
// entries is one stack, cut to maxStackFrames and counted once.
func TestSharedFramesWalkedOnce(t *testing.T) {
	in := traceWith(func(p *pk) {
		p.op('(')
		var list int
		p.entry(4096, 512, func() {
			p.op(']')
			list = p.memo()
			p.op('(', '}')
			fr := p.memo()
			p.op('(').str("filename").str("train.py").str("line").int(7).str("name").str("step").op('u')
			for i := 1; i < 5000; i++ {
				if i%1000 == 0 {
					p.op('e', '(')
				}
				p.get(fr)
			}
			p.op('e')
		})
		p.entry(8192, 512, func() { p.get(list) })
		p.op('e')
	})
	s, err := Read(bytes.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	tr := s.Traces[0]
	if tr.Len() != 2 || tr.Stack[0] == 0 || tr.Stack[0] != tr.Stack[1] || len(s.Stacks[tr.Stack[0]]) != maxStackFrames {
		t.Fatalf("stacks %v of %d frames", tr.Stack, len(s.Stacks[tr.Stack[0]]))
	}
	if iv := s.InvalidStacks; iv.Count != 1 || !strings.Contains(iv.First, "a stack of 5000 frames") {
		t.Errorf("invalid stacks %+v", iv)
	}
}

// TestSharedSegmentCountsOnce: a segment, or a block, referenced twice
// is read once, and the repeat counted.
func TestSharedSegmentCountsOnce(t *testing.T) {
	p := newPK()
	p.op('}')
	p.memo()
	p.op('(').str("segments").op(']')
	p.memo()
	p.op('(', '}')
	seg := p.memo()
	p.op('(').str("device").int(0).str("address").int(1 << 30).str("total_size").int(2 << 20).str("blocks").op(']')
	p.memo()
	p.op('(', '}')
	blk := p.memo()
	p.op('(').str("size").int(1 << 20).str("state").str("active_allocated").op('u')
	p.get(blk)
	p.op('e', 'u')
	p.get(seg)
	p.op('e', 'u', '.')
	s, err := Read(bytes.NewReader(p.b))
	if err != nil {
		t.Fatal(err)
	}
	iv := s.InvalidSegments
	if len(s.Segments) != 1 || len(s.Segments[0].Blocks) != 1 || iv.Count != 2 || iv.Dropped != 2 {
		t.Fatalf("%d segments, %d blocks, invalid %+v", len(s.Segments), len(s.Segments[0].Blocks), iv)
	}
}
