package kineto

import (
	"bytes"
	"fmt"
	"strconv"

	"encoding/json"
)

// rawEvent is one event with its fields parsed (see wireEvent.view).
type rawEvent struct {
	Ph   rawStr  `json:"ph"`
	Cat  rawStr  `json:"cat"`
	Name rawStr  `json:"name"`
	Pid  idVal   `json:"pid"`
	Tid  idVal   `json:"tid"`
	Ts   timeVal `json:"ts"`
	Dur  timeVal `json:"dur"`
	ID   idVal   `json:"id"`
	Args rawArgs `json:"args"`
}

// rawArgs holds the arguments ptscope uses; all others are skipped.
type rawArgs struct {
	ExternalID  Num     `json:"External id"`
	Correlation Num     `json:"correlation"`
	Device      Num     `json:"device"`
	Stream      Num     `json:"stream"`
	BlocksPerSM Num     `json:"blocks per SM"`
	Occupancy   Num     `json:"est. achieved occupancy %"`
	Registers   Num     `json:"registers per thread"`
	SharedMem   Num     `json:"shared memory"`
	Grid        []Num   `json:"grid"`
	Block       []Num   `json:"block"`
	CopyBytes   Num     `json:"bytes"`
	SeqNum      Num     `json:"Sequence number"`
	FwdThread   Num     `json:"Fwd thread id"`
	InputDims   rawJSON `json:"Input Dims"`
	InputType   rawJSON `json:"Input type"`
	// metadata events
	MName     rawStr `json:"name"`
	Labels    rawStr `json:"labels"`
	SortIndex Num    `json:"sort_index"`
	// [memory]
	DeviceType     Num `json:"Device Type"`
	DeviceID       Num `json:"Device Id"`
	Addr           Num `json:"Addr"`
	MemBytes       Num `json:"Bytes"`
	TotalAllocated Num `json:"Total Allocated"`
	TotalReserved  Num `json:"Total Reserved"`
	// collectives (record_param_comms, NCCL kernels)
	Collective rawStr `json:"Collective name"`
	Dtype      rawStr `json:"dtype"`
	InNelems   Num    `json:"In msg nelems"`
	OutNelems  Num    `json:"Out msg nelems"`
	GroupSize  Num    `json:"Group size"`
	PGName     rawStr `json:"Process Group Name"`
	CommSeq    Num    `json:"Seq"`
	// cuda_sync events (synchronisations the GPU records)
	WaitStream    Num `json:"wait_on_stream"`
	WaitEventCorr Num `json:"wait_on_cuda_event_record_corr_id"`
	Bandwidth     Num `json:"memory bandwidth (GB/s)"` // memcpy, memset
}

// part is the decoded content of one batch, with strings interned locally.
type part struct {
	seq     int
	strs    []string
	strIdx  map[string]uint32
	pidStrs []string
	ev      Events
	gpu     []GPUInfo
	ops     []OpInfo
	comms   []CommInfo
	mem     []MemoryEvent
	flows   []Flow
	threads []Thread
	procs   []Process
	damage  Damage
	bytes   int64
	ev1     rawEvent  // the event being decoded, reused (see scanEvent)
	scanSt  scanState // which args of ev1 are set
	wire    wireEvent // what encoding/json fills, reused: its fields keep their capacity
	compact []byte    // internCompact's buffer
	kinds   []Kind    // by string id: KindOf + 1, 0 when not known yet
	cats    [8]uint32 // internCat's ids

	stdJSONOnly bool // see Options.stdJSONOnly
}

func newPart() *part {
	return &part{strs: []string{""}, strIdx: map[string]uint32{"": 0}}
}

