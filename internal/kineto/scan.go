package kineto

import (
	"bytes"
	"math/bits"
)

// scanEvent is the decoder's fast path: one pass over the bytes of one event
// object that parses the fields ptscope reads into ev (its slices point
// into data), skipping all other keys and values, and keeps in raw the text
// of the fields check quotes. It gives what encoding/json's decode of data into a
// wireEvent and view give, or it returns false and the caller decodes data
// with encoding/json, which either reports the error or applies the rules
// scanEvent leaves to it. scanEvent returns false for
//   - anything but strict JSON (RFC 8259) of one object and whitespace;
//   - a key with an escape or a byte outside ASCII;
//   - a key that names a field only by case folding ("Ts", "BYTES");
//   - an "args" value that is neither an object nor null;
//   - values nested deeper than maxDepth.
//
// Nothing else: every event of the real traces is decoded here. A
// duplicate key replaces the field's value, and a second "args" object adds
// to the first, as in encoding/json.
//
// ev must hold what the previous call left (or be zero): st says which of
// its args to clear.
func scanEvent(data []byte, ev *rawEvent, raw *rawRefs, st *scanState) bool {
	ev.Ph, ev.Cat, ev.Name = rawStr{}, rawStr{}, rawStr{}
	ev.Pid, ev.Tid, ev.ID = idVal{}, idVal{}, idVal{}
	ev.Ts, ev.Dur = timeVal{}, timeVal{}
	st.clear(&ev.Args)
	*raw = rawRefs{}
	i := skipWS(data, 0)
	if i >= len(data) || data[i] != '{' {
		return false
	}
	i = skipWS(data, i+1)
	if i < len(data) && data[i] == '}' {
		return skipWS(data, i+1) == len(data)
	}
	for {
		k, j := eventKeys.key(data, i, st)
		if j < 0 {
			return false
		}
		i = j
		switch k {
		case evPh:
			i = scanStr(data, i, &ev.Ph)
		case evCat:
			i = scanStr(data, i, &ev.Cat)
		case evName:
			i = scanStr(data, i, &ev.Name)
		case evPid:
			i = scanID(data, i, &ev.Pid)
		case evTid:
			i = scanID(data, i, &ev.Tid)
		case evID:
			i = scanID(data, i, &ev.ID)
		case evTs:
			i = scanTime(data, i, &ev.Ts, &raw.ts)
		case evDur:
			i = scanTime(data, i, &ev.Dur, &raw.dur)
		case evArgs:
			switch {
			case i < len(data) && data[i] == '{':
				i = scanArgs(data, i, &ev.Args, raw, st)
			case bytes.HasPrefix(data[i:], litNull):
				i += len(litNull)
			default:
				return false
			}
		default:
			i = skipValue(data, i, 1)
		}
		if i < 0 {
			return false
		}
		i = skipWS(data, i)
		if i >= len(data) {
			return false
		}
		switch data[i] {
		case ',':
			i = skipWS(data, i+1)
		case '}':
			return skipWS(data, i+1) == len(data)
		default:
			return false
		}
	}
}

// rawRefs is the text of the fields check quotes (nil when absent).
type rawRefs struct {
	ts, dur, memBytes []byte
}

// scanState is what scanEvent keeps from event to event: which args of
// the rawEvent it fills are set, and the keys of no field it has checked.
type scanState struct {
	args  uint64 // bit k: arg k (argExternalID...)
	other [128]otherKey
}

// otherKey is a plain key of at most 16 bytes that names no field exactly
// nor by folding, by its first and last eight bytes (as keyWord loads
// them, overlapping for 9 to 15 bytes; w1 = w0 up to 8): "Ev Idx",
// "Python id", "Concrete Inputs" need no check again.
type otherKey struct {
	w0, w1 uint64
	n      int
	table  *keyTable
}

// all marks every arg set, as view sets them.
func (st *scanState) all() { st.args = 1<<argCount - 1 }

func (st *scanState) clear(a *rawArgs) {
	for m := st.args; m != 0; m &= m - 1 {
		a.set(bits.TrailingZeros64(m), nil)
	}
	st.args = 0
}

