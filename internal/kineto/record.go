package kineto

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Records are the binary form of a trace's events that the streaming
// analysis of traces too large to hold writes to disk and reads back
// (internal/load): one record per complete event (with its GPU, op and
// collective arguments), memory event or flow, in a fixed little-endian
// layout, with string ids of the whole trace (Stream's) and, for complete
// events, the event's index in the whole trace. A record also carries an
// owned bit: whether the window it is written for counts the event.
//
// Layout: tag ('X', 'M' or 'F'), flags, the record's length (uint16),
// then the tag's fields (see AppendEvent, AppendMemory, AppendFlow).

// Record tags.
const (
	RecordEvent  = 'X'
	RecordMemory = 'M'
	RecordFlow   = 'F'
)

const (
	recOwned = 1 << iota
	recGPU
	recOp
	recComm
)

// offsets of the complete event's fields
const (
	xKind  = 4
	xSeq   = 5
	xTS    = 13
	xDur   = 21
	xName  = 29
	xCat   = 33
	xPID   = 37
	xTID   = 41
	xExt   = 45
	xCorr  = 53
	xFixed = 61
	gpuLen = 72
	opLen  = 20
	comLen = 40
	memLen = 58
	flwLen = 30
)

var le = binary.LittleEndian

// AppendEvent appends the record of complete event i of t, whose index in
// the whole trace is seq.
func AppendEvent(dst []byte, t *Trace, i int, seq int64, owned bool) []byte {
	ev := &t.Events
	flags := byte(0)
	if owned {
		flags |= recOwned
	}
	var g *GPUInfo
	var o *OpInfo
	var c *CommInfo
	if a := ev.Aux[i]; a >= 0 {
		if ev.Kind[i].HasGPUInfo() {
			g = &t.GPU[a]
			flags |= recGPU
			if g.Comm >= 0 {
				c = &t.Comms[g.Comm]
			}
		} else {
			o = &t.Ops[a]
			flags |= recOp
			if o.Comm >= 0 {
				c = &t.Comms[o.Comm]
			}
		}
	}
	n := xFixed
	if g != nil {
		n += gpuLen
	}
	if o != nil {
		n += opLen
	}
	if c != nil {
		flags |= recComm
		n += comLen
	}
	s := len(dst)
	dst = append(dst, make([]byte, n)...)
	b := dst[s:]
	b[0], b[1] = RecordEvent, flags
	le.PutUint16(b[2:], uint16(n))
	b[xKind] = byte(ev.Kind[i])
	le.PutUint64(b[xSeq:], uint64(seq))
	le.PutUint64(b[xTS:], uint64(ev.TS[i]))
	le.PutUint64(b[xDur:], uint64(ev.Dur[i]))
	le.PutUint32(b[xName:], ev.Name[i])
	le.PutUint32(b[xCat:], ev.Cat[i])
	le.PutUint32(b[xPID:], uint32(ev.PID[i]))
	le.PutUint32(b[xTID:], uint32(ev.TID[i]))
	le.PutUint64(b[xExt:], uint64(ev.Ext[i]))
	le.PutUint64(b[xCorr:], uint64(ev.Corr[i]))
	p := b[xFixed:]
	if g != nil {
		le.PutUint32(p[0:], uint32(g.Device))
		le.PutUint32(p[4:], uint32(g.Stream))
		le.PutUint32(p[8:], math.Float32bits(g.BlocksPerSM))
		le.PutUint32(p[12:], math.Float32bits(g.Occupancy))
		le.PutUint64(p[16:], uint64(g.Bytes))
		for k := 0; k < 3; k++ {
			le.PutUint32(p[24+4*k:], uint32(g.Grid[k]))
			le.PutUint32(p[36+4*k:], uint32(g.Block[k]))
		}
		le.PutUint32(p[48:], uint32(g.Registers))
		le.PutUint32(p[52:], uint32(g.SharedMem))
		le.PutUint32(p[56:], uint32(g.WaitStream))
		le.PutUint64(p[60:], uint64(g.WaitCorr))
		le.PutUint32(p[68:], math.Float32bits(g.Bandwidth))
		p = p[gpuLen:]
	}
	if o != nil {
		le.PutUint64(p[0:], uint64(o.Seq))
		le.PutUint32(p[8:], uint32(o.FwdThread))
		le.PutUint32(p[12:], o.Shape)
		le.PutUint32(p[16:], o.Types)
		p = p[opLen:]
	}
	if c != nil {
		le.PutUint32(p[0:], c.Collective)
		le.PutUint32(p[4:], c.Dtype)
		le.PutUint32(p[8:], c.PGName)
		le.PutUint64(p[12:], uint64(c.InNelems))
		le.PutUint64(p[20:], uint64(c.OutNelems))
		le.PutUint32(p[28:], uint32(c.GroupSize))
		le.PutUint64(p[32:], uint64(c.Seq))
	}
	return dst
}

