package snapshot

import (
	"encoding/binary"
	"unsafe"
)

// The worker VM's conversions: entry, frame and frames-list containers to
// rows, local frames and local stacks, as builder.onDict and onList do.

// replace puts the converted value of the container at stack[at] on the
// stack and in its memo slot.
func (w *worker) replace(at, slot int, v wv) {
	w.stack[at] = v
	if slot >= 0 {
		w.memo[slot-w.base] = v
	}
}

// finishDict converts a dict as builder.onDict does: entries (only at the
// top level), frames; other dicts stay dicts.
func (w *worker) finishDict(at int) bool {
	i := int(w.stack[at].n)
	d := &w.dicts[i]
	if d.shared {
		return false
	}
	m := 0
	for j := 0; j < len(d.kv); j += 2 {
		k := &d.kv[j]
		if !w.isStr(*k) {
			return false
		}
		if k.f == 0 {
			k.f = fieldOf(w.sval(*k)) + 1
		}
		m |= fieldBits[k.f-1]
	}
	if at == 0 && m&kAction == 0 {
		return false // the trace list holds only entries
	}
	switch {
	case m&kAction != 0:
		if at != 0 || len(w.marks) != 0 {
			return false
		}
		row, ok := w.entry(d.kv)
		if !ok {
			return false
		}
		slot := d.slot
		w.freeDict(i)
		w.replace(at, slot, wv{k: wEntry, n: uint64(row)})
	case m&(kFilename|kLine|kName) == kFilename|kLine|kName && m&(kAction|kState|kSize|kBlocks) == 0:
		id, ok := w.frame(d.kv)
		if !ok {
			return false
		}
		slot := d.slot
		w.freeDict(i)
		w.replace(at, slot, wv{k: wFrame, n: uint64(id)})
	case m&(kState|kSize) == kState|kSize && m&kBlocks == 0:
		return false // a block
	}
	return true
}

// finishList converts a list of frames into a stack as builder.onList does.
func (w *worker) finishList(at int) bool {
	i := int(w.stack[at].n)
	l := &w.lists[i]
	if l.shared || len(l.items) >= 1000 || len(l.items) == 0 {
		return false
	}
	w.key = w.key[:0]
	for _, it := range l.items {
		var r uint32
		switch it.k {
		case wFrame:
			r = refLocal | uint32(it.n)
		case wGFrame:
			if it.n >= refMax {
				return false
			}
			r = refGlobal | uint32(it.n)
		case wExt:
			if it.n >= refMax {
				return false
			}
			r = refExt | uint32(it.n)
		default:
			return false
		}
		w.key = binary.LittleEndian.AppendUint32(w.key, r)
	}
	id, ok := w.stackIDs[string(w.key)]
	if !ok {
		id = uint32(len(w.stackTab))
		refs := make([]uint32, len(l.items))
		for j := range refs {
			refs[j] = binary.LittleEndian.Uint32(w.key[4*j:])
		}
		w.stackTab = append(w.stackTab, refs)
		w.stackIDs[string(w.key)] = id
	}
	slot := l.slot
	w.freeList(i)
	w.replace(at, slot, wv{k: wStack, n: uint64(id)})
	return true
}

func (w *worker) isStr(v wv) bool { return v.k == wStr || v.k == wPStr || v.k == wLStr }

// sval is the content of a string value; for wStr it aliases the input.
func (w *worker) sval(v wv) string {
	switch v.k {
	case wStr:
		n := int(v.n & (1<<24 - 1))
		if n == 0 {
			return ""
		}
		return unsafe.String(&w.data[v.n>>24], n)
	case wPStr:
		return w.preStr[v.n]
	case wLStr:
		return w.lstr[v.n]
	}
	return ""
}

func (w *worker) strOf(v wv) (string, bool) {
	switch v.k {
	case wStr, wPStr, wLStr:
		return w.sval(v), true
	case wInt, wNone, wEmptyList:
		return "", true
	}
	return "", false
}

func intOf(v wv) (uint64, bool) {
	switch v.k {
	case wInt:
		return v.n, true
	case wNone, wStr, wPStr, wLStr, wEmptyList:
		return 0, true
	}
	return 0, false
}