// scanStr parses the value at data[i] as toStr does.
func scanStr(data []byte, i int, dst *rawStr) int {
	if i < len(data) && data[i] == '"' {
		end, esc := scanString(data, i)
		if end >= 0 {
			*dst = rawStr{b: data[i+1 : end-1], escaped: esc, ok: true}
		}
		return end
	}
	end := skipValue(data, i, 1)
	if end >= 0 {
		*dst = toStr(data[i:end])
	}
	return end
}

// scanID parses the value at data[i] as toID does.
func scanID(data []byte, i int, dst *idVal) int {
	if v, end, ok := scanInt(data, i); ok {
		*dst = idVal{n: v, ok: true}
		return end
	}
	end := skipValue(data, i, 1)
	if end >= 0 {
		*dst = toID(data[i:end])
	}
	return end
}

// scanTime parses the value at data[i] as toTime does.
func scanTime(data []byte, i int, dst *timeVal, raw *[]byte) int {
	if ns, end, ok := scanMicros(data, i); ok {
		*raw = data[i:end:end]
		*dst = timeVal{ns: ns, ok: true}
		return end
	}
	end := skipValue(data, i, 1)
	if end >= 0 {
		*raw = data[i:end:end]
		*dst = toTime(*raw)
	}
	return end
}

// the args of rawArgs, by bit of scanState.args
const (
	argExternalID = iota
	argCorrelation
	argDevice
	argStream
	argBlocksPerSM
	argOccupancy
	argRegisters
	argSharedMem
	argGrid
	argBlock
	argCopyBytes
	argSeqNum
	argFwdThread
	argInputDims
	argInputType
	argMName
	argLabels
	argSortIndex
	argDeviceType
	argDeviceID
	argAddr
	argMemBytes
	argTotalAllocated
	argTotalReserved
	argCollective
	argDtype
	argInNelems
	argOutNelems
	argGroupSize
	argPGName
	argCommSeq
	argWaitStream
	argWaitEventCorr
	argBandwidth
	argCount
)

// set parses the raw value v of arg k as view does (v nil: absent).
func (a *rawArgs) set(k int, v []byte) {
	switch k {
	case argExternalID:
		a.ExternalID = parseNum(v)
	case argCorrelation:
		a.Correlation = parseNum(v)
	case argDevice:
		a.Device = parseNum(v)
	case argStream:
		a.Stream = parseNum(v)
	case argBlocksPerSM:
		a.BlocksPerSM = parseNum(v)
	case argOccupancy:
		a.Occupancy = parseNum(v)
	case argRegisters:
		a.Registers = parseNum(v)
	case argSharedMem:
		a.SharedMem = parseNum(v)
	case argGrid:
		a.Grid = numArray(v, a.Grid[:0])
	case argBlock:
		a.Block = numArray(v, a.Block[:0])
	case argCopyBytes:
		a.CopyBytes = parseNum(v)
	case argSeqNum:
		a.SeqNum = parseNum(v)
	case argFwdThread:
		a.FwdThread = parseNum(v)
	case argInputDims:
		a.InputDims = rawJSONOf(v)
	case argInputType:
		a.InputType = rawJSONOf(v)
	case argMName:
		a.MName = toStr(v)
	case argLabels:
		a.Labels = toStr(v)
	case argSortIndex:
		a.SortIndex = parseNum(v)
	case argDeviceType:
		a.DeviceType = parseNum(v)
	case argDeviceID:
		a.DeviceID = parseNum(v)
	case argAddr:
		a.Addr = parseNum(v)
	case argMemBytes:
		a.MemBytes = parseNum(v)
	case argTotalAllocated:
		a.TotalAllocated = parseNum(v)
	case argTotalReserved:
		a.TotalReserved = parseNum(v)
	case argCollective:
		a.Collective = toStr(v)
	case argDtype:
		a.Dtype = toStr(v)
	case argInNelems:
		a.InNelems = parseNum(v)
	case argOutNelems:
		a.OutNelems = parseNum(v)
	case argGroupSize:
		a.GroupSize = parseNum(v)
	case argPGName:
		a.PGName = toStr(v)
	case argCommSeq:
		a.CommSeq = parseNum(v)
	case argWaitStream:
		a.WaitStream = parseNum(v)
	case argWaitEventCorr:
		a.WaitEventCorr = parseNum(v)
	case argBandwidth:
		a.Bandwidth = parseNum(v)
	}
}