func (p *part) reset(seq int) {
	p.seq = seq
	p.strs = append(p.strs[:0], "")
	clear(p.strIdx)
	p.strIdx[""] = 0
	p.pidStrs = p.pidStrs[:0]
	clear(p.kinds) // string ids are the batch's own
	p.cats = [8]uint32{}
	// the merger copies everything out, so the columns are reused
	e := &p.ev
	e.TS, e.Dur, e.Name, e.Cat, e.Kind = e.TS[:0], e.Dur[:0], e.Name[:0], e.Cat[:0], e.Kind[:0]
	e.PID, e.TID, e.Ext, e.Corr, e.Aux = e.PID[:0], e.TID[:0], e.Ext[:0], e.Corr[:0], e.Aux[:0]
	p.gpu, p.ops, p.comms, p.mem = p.gpu[:0], p.ops[:0], p.comms[:0], p.mem[:0]
	p.flows, p.threads, p.procs = p.flows[:0], p.threads[:0], p.procs[:0]
	p.damage = Damage{}
	p.bytes = 0
}

func (p *part) intern(r rawStr) uint32 {
	if !r.ok || len(r.b) == 0 {
		return 0
	}
	b := r.b
	if r.escaped {
		b = unescape(b)
	}
	if id, ok := p.strIdx[string(b)]; ok {
		return id
	}
	s := string(b)
	id := uint32(len(p.strs))
	p.strs = append(p.strs, s)
	p.strIdx[s] = id
	return id
}

// internCat is intern for categories, which are few: the last id of each
// length (mod 8) is tried first.
func (p *part) internCat(r rawStr) uint32 {
	c := &p.cats[len(r.b)&7]
	if *c != 0 && !r.escaped && p.strs[*c] == string(r.b) {
		return *c
	}
	id := p.intern(r)
	*c = id
	return id
}

// kindOf is KindOf of string cat, remembered.
func (p *part) kindOf(cat uint32) Kind {
	if int(cat) < len(p.kinds) && p.kinds[cat] != 0 {
		return p.kinds[cat] - 1
	}
	k := KindOf(p.strs[cat])
	for len(p.kinds) <= int(cat) {
		p.kinds = append(p.kinds, 0)
	}
	p.kinds[cat] = k + 1
	return k
}

// internCompact interns the compact form of a JSON value (compactJSON),
// built in a buffer of p's.
func (p *part) internCompact(b []byte) uint32 {
	c := compactJSON(b, p.compact)
	if len(c) > 0 && len(b) > 0 && &c[0] != &b[0] {
		p.compact = c
	}
	return p.internBytes(c)
}

func (p *part) internBytes(b []byte) uint32 {
	if len(b) == 0 {
		return 0
	}
	return p.intern(rawStr{b: b, ok: true})
}

func (p *part) pid(v idVal) int32 {
	if !v.ok {
		return 0
	}
	if v.isStr {
		for i, s := range p.pidStrs {
			if s == string(v.s) {
				return StringPIDBase - int32(i)
			}
		}
		p.pidStrs = append(p.pidStrs, string(v.s))
		return StringPIDBase - int32(len(p.pidStrs)-1)
	}
	if v.n < 0 {
		if v.n < int64(StringPIDBase)+1 {
			return int32(StringPIDBase) + 1
		}
		return int32(v.n)
	}
	if v.n > 1<<31-1 {
		return int32(v.n & 0x7fffffff)
	}
	return int32(v.n)
}

// decodeBatch decodes every event of b into p.
func decodeBatch(b *batch, p *part) {
	p.reset(b.seq)
	p.bytes = int64(len(b.buf))
	ev := &p.ev1
	var raw rawRefs
	for k := range b.starts {
		data := b.buf[b.starts[k]:b.ends[k]]
		off := b.offset + int64(b.starts[k])
		if p.stdJSONOnly || !scanEvent(data, ev, &raw, &p.scanSt) {
			w := p.decodeStdJSON(data, off)
			if w == nil {
				continue
			}
			w.view(ev)
			p.scanSt.all()
			raw = rawRefs{ts: w.Ts, dur: w.Dur, memBytes: w.Args.MemBytes}
		}
		if p.check(ev, &raw, off) {
			p.add(ev)
		}
	}
}