func (w *worker) frame(kv []wv) (uint32, bool) {
	var f Frame
	for j := 0; j < len(kv); j += 2 {
		v := kv[j+1]
		var ok bool
		switch kv[j].f - 1 {
		case fFilename:
			f.Filename, ok = w.strOf(v)
		case fName:
			f.Name, ok = w.strOf(v)
		case fLine:
			var n uint64
			n, ok = intOf(v)
			f.Line = int(n)
		default:
			ok = v.k != wDict && v.k != wList
		}
		if !ok {
			return 0, false
		}
	}
	return intern(w.frameIDs, &w.frameTab, f), true
}

func (w *worker) str(s string) uint32 { return intern(w.strIDs, &w.strTab, s) }

// Local string and stack ids are stored plus one, 0 meaning none, until the
// merge maps them. An entry with a field of the wrong type is left to the
// general decoder (false), whose builder counts it (Trace.Invalid).
func (w *worker) entry(kv []wv) (int, bool) {
	var (
		action         Action
		addr           uint64
		size, timeUS   int64
		stream, cc, um uint32
		stack          uint32
		actSlot        = -1
		stackSlot      = -1
	)
	t := &w.t
	for j := 0; j < len(kv); j += 2 {
		v := kv[j+1]
		switch kv[j].f - 1 {
		case fAction:
			actSlot = -1
			switch v.k {
			case wStr, wPStr, wLStr:
				action = ParseAction(w.sval(v))
			case wExt:
				actSlot = int(v.n)
			default:
				return 0, false // of the wrong type: the builder counts it
			}
		case fAddr:
			if v.k != wInt {
				return 0, false
			}
			addr = v.n
		case fSize:
			if v.k != wInt {
				return 0, false
			}
			size = int64(v.n)
		case fStream:
			if v.k != wInt {
				return 0, false
			}
			stream = w.streamID(int64(v.n))
		case fTime:
			if v.k != wInt {
				return 0, false
			}
			timeUS = int64(v.n)
			t.HasTime = true
		case fFrames:
			stackSlot = -1
			switch v.k {
			case wStack:
				stack = uint32(v.n) + 1
			case wGStack:
				stack = uint32(v.n) | 1<<31
			case wExt:
				stackSlot = int(v.n)
			case wEmptyList, wNone:
				stack = 0
			default:
				return 0, false
			}
		case fCC:
			s, ok := w.strOf(v)
			if !ok {
				return 0, false
			}
			cc = 0
			if s != "N/A" {
				cc = w.str(s) + 1
			}
		case fUM:
			s, ok := w.strOf(v)
			if !ok {
				return 0, false
			}
			um = w.str(s) + 1
		default:
			if v.k == wDict || v.k == wList {
				return 0, false
			}
		}
	}
	r := t.appendRow(row{action, addr, size, timeUS, stream, stack, cc, um})
	if actSlot >= 0 {
		w.actPatch = append(w.actPatch, patch{r, actSlot})
	}
	if stackSlot >= 0 {
		w.stackPatch = append(w.stackPatch, patch{r, stackSlot})
	}
	return r, true
}

// Field codes of the keys the reader looks at.
const (
	fOther = iota
	fAction
	fAddr
	fSize
	fStream
	fTime
	fFrames
	fCC
	fUM
	fFilename
	fName
	fLine
	fState
	fBlocks
)

var fieldBits = [...]int{fOther: kOther, fAction: kAction, fAddr: kOther, fSize: kSize, fStream: kOther, fTime: kOther,
	fFrames: kOther, fCC: kOther, fUM: kOther, fFilename: kFilename, fName: kName, fLine: kLine, fState: kState, fBlocks: kBlocks}

func fieldOf(s string) uint8 {
	switch s {
	case "action":
		return fAction
	case "addr", "device_free":
		return fAddr
	case "size":
		return fSize
	case "stream":
		return fStream
	case "time_us":
		return fTime
	case "frames":
		return fFrames
	case "compile_context":
		return fCC
	case "user_metadata":
		return fUM
	case "filename":
		return fFilename
	case "name":
		return fName
	case "line":
		return fLine
	case "state":
		return fState
	case "blocks":
		return fBlocks
	}
	return fOther
}

// streamID interns a raw stream value in the worker's local table.
func (w *worker) streamID(n int64) uint32 {
	id, ok := w.streamIDs[n]
	if !ok {
		id = uint32(len(w.streamTab))
		w.streamTab = append(w.streamTab, n)
		w.streamIDs[n] = id
	}
	return id
}