// numArgs marks the args of type Num (setNum).
const numArgs = 1<<argExternalID | 1<<argCorrelation | 1<<argDevice | 1<<argStream |
	1<<argBlocksPerSM | 1<<argOccupancy | 1<<argRegisters | 1<<argSharedMem | 1<<argCopyBytes |
	1<<argSeqNum | 1<<argFwdThread | 1<<argSortIndex | 1<<argDeviceType | 1<<argDeviceID |
	1<<argAddr | 1<<argMemBytes | 1<<argTotalAllocated | 1<<argTotalReserved | 1<<argInNelems |
	1<<argOutNelems | 1<<argGroupSize | 1<<argCommSeq | 1<<argWaitStream | 1<<argWaitEventCorr | 1<<argBandwidth

// setNum sets arg k, one of numArgs, to n.
func (a *rawArgs) setNum(k int, n Num) {
	switch k {
	case argExternalID:
		a.ExternalID = n
	case argCorrelation:
		a.Correlation = n
	case argDevice:
		a.Device = n
	case argStream:
		a.Stream = n
	case argBlocksPerSM:
		a.BlocksPerSM = n
	case argOccupancy:
		a.Occupancy = n
	case argRegisters:
		a.Registers = n
	case argSharedMem:
		a.SharedMem = n
	case argCopyBytes:
		a.CopyBytes = n
	case argSeqNum:
		a.SeqNum = n
	case argFwdThread:
		a.FwdThread = n
	case argSortIndex:
		a.SortIndex = n
	case argDeviceType:
		a.DeviceType = n
	case argDeviceID:
		a.DeviceID = n
	case argAddr:
		a.Addr = n
	case argMemBytes:
		a.MemBytes = n
	case argTotalAllocated:
		a.TotalAllocated = n
	case argTotalReserved:
		a.TotalReserved = n
	case argInNelems:
		a.InNelems = n
	case argOutNelems:
		a.OutNelems = n
	case argGroupSize:
		a.GroupSize = n
	case argCommSeq:
		a.CommSeq = n
	case argWaitStream:
		a.WaitStream = n
	case argWaitEventCorr:
		a.WaitEventCorr = n
	case argBandwidth:
		a.Bandwidth = n
	}
}

// scanArgs scans the args object at data[i] ('{') into a, returning the
// index after it or -1.
func scanArgs(data []byte, i int, a *rawArgs, raw *rawRefs, st *scanState) int {
	i = skipWS(data, i+1)
	if i < len(data) && data[i] == '}' {
		return i + 1
	}
	for {
		k, j := argKeys.key(data, i, st)
		if j < 0 {
			return -1
		}
		var end int
		if k >= 0 && numArgs&(1<<k) != 0 {
			if v, e, ok := scanInt(data, j); ok {
				a.setNum(k, Num{I: v, F: float64(v), OK: true, Int: true})
				end = e
				goto set
			}
		}
		if j < len(data) && data[j] == '"' {
			end = skipString(data, j)
		} else {
			end = skipValue(data, j, 2)
		}
		if end < 0 {
			return -1
		}
		if k >= 0 {
			a.set(k, data[j:end:end])
		}
	set:
		if k >= 0 {
			st.args |= 1 << k
			if k == argMemBytes {
				raw.memBytes = data[j:end:end]
			}
		}
		i = skipWS(data, end)
		if i >= len(data) {
			return -1
		}
		switch data[i] {
		case ',':
			i = skipWS(data, i+1)
		case '}':
			return i + 1
		default:
			return -1
		}
	}
}
