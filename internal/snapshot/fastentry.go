package snapshot

import "encoding/binary"

// fastEntry decodes the usual shape of a trace entry straight from the
// bytes: EMPTY_DICT MEMOIZE MARK, then keys fetched from the memo with
// values that are memo strings, ints, a new short string (compile_context),
// a fetched frames list or a new list of fetched frames, then SETITEMS; all
// inside one FRAME. On anything else it returns -1 having undone its memo
// slots, and the general worker VM decodes the entry (what fastEntry
// interned on the way is interned by the VM in the same order anyway).
func (w *worker) fastEntry(pos int) int {
	data, end := w.data, w.hi
	if pos+3 > end || data[pos+1] != 0x94 || data[pos+2] != '(' {
		return -1
	}
	memo0 := len(w.memo)
	w.memo = append(w.memo, wv{k: wOther}) // the dict's slot
	var (
		action         Action
		addr           uint64
		size, timeUS   int64
		stream, cc, um uint32
		stack          uint32
		hasTime        bool
		sawAction      bool
	)
	p := pos + 3
	fail := func() int {
		w.memo = w.memo[:memo0]
		return -1
	}
	ref := func() (wv, bool) {
		v, q, ok := w.ref(data, p, end)
		p = q
		return v, ok
	}
	num := func() (uint64, bool) {
		switch data[p] {
		case 'K':
			if p+2 > end {
				return 0, false
			}
			p += 2
			return uint64(data[p-1]), true
		case 'M':
			if p+3 > end {
				return 0, false
			}
			p += 3
			return uint64(binary.LittleEndian.Uint16(data[p-2:])), true
		case 'J':
			if p+5 > end {
				return 0, false
			}
			p += 5
			return uint64(int64(int32(binary.LittleEndian.Uint32(data[p-4:])))), true
		case 0x8a:
			if p+2 > end {
				return 0, false
			}
			n := int(data[p+1])
			if n > 8 || p+2+n > end {
				return 0, false
			}
			b := data[p+2 : p+2+n]
			var u uint64
			for i := n - 1; i >= 0; i-- {
				u = u<<8 | uint64(b[i])
			}
			if n > 0 && n < 8 && b[n-1]&0x80 != 0 {
				u |= ^uint64(0) << (8 * n)
			}
			p += 2 + n
			return u, true
		}
		return 0, false
	}
	// str reads a fetched string or a new short string with its MEMOIZE.
	str := func() (string, bool) {
		if data[p] == 0x8c {
			if p+2 > end {
				return "", false
			}
			n := int(data[p+1])
			if p+3+n > end || data[p+2+n] != 0x94 {
				return "", false
			}
			v := wv{k: wStr, n: uint64(p+2)<<24 | uint64(n)}
			w.memo = append(w.memo, v)
			p += 3 + n
			return w.sval(v), true
		}
		v, ok := ref()
		if !ok || !w.isStr(v) {
			return "", false
		}
		return w.sval(v), true
	}
	for {
		if p >= end {
			return fail()
		}
		if data[p] == 'u' {
			if !sawAction {
				return fail()
			}
			p++
			break
		}
		k, ok := ref()
		if !ok || !w.isStr(k) || p >= end {
			return fail()
		}
		f := k.f
		if f == 0 {
			f = fieldOf(w.sval(k)) + 1
		}
		switch f - 1 {
		case fAction:
			s, ok := str()
			if !ok {
				return fail()
			}
			action, sawAction = ParseAction(s), true
		case fAddr:
			n, ok := num()
			if !ok {
				return fail()
			}
			addr = n
		case fSize:
			n, ok := num()
			if !ok {
				return fail()
			}
			size = int64(n)
		case fTime:
			n, ok := num()
			if !ok {
				return fail()
			}
			timeUS, hasTime = int64(n), true
		case fStream:
			n, ok := num()
			if !ok {
				return fail()
			}
			stream = w.streamID(int64(n))
		case fCC:
			s, ok := str()
			if !ok {
				return fail()
			}
			cc = 0
			if s != "N/A" {
				cc = w.str(s) + 1
			}
		case fUM:
			if q := p; data[q] == 'h' || data[q] == 'j' {
				// Usually the same fetched string every time.
				if v, q2, ok := w.ref(data, q, end); ok && v == w.umVal && w.umID != 0 {
					p, um = q2, w.umID
					break
				} else if ok && v.k == wPStr {
					p, um = q2, w.str(w.sval(v))+1
					w.umVal, w.umID = v, um
					break
				}
			}
			s, ok := str()
			if !ok {
				return fail()
			}
			um = w.str(s) + 1
		case fFrames:
			if data[p] == ']' {
				if p+2 > end || data[p+1] != 0x94 {
					return fail()
				}
				slot := len(w.memo)
				w.memo = append(w.memo, wv{k: wEmptyList})
				p += 2
				if p >= end {
					return fail()
				}
				if data[p] != '(' {
					stack = 0 // an empty list
					break
				}
				p++
				w.key = w.key[:0]
				for {
					if p >= end {
						return fail()
					}
					if data[p] == 'e' {
						p++
						break
					}
					v, ok := ref()
					if !ok {
						return fail()
					}
					var r uint32
					switch {
					case v.k == wFrame:
						r = refLocal | uint32(v.n)
					case v.k == wGFrame && v.n < refMax:
						r = refGlobal | uint32(v.n)
					case v.k == wExt && v.n < refMax:
						r = refExt | uint32(v.n)
					default:
						return fail()
					}
					w.key = binary.LittleEndian.AppendUint32(w.key, r)
				}
				n := len(w.key) / 4
				if n == 0 || n >= 1000 {
					return fail()
				}
				id, ok := w.stackIDs[string(w.key)]
				if !ok {
					id = uint32(len(w.stackTab))
					refs := make([]uint32, n)
					for j := range refs {
						refs[j] = binary.LittleEndian.Uint32(w.key[4*j:])
					}
					w.stackTab = append(w.stackTab, refs)
					w.stackIDs[string(w.key)] = id
				}
				w.memo[slot] = wv{k: wStack, n: uint64(id)}
				stack = id + 1
				break
			}
			v, ok := ref()
			if !ok {
				return fail()
			}
			switch v.k {
			case wStack:
				stack = uint32(v.n) + 1
			case wGStack:
				stack = uint32(v.n) | 1<<31
			case wEmptyList:
				stack = 0
			default:
				return fail()
			}
		default:
			return fail()
		}
	}
	t := &w.t
	t.HasTime = t.HasTime || hasTime
	r := t.appendRow(row{action, addr, size, timeUS, stream, stack, cc, um})
	w.memo[memo0] = wv{k: wEntry, n: uint64(r)}
	return p
}

// ref reads a BINGET or LONG_BINGET at p.
func (w *worker) ref(data []byte, p, end int) (wv, int, bool) {
	var i int
	switch data[p] {
	case 'h':
		if p+2 > end {
			return wv{}, p, false
		}
		i = int(data[p+1])
		p += 2
	case 'j':
		if p+5 > end {
			return wv{}, p, false
		}
		i = int(binary.LittleEndian.Uint32(data[p+1:]))
		p += 5
	default:
		return wv{}, p, false
	}
	if i >= w.base || i >= w.env.prefixLen || i >= len(w.pre) {
		v, ok := w.get(i)
		return v, p, ok
	}
	return w.pre[i], p, w.preOK[i]
}