// AppendMemory appends the record of a memory event.
func AppendMemory(dst []byte, m *MemoryEvent, owned bool) []byte {
	s := len(dst)
	dst = append(dst, make([]byte, memLen)...)
	b := dst[s:]
	b[0] = RecordMemory
	if owned {
		b[1] = recOwned
	}
	le.PutUint16(b[2:], memLen)
	le.PutUint64(b[4:], uint64(m.TS))
	b[12] = byte(m.DeviceType)
	if m.OOM {
		b[13] = 1
	}
	le.PutUint32(b[14:], uint32(m.DeviceID))
	le.PutUint64(b[18:], uint64(m.Addr))
	le.PutUint64(b[26:], uint64(m.Bytes))
	le.PutUint64(b[34:], uint64(m.TotalAllocated))
	le.PutUint64(b[42:], uint64(m.TotalReserved))
	le.PutUint32(b[50:], uint32(m.PID))
	le.PutUint32(b[54:], uint32(m.TID))
	return dst
}

// AppendFlow appends the record of a flow event.
func AppendFlow(dst []byte, f *Flow) []byte {
	s := len(dst)
	dst = append(dst, make([]byte, flwLen)...)
	b := dst[s:]
	b[0] = RecordFlow
	le.PutUint16(b[2:], flwLen)
	le.PutUint64(b[4:], uint64(f.ID))
	le.PutUint64(b[12:], uint64(f.TS))
	le.PutUint32(b[20:], uint32(f.PID))
	le.PutUint32(b[24:], uint32(f.TID))
	b[28] = byte(f.Kind)
	if f.Finish {
		b[29] = 1
	}
	return dst
}

// Record is one record, as NextRecord cuts it; its accessors read the
// fields the streaming analysis routes by.
type Record []byte

// NextRecord cuts the first record off buf: it returns the record and the
// rest, or ok false when buf does not start with a whole record.
func NextRecord(buf []byte) (r Record, rest []byte, ok bool) {
	if len(buf) < 4 {
		return nil, buf, false
	}
	n := int(le.Uint16(buf[2:]))
	if n < 4 || len(buf) < n {
		return nil, buf, false
	}
	return Record(buf[:n]), buf[n:], true
}

// Tag is RecordEvent, RecordMemory or RecordFlow.
func (r Record) Tag() byte { return r[0] }

// SetOwned sets the owned bit (in place).
func (r Record) SetOwned(owned bool) {
	if owned {
		r[1] |= recOwned
	} else {
		r[1] &^= recOwned
	}
}

// Kind is a complete event's kind.
func (r Record) Kind() Kind { return Kind(r[xKind]) }

// Seq is a complete event's index in the whole trace.
func (r Record) Seq() int64 { return int64(le.Uint64(r[xSeq:])) }