// Bounds of an event's times: no trace runs more than 146 years from the
// Unix epoch or from its own start (2^62 ns), and no event lasts 13 days
// (2^50 ns). Within them, sums of times cannot wrap.
const (
	maxEventTS  = 1 << 62
	maxEventDur = 1 << 50
)

// check counts an event with a field of the wrong type or an impossible
// value (Damage.Invalid): add reads such a field as 0. It reports whether
// the event is kept: one whose times are out of all bounds (a ts of
// 9.2e15 us, a dur of 1e300) is not, since no number derived from it
// could mean anything (they made a step of 46,744,074 s).
func (p *part) check(ev *rawEvent, raw *rawRefs, off int64) bool {
	ph := byte('X')
	if ev.Ph.ok && len(ev.Ph.b) > 0 {
		ph = ev.Ph.b[0]
	}
	what, keep := "", true
	switch ph {
	case 'X':
		switch {
		case len(raw.ts) == 0:
			what = "ts is missing"
		case !ev.Ts.ok:
			what = "ts is " + clipJSON(raw.ts) + ", not a number"
		case len(raw.dur) > 0 && !ev.Dur.ok:
			what = "dur is " + clipJSON(raw.dur) + ", not a number"
		case ev.Dur.ns < 0:
			what = "dur is " + clipJSON(raw.dur)
		case ev.Ts.ns > maxEventTS || ev.Ts.ns < -maxEventTS:
			what, keep = "ts is "+clipJSON(raw.ts)+" us, outside any trace's time (dropped)", false
		case ev.Dur.ns > maxEventDur:
			what, keep = "dur is "+clipJSON(raw.dur)+" us, longer than any trace (dropped)", false
		}
	case 'i', 'I':
		if string(ev.Name.b) == "[memory]" && len(raw.memBytes) > 0 && !ev.Args.MemBytes.OK {
			what = "Bytes is " + clipJSON(raw.memBytes) + ", not a number"
		}
	}
	if what == "" {
		return true
	}
	if p.damage.Invalid == 0 {
		p.damage.InvalidFirst = fmt.Sprintf("offset %d: %s", off, what)
	}
	p.damage.Invalid++
	return keep
}

func clipJSON(b []byte) string {
	if len(b) > 24 {
		return string(b[:24]) + "..."
	}
	return string(b)
}

func shortErr(err error) string {
	s := err.Error()
	if len(s) > 120 {
		s = s[:120] + "..."
	}
	return s
}

