package kineto

import (
	"bytes"
	"fmt"

	"encoding/json"
)

// The encoding/json path: the fallback for the events the scanner (scan.go) does
// not decode itself, and the reference it is fuzzed against.

// wireEvent is what encoding/json decodes one event into: every field is a
// json.RawMessage, whose capacity is reused from event to event. view parses
// the fields ptscope uses. Only events the scanner leaves take this path.
type wireEvent struct {
	Ph   json.RawMessage `json:"ph"`
	Cat  json.RawMessage `json:"cat"`
	Name json.RawMessage `json:"name"`
	Pid  json.RawMessage `json:"pid"`
	Tid  json.RawMessage `json:"tid"`
	Ts   json.RawMessage `json:"ts"`
	Dur  json.RawMessage `json:"dur"`
	ID   json.RawMessage `json:"id"`
	Args wireArgs        `json:"args"`
}

// wireArgs holds the raw arguments ptscope uses; all others are skipped.
type wireArgs struct {
	ExternalID     json.RawMessage `json:"External id"`
	Correlation    json.RawMessage `json:"correlation"`
	Device         json.RawMessage `json:"device"`
	Stream         json.RawMessage `json:"stream"`
	BlocksPerSM    json.RawMessage `json:"blocks per SM"`
	Occupancy      json.RawMessage `json:"est. achieved occupancy %"`
	Registers      json.RawMessage `json:"registers per thread"`
	SharedMem      json.RawMessage `json:"shared memory"`
	Grid           json.RawMessage `json:"grid"`
	Block          json.RawMessage `json:"block"`
	CopyBytes      json.RawMessage `json:"bytes"`
	SeqNum         json.RawMessage `json:"Sequence number"`
	FwdThread      json.RawMessage `json:"Fwd thread id"`
	InputDims      json.RawMessage `json:"Input Dims"`
	InputType      json.RawMessage `json:"Input type"`
	MName          json.RawMessage `json:"name"`
	Labels         json.RawMessage `json:"labels"`
	SortIndex      json.RawMessage `json:"sort_index"`
	DeviceType     json.RawMessage `json:"Device Type"`
	DeviceID       json.RawMessage `json:"Device Id"`
	Addr           json.RawMessage `json:"Addr"`
	MemBytes       json.RawMessage `json:"Bytes"`
	TotalAllocated json.RawMessage `json:"Total Allocated"`
	TotalReserved  json.RawMessage `json:"Total Reserved"`
	Collective     json.RawMessage `json:"Collective name"`
	Dtype          json.RawMessage `json:"dtype"`
	InNelems       json.RawMessage `json:"In msg nelems"`
	OutNelems      json.RawMessage `json:"Out msg nelems"`
	GroupSize      json.RawMessage `json:"Group size"`
	PGName         json.RawMessage `json:"Process Group Name"`
	CommSeq        json.RawMessage `json:"Seq"`
	WaitStream     json.RawMessage `json:"wait_on_stream"`
	WaitEventCorr  json.RawMessage `json:"wait_on_cuda_event_record_corr_id"`
	Bandwidth      json.RawMessage `json:"memory bandwidth (GB/s)"`
}

func (w *wireEvent) reset() {
	w.Ph = w.Ph[:0]
	w.Cat = w.Cat[:0]
	w.Name = w.Name[:0]
	w.Pid = w.Pid[:0]
	w.Tid = w.Tid[:0]
	w.Ts = w.Ts[:0]
	w.Dur = w.Dur[:0]
	w.ID = w.ID[:0]
	a := &w.Args
	a.ExternalID = a.ExternalID[:0]
	a.Correlation = a.Correlation[:0]
	a.Device = a.Device[:0]
	a.Stream = a.Stream[:0]
	a.BlocksPerSM = a.BlocksPerSM[:0]
	a.Occupancy = a.Occupancy[:0]
	a.Registers = a.Registers[:0]
	a.SharedMem = a.SharedMem[:0]
	a.Grid = a.Grid[:0]
	a.Block = a.Block[:0]
	a.CopyBytes = a.CopyBytes[:0]
	a.SeqNum = a.SeqNum[:0]
	a.FwdThread = a.FwdThread[:0]
	a.InputDims = a.InputDims[:0]
	a.InputType = a.InputType[:0]
	a.MName = a.MName[:0]
	a.Labels = a.Labels[:0]
	a.SortIndex = a.SortIndex[:0]
	a.DeviceType = a.DeviceType[:0]
	a.DeviceID = a.DeviceID[:0]
	a.Addr = a.Addr[:0]
	a.MemBytes = a.MemBytes[:0]
	a.TotalAllocated = a.TotalAllocated[:0]
	a.TotalReserved = a.TotalReserved[:0]
	a.Collective = a.Collective[:0]
	a.Dtype = a.Dtype[:0]
	a.InNelems = a.InNelems[:0]
	a.OutNelems = a.OutNelems[:0]
	a.GroupSize = a.GroupSize[:0]
	a.PGName = a.PGName[:0]
	a.CommSeq = a.CommSeq[:0]
	a.WaitStream = a.WaitStream[:0]
	a.WaitEventCorr = a.WaitEventCorr[:0]
	a.Bandwidth = a.Bandwidth[:0]
}