// TS is the start of a complete event, memory event or flow.
func (r Record) TS() int64 {
	switch r[0] {
	case RecordEvent:
		return int64(le.Uint64(r[xTS:]))
	case RecordMemory:
		return int64(le.Uint64(r[4:]))
	}
	return int64(le.Uint64(r[12:]))
}

// End is the end of a complete event (its start for the others).
func (r Record) End() int64 {
	if r[0] != RecordEvent {
		return r.TS()
	}
	return int64(le.Uint64(r[xTS:])) + int64(le.Uint64(r[xDur:]))
}

// Ext is a complete event's External id.
func (r Record) Ext() int64 { return int64(le.Uint64(r[xExt:])) }

// Corr is a complete event's correlation id (None if absent).
func (r Record) Corr() int64 { return int64(le.Uint64(r[xCorr:])) }

// Device is a GPU event's device (-1 for other records).
func (r Record) Device() int32 {
	if r[0] != RecordEvent || r[1]&recGPU == 0 {
		return -1
	}
	return int32(le.Uint32(r[xFixed:]))
}

// Memory decodes a memory record.
func (r Record) Memory() MemoryEvent {
	return MemoryEvent{TS: int64(le.Uint64(r[4:])), DeviceType: int8(r[12]), OOM: r[13] != 0,
		DeviceID: int32(le.Uint32(r[14:])), Addr: int64(le.Uint64(r[18:])), Bytes: int64(le.Uint64(r[26:])),
		TotalAllocated: int64(le.Uint64(r[34:])), TotalReserved: int64(le.Uint64(r[42:])),
		PID: int32(le.Uint32(r[50:])), TID: int32(le.Uint32(r[54:]))}
}

// Builder makes a Trace from records: a window of a trace too large to
// hold, with the whole trace's header (Stream's).
type Builder struct {
	t   *Trace
	own []bool
	seq []int64
}

// NewBuilder starts an empty trace with header's metadata, strings,
// threads and processes (shared, not copied).
func NewBuilder(header *Trace) *Builder {
	return &Builder{t: &Trace{Path: header.Path, Meta: header.Meta, Strings: header.Strings, Threads: header.Threads,
		Processes: header.Processes, PIDNames: header.PIDNames, Bytes: header.Bytes}}
}

// Add adds every record of buf, which must hold whole records; offset is
// buf's place in its file, for errors.
func (b *Builder) Add(buf []byte, offset int64) error {
	start := len(buf)
	for len(buf) > 0 {
		r, rest, ok := NextRecord(buf)
		if !ok {
			return fmt.Errorf("offset %d: truncated record", offset+int64(start-len(buf)))
		}
		if err := b.add(r); err != nil {
			return fmt.Errorf("offset %d: %w", offset+int64(start-len(buf)), err)
		}
		buf = rest
	}
	return nil
}

