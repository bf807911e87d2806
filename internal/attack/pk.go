package attack

import "encoding/binary"

// pk writes the opcodes of a protocol-4 pickle whose shared references
// (MEMOIZE, BINGET) the cases choose: the storms of issue 28 are made of
// them. Every container or string a case wants to reference again is
// memoized with memo(), which returns its slot.
type pk struct {
	b    []byte
	slot int
}

func newPK() *pk { return &pk{b: []byte{opProto, 4}} }

func (p *pk) op(ops ...byte) *pk { p.b = append(p.b, ops...); return p }

// memo memoizes the value on top of the stack and returns its slot.
func (p *pk) memo() int {
	p.b = append(p.b, opMemoize)
	p.slot++
	return p.slot - 1
}

func (p *pk) str(s string) *pk { p.b = append(p.b, shortStr(s)...); return p }

func (p *pk) int(n int64) *pk {
	p.b = append(p.b, 0x8a, 8) // LONG1 of 8 bytes
	p.b = binary.LittleEndian.AppendUint64(p.b, uint64(n))
	return p
}

func (p *pk) get(slot int) *pk {
	if slot < 256 {
		p.b = append(p.b, opBinget, byte(slot))
		return p
	}
	p.b = append(p.b, opLongBinget)
	p.b = binary.LittleEndian.AppendUint32(p.b, uint32(slot))
	return p
}

// frame writes a frame dict, memoized; it returns its slot.
func (p *pk) frame(file string, line int64, name string) int {
	p.op(opEmptyDict)
	s := p.memo()
	p.op(opMark).str("filename").str(file).str("line").int(line).str("name").str(name).op(opSetitems)
	return s
}

// entry writes a trace entry dict, memoized, whose frames body writes;
// it returns its slot.
func (p *pk) entry(action string, addr, size int64, frames func()) int {
	p.op(opEmptyDict)
	s := p.memo()
	p.op(opMark).str("action").str(action).str("addr").int(addr).str("size").int(size).str("stream").int(0).str("frames")
	if frames == nil {
		p.op(opEmptyList)
	} else {
		frames()
	}
	p.op(opSetitems)
	return s
}

// snapshot writes {"segments": [], "device_traces": [[ body ]]} plus
// the items extra writes into the top dict (key, value pairs), and STOP.
func snapshotPickle(extra func(p *pk), body func(p *pk)) []byte {
	p := newPK()
	p.op(opEmptyDict)
	p.memo()
	p.op(opMark).str("segments").op(opEmptyList)
	if extra != nil {
		extra(p)
	}
	p.str("device_traces").op(opEmptyList, opEmptyList)
	body(p)
	p.op('a', opSetitems, opStop)
	return p.b
}

// pair writes an alloc and its free at addr.
func (p *pk) pair(addr int64, frames func()) {
	p.entry("alloc", addr, 512, frames)
	p.entry("free_completed", addr, 512, frames)
}