// view parses w into ev (slices of ev point into w until the next reset).
func (w *wireEvent) view(ev *rawEvent) {
	ev.Ph = toStr(w.Ph)
	ev.Cat = toStr(w.Cat)
	ev.Name = toStr(w.Name)
	ev.Pid = toID(w.Pid)
	ev.Tid = toID(w.Tid)
	ev.Ts = toTime(w.Ts)
	ev.Dur = toTime(w.Dur)
	ev.ID = toID(w.ID)
	a, wa := &ev.Args, &w.Args
	a.ExternalID = parseNum(wa.ExternalID)
	a.Correlation = parseNum(wa.Correlation)
	a.Device = parseNum(wa.Device)
	a.Stream = parseNum(wa.Stream)
	a.BlocksPerSM = parseNum(wa.BlocksPerSM)
	a.Occupancy = parseNum(wa.Occupancy)
	a.Registers = parseNum(wa.Registers)
	a.SharedMem = parseNum(wa.SharedMem)
	a.Grid = numArray(wa.Grid, a.Grid[:0])
	a.Block = numArray(wa.Block, a.Block[:0])
	a.CopyBytes = parseNum(wa.CopyBytes)
	a.SeqNum = parseNum(wa.SeqNum)
	a.FwdThread = parseNum(wa.FwdThread)
	a.InputDims = rawJSONOf(wa.InputDims)
	a.InputType = rawJSONOf(wa.InputType)
	a.MName = toStr(wa.MName)
	a.Labels = toStr(wa.Labels)
	a.SortIndex = parseNum(wa.SortIndex)
	a.DeviceType = parseNum(wa.DeviceType)
	a.DeviceID = parseNum(wa.DeviceID)
	a.Addr = parseNum(wa.Addr)
	a.MemBytes = parseNum(wa.MemBytes)
	a.TotalAllocated = parseNum(wa.TotalAllocated)
	a.TotalReserved = parseNum(wa.TotalReserved)
	a.Collective = toStr(wa.Collective)
	a.Dtype = toStr(wa.Dtype)
	a.InNelems = parseNum(wa.InNelems)
	a.OutNelems = parseNum(wa.OutNelems)
	a.GroupSize = parseNum(wa.GroupSize)
	a.PGName = toStr(wa.PGName)
	a.CommSeq = parseNum(wa.CommSeq)
	a.WaitStream = parseNum(wa.WaitStream)
	a.WaitEventCorr = parseNum(wa.WaitEventCorr)
	a.Bandwidth = parseNum(wa.Bandwidth)
}

func toStr(b []byte) rawStr {
	var r rawStr
	if len(b) > 0 {
		r.UnmarshalJSON(b)
	}
	return r
}

func toID(b []byte) idVal {
	var v idVal
	if len(b) > 0 {
		v.UnmarshalJSON(b)
	}
	return v
}

func toTime(b []byte) timeVal {
	var t timeVal
	if len(b) > 0 {
		t.UnmarshalJSON(b)
	}
	return t
}

// numArray parses a flat JSON array of numbers ("[1, 2, 3]") into dst.
func numArray(b []byte, dst []Num) []Num {
	b = bytes.TrimSpace(b)
	if len(b) < 2 || b[0] != '[' || b[len(b)-1] != ']' {
		return dst
	}
	b = b[1 : len(b)-1]
	for len(bytes.TrimSpace(b)) > 0 {
		item := b
		if k := bytes.IndexByte(b, ','); k >= 0 {
			item, b = b[:k], b[k+1:]
		} else {
			b = nil
		}
		dst = append(dst, parseNum(bytes.TrimSpace(item)))
	}
	return dst
}

// decodeStdJSON decodes one event with encoding/json, repairing it if need be
// (nil when it was dropped). scanEvent leaves every event it cannot decode
// exactly as encoding/json does to this path, which also words the errors.
func (p *part) decodeStdJSON(data []byte, off int64) *wireEvent {
	w := &p.wire
	w.reset()
	if err := json.Unmarshal(data, w); err != nil {
		fixed, changed := repair(data)
		w.reset()
		if !changed || json.Unmarshal(fixed, w) != nil {
			p.damage.Dropped++
			if len(p.damage.Warnings) < 5 {
				p.damage.Warnings = append(p.damage.Warnings,
					fmt.Sprintf("offset %d: event dropped: %s", off, shortErr(err)))
			}
			return nil
		}
		p.damage.Repaired++
	}
	return w
}