func (b *Builder) add(r Record) error {
	t := b.t
	switch r.Tag() {
	case RecordMemory:
		if len(r) != memLen {
			return fmt.Errorf("memory record of %d bytes", len(r))
		}
		t.Memory = append(t.Memory, r.Memory())
		return nil
	case RecordFlow:
		if len(r) != flwLen {
			return fmt.Errorf("flow record of %d bytes", len(r))
		}
		t.Flows = append(t.Flows, Flow{ID: int64(le.Uint64(r[4:])), TS: int64(le.Uint64(r[12:])), PID: int32(le.Uint32(r[20:])),
			TID: int32(le.Uint32(r[24:])), Kind: FlowKind(r[28]), Finish: r[29] != 0})
		return nil
	case RecordEvent:
	default:
		return fmt.Errorf("unknown record tag %d", r.Tag())
	}
	flags := r[1]
	n := xFixed
	if flags&recGPU != 0 {
		n += gpuLen
	}
	if flags&recOp != 0 {
		n += opLen
	}
	if flags&recComm != 0 {
		n += comLen
	}
	if len(r) != n {
		return fmt.Errorf("event record of %d bytes, expected %d", len(r), n)
	}
	ev := &t.Events
	kind := Kind(r[xKind])
	ev.TS = append(ev.TS, int64(le.Uint64(r[xTS:])))
	ev.Dur = append(ev.Dur, int64(le.Uint64(r[xDur:])))
	name, cat := le.Uint32(r[xName:]), le.Uint32(r[xCat:])
	if int(name) >= len(t.Strings) || int(cat) >= len(t.Strings) {
		return fmt.Errorf("string id out of range")
	}
	ev.Name = append(ev.Name, name)
	ev.Cat = append(ev.Cat, cat)
	ev.Kind = append(ev.Kind, kind)
	ev.PID = append(ev.PID, int32(le.Uint32(r[xPID:])))
	ev.TID = append(ev.TID, int32(le.Uint32(r[xTID:])))
	ev.Ext = append(ev.Ext, int64(le.Uint64(r[xExt:])))
	ev.Corr = append(ev.Corr, int64(le.Uint64(r[xCorr:])))
	b.own = append(b.own, flags&recOwned != 0)
	b.seq = append(b.seq, int64(le.Uint64(r[xSeq:])))
	p := r[xFixed:]
	aux := int32(-1)
	badComm := false
	comm := func(q []byte) int32 {
		if flags&recComm == 0 {
			return -1
		}
		c := CommInfo{Collective: le.Uint32(q[0:]), Dtype: le.Uint32(q[4:]), PGName: le.Uint32(q[8:]),
			InNelems: int64(le.Uint64(q[12:])), OutNelems: int64(le.Uint64(q[20:])), GroupSize: int32(le.Uint32(q[28:])),
			Seq: int64(le.Uint64(q[32:]))}
		if ns := uint32(len(t.Strings)); c.Collective >= ns || c.Dtype >= ns || c.PGName >= ns {
			badComm = true
		}
		t.Comms = append(t.Comms, c)
		return int32(len(t.Comms) - 1)
	}
	if flags&recGPU != 0 {
		g := GPUInfo{Device: int32(le.Uint32(p[0:])), Stream: int32(le.Uint32(p[4:])),
			BlocksPerSM: math.Float32frombits(le.Uint32(p[8:])), Occupancy: math.Float32frombits(le.Uint32(p[12:])),
			Bytes: int64(le.Uint64(p[16:])), Registers: int32(le.Uint32(p[48:])), SharedMem: int32(le.Uint32(p[52:])),
			WaitStream: int32(le.Uint32(p[56:])), WaitCorr: int64(le.Uint64(p[60:])),
			Bandwidth: math.Float32frombits(le.Uint32(p[68:]))}
		for k := 0; k < 3; k++ {
			g.Grid[k] = int32(le.Uint32(p[24+4*k:]))
			g.Block[k] = int32(le.Uint32(p[36+4*k:]))
		}
		p = p[gpuLen:]
		g.Comm = comm(p)
		aux = int32(len(t.GPU))
		t.GPU = append(t.GPU, g)
	} else if flags&recOp != 0 {
		o := OpInfo{Seq: int64(le.Uint64(p[0:])), FwdThread: int32(le.Uint32(p[8:])), Shape: le.Uint32(p[12:]), Types: le.Uint32(p[16:])}
		if int(o.Shape) >= len(t.Strings) || int(o.Types) >= len(t.Strings) {
			return fmt.Errorf("string id out of range")
		}
		p = p[opLen:]
		o.Comm = comm(p)
		aux = int32(len(t.Ops))
		t.Ops = append(t.Ops, o)
	}
	if badComm {
		return fmt.Errorf("string id out of range")
	}
	ev.Aux = append(ev.Aux, aux)
	return nil
}

// Trace returns the trace built, with, per complete event, whether the
// window owns it and its index in the whole trace.
func (b *Builder) Trace() (t *Trace, own []bool, seq []int64) { return b.t, b.own, b.seq }