func (p *part) add(ev *rawEvent) {
	ph := byte('X')
	if ev.Ph.ok && len(ev.Ph.b) > 0 {
		ph = ev.Ph.b[0]
	}
	a := &ev.Args
	switch ph {
	case 'X':
		cat := p.internCat(ev.Cat)
		kind := p.kindOf(cat)
		e := &p.ev
		e.TS = append(e.TS, ev.Ts.ns)
		dur := ev.Dur.ns
		if dur < 0 {
			dur = 0
		}
		e.Dur = append(e.Dur, dur)
		e.Name = append(e.Name, p.intern(ev.Name))
		e.Cat = append(e.Cat, cat)
		e.Kind = append(e.Kind, kind)
		e.PID = append(e.PID, p.pid(ev.Pid))
		e.TID = append(e.TID, p.pid(ev.Tid))
		e.Ext = append(e.Ext, numOr(a.ExternalID, None))
		e.Corr = append(e.Corr, numOr(a.Correlation, None))
		aux := int32(-1)
		switch kind {
		case KindKernel, KindMemcpy, KindMemset:
			g := GPUInfo{
				Device:      int32(numOr(a.Device, 0)),
				Stream:      int32(numOr(a.Stream, 0)),
				BlocksPerSM: float32(floatOr(a.BlocksPerSM, -1)),
				Occupancy:   float32(floatOr(a.Occupancy, -1)),
				Bytes:       numOr(a.CopyBytes, -1),
				Bandwidth:   float32(floatOr(a.Bandwidth, -1)),
				Registers:   int32(numOr(a.Registers, 0)),
				SharedMem:   int32(numOr(a.SharedMem, 0)),
				Comm:        p.comm(a),
			}
			for i := 0; i < 3 && i < len(a.Grid); i++ {
				g.Grid[i] = int32(a.Grid[i].I)
			}
			for i := 0; i < 3 && i < len(a.Block); i++ {
				g.Block[i] = int32(a.Block[i].I)
			}
			aux = int32(len(p.gpu))
			p.gpu = append(p.gpu, g)
		case KindSync:
			aux = int32(len(p.gpu))
			p.gpu = append(p.gpu, GPUInfo{Device: int32(numOr(a.Device, 0)), Stream: int32(numOr(a.Stream, -1)),
				BlocksPerSM: -1, Occupancy: -1, Bytes: -1, Comm: -1, Bandwidth: -1,
				WaitStream: int32(numOr(a.WaitStream, -1)), WaitCorr: numOr(a.WaitEventCorr, None)})
		case KindCPUOp, KindUserAnnotation:
			o := OpInfo{
				Seq:       numOr(a.SeqNum, None),
				FwdThread: int32(numOr(a.FwdThread, -1)),
				Shape:     p.internCompact(a.InputDims),
				Types:     p.internCompact(a.InputType),
				Comm:      p.comm(a),
			}
			aux = int32(len(p.ops))
			p.ops = append(p.ops, o)
		}
		e.Aux = append(e.Aux, aux)
	case 'i', 'I':
		name := string(ev.Name.b)
		if name != "[memory]" && name != "[OutOfMemory]" {
			return
		}
		p.mem = append(p.mem, MemoryEvent{
			TS:             ev.Ts.ns,
			DeviceType:     int8(numOr(a.DeviceType, -1)),
			OOM:            name == "[OutOfMemory]",
			DeviceID:       int32(numOr(a.DeviceID, -1)),
			Addr:           numOr(a.Addr, 0),
			Bytes:          numOr(a.MemBytes, 0),
			TotalAllocated: numOr(a.TotalAllocated, -1),
			TotalReserved:  numOr(a.TotalReserved, -1),
			PID:            p.pid(ev.Pid),
			TID:            p.pid(ev.Tid),
		})
	case 's', 'f', 't':
		f := Flow{TS: ev.Ts.ns, PID: p.pid(ev.Pid), TID: p.pid(ev.Tid), Finish: ph == 'f'}
		if ev.ID.ok {
			if ev.ID.isStr {
				n, _ := strconv.ParseInt(string(ev.ID.s), 0, 64)
				f.ID = n
			} else {
				f.ID = ev.ID.n
			}
		}
		switch string(ev.Cat.b) {
		case "ac2g", "async_cpu_to_gpu":
			f.Kind = FlowAsync
		case "fwdbwd", "forward_backward":
			f.Kind = FlowFwdBwd
		}
		p.flows = append(p.flows, f)
	case 'M':
		switch string(ev.Name.b) {
		case "thread_name":
			p.threads = append(p.threads, Thread{PID: p.pid(ev.Pid), TID: p.pid(ev.Tid), Name: str(a.MName)})
		case "process_name":
			p.procs = append(p.procs, Process{PID: p.pid(ev.Pid), Name: str(a.MName)})
		case "process_labels":
			p.procs = append(p.procs, Process{PID: p.pid(ev.Pid), Labels: str(a.Labels)})
		}
	}
}

func (p *part) comm(a *rawArgs) int32 {
	if !a.Collective.ok {
		return -1
	}
	p.comms = append(p.comms, CommInfo{
		Collective: p.intern(a.Collective),
		Dtype:      p.intern(a.Dtype),
		PGName:     p.intern(a.PGName),
		InNelems:   numOr(a.InNelems, 0),
		OutNelems:  numOr(a.OutNelems, 0),
		GroupSize:  int32(numOr(a.GroupSize, 0)),
		Seq:        numOr(a.CommSeq, None),
	})
	return int32(len(p.comms) - 1)
}

func str(r rawStr) string {
	if !r.ok {
		return ""
	}
	if r.escaped {
		return string(unescape(r.b))
	}
	return string(r.b)
}

func numOr(n Num, def int64) int64 {
	if !n.OK {
		return def
	}
	return n.I
}

func floatOr(n Num, def float64) float64 {
	if !n.OK {
		return def
	}
	return n.F
}

// compactJSON removes whitespace outside strings (shapes are written as
// "[[4096, 50257], []]"; the compact form is shorter and canonical). The
// result is b itself or appended to out[:0].
func compactJSON(b, out []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	if bytes.IndexByte(b, ' ') < 0 && bytes.IndexByte(b, '\n') < 0 {
		return b
	}
	out = out[:0]
	inStr, esc := false, false
	for _, c := range b {
		if inStr {
			out = append(out, c)
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
			}
			continue
		}
		switch c {
		case ' ', '\n', '\r', '\t':
			continue
		case '"':
			inStr = true
		}
		out = append(out, c)
	}
	return out
}

// unescape decodes the escapes of a JSON string body; invalid escapes are kept.
func unescape(b []byte) []byte {
	var s string
	q := make([]byte, 0, len(b)+2)
	q = append(q, '"')
	q = append(q, b...)
	q = append(q, '"')
	if json.Unmarshal(q, &s) != nil {
		return b
	}
	return []byte(s)
}

// repair fixes the damage Kineto is known to write into one event: bare N/A
// values, raw control characters inside strings, and unescaped quotes inside
// strings (a quote not followed by , : } ] or whitespace). It reports whether
// it changed anything.
func repair(b []byte) ([]byte, bool) {
	out := make([]byte, 0, len(b)+16)
	changed := false
	inStr := false
	for i := 0; i < len(b); i++ {
		c := b[i]
		if inStr {
			switch {
			case c == '\\':
				if i+1 < len(b) {
					out = append(out, c, b[i+1])
					i++
					continue
				}
				out = append(out, '\\', '\\')
				changed = true
				continue
			case c == '"':
				// a closing quote is followed by a structural character
				j := i + 1
				for j < len(b) && (b[j] == ' ' || b[j] == '\t' || b[j] == '\r') {
					j++
				}
				if j >= len(b) || b[j] == ',' || b[j] == ':' || b[j] == '}' || b[j] == ']' || b[j] == '\n' {
					inStr = false
					out = append(out, c)
				} else {
					out = append(out, '\\', '"')
					changed = true
				}
				continue
			case c < 0x20:
				if c == '\n' {
					// a raw newline: the string was never closed
					out = append(out, '"', c)
					inStr = false
				} else {
					out = append(out, fmt.Sprintf(`\u%04x`, c)...)
				}
				changed = true
				continue
			}
			out = append(out, c)
			continue
		}
		switch {
		case c == '"':
			inStr = true
		case bytes.HasPrefix(b[i:], []byte("N/A")):
			out = append(out, `"N/A"`...)
			i += 2
			changed = true
			continue
		case bytes.HasPrefix(b[i:], []byte("NaN")) || bytes.HasPrefix(b[i:], []byte("-Infinity")) || bytes.HasPrefix(b[i:], []byte("Infinity")):
			out = append(out, "null"...)
			switch b[i] {
			case 'N':
				i += 2
			case '-':
				i += 8
			default:
				i += 7
			}
			changed = true
			continue
		}
		out = append(out, c)
	}
	return out, changed
}
