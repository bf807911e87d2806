package snapshot

import (
	"sort"
	"strings"
	"sync/atomic"

	"github.com/ptscope/ptscope/internal/pickle"
	"github.com/ptscope/ptscope/internal/spillmem"
)

// merge folds the stretches into the builder in file order and moves the
// decoder past them.
func (e *parEnv) merge(b *builder, run int, units []unit) error {
	n0 := len(b.entries.Action)
	total := 0
	for u := range units {
		units[u].rowOff = total
		total += units[u].w.t.Len()
	}
	m := mergeMemo{units: units, n0: n0}
	strMaps, streamMaps, hasTime, err := m.internTables(b)
	if err != nil {
		return err
	}
	inPlace := e.sizeColumns(b, n0, total, units, hasTime)
	bad := fillColumns(&b.entries, n0, units, inPlace, strMaps, streamMaps)
	if m.patch(&b.entries) {
		bad = true
	}
	if bad {
		return errMerge
	}
	closed := closeRun(b, run, n0, units)
	push := make([]pickle.Value, 0, total-closed)
	for i := closed; i < total; i++ {
		push = append(push, pickle.Handle(hEntry|uint64(n0+i)))
	}
	lu := units[len(units)-1]
	memoLen := lu.slot + len(lu.w.memo)
	if err := e.dec.Skip(int64(lu.w.stop), memoLen, e.chainResolve(m.vmResolve), true, push); err != nil {
		return errMerge
	}
	return nil
}

// mergeMemo answers for the memo slots of the stretches being merged,
// whose rows start at row n0 of the builder.
type mergeMemo struct {
	units []unit
	n0    int
}

// resolve returns the value of a memo slot of the stretches, global ids.
// Strings come back as wStr with their content in the string.
func (m *mergeMemo) resolve(slot int) (wv, string, bool) {
	units := m.units
	j := sort.Search(len(units), func(i int) bool { return units[i].slot > slot }) - 1
	if j < 0 || slot-units[j].slot >= len(units[j].w.memo) {
		return wv{}, "", false
	}
	v := units[j].w.memo[slot-units[j].slot]
	switch v.k {
	case wExt:
		return m.resolve(int(v.n))
	case wStr, wPStr, wLStr:
		return wv{k: wStr}, units[j].w.sval(v), true
	case wFrame:
		if units[j].frameMap == nil {
			return wv{}, "", false
		}
		return wv{k: wGFrame, n: uint64(units[j].frameMap[v.n])}, "", true
	case wStack:
		if units[j].stackMap == nil {
			return wv{}, "", false
		}
		return wv{k: wGStack, n: uint64(units[j].stackMap[v.n])}, "", true
	case wEntry:
		return wv{k: wEntry, n: uint64(m.n0 + units[j].rowOff + int(v.n))}, "", true
	case wDict, wList:
		return wv{k: wOther}, "", true
	}
	return v, "", true
}

// vmResolve is resolve as the decoder's values, for the slots the
// decoder reads after it skips the stretches.
func (m *mergeMemo) vmResolve(slot int) (pickle.Value, bool) {
	v, str, ok := m.resolve(slot)
	if !ok {
		return pickle.Value{}, false
	}
	switch v.k {
	case wNone:
		return pickle.None(), true
	case wInt:
		return pickle.Int(int64(v.n)), true
	case wStr:
		return pickle.Str(strings.Clone(str)), true
	case wGFrame:
		return pickle.Handle(hFrame | v.n), true
	case wGStack:
		return pickle.Handle(hStack | v.n), true
	case wEntry:
		return pickle.Handle(hEntry | v.n), true
	case wEmptyList:
		return pickle.NewList(), true
	}
	return pickle.Value{}, false
}

// internTables interns each stretch's streams, strings, frames and stacks
// into the builder: it returns the string and stream maps (local id ->
// the builder's) and sets each unit's frame and stack maps; hasTime tells
// whether a stretch has times.
func (m *mergeMemo) internTables(b *builder) (strMaps, streamMaps [][]uint32, hasTime bool, err error) {
	units := m.units
	strMaps = make([][]uint32, len(units))
	streamMaps = make([][]uint32, len(units))
	for u := range units {
		w := units[u].w
		hasTime = hasTime || w.t.HasTime
		streamMaps[u] = make([]uint32, len(w.streamTab))
		for i, n := range w.streamTab {
			streamMaps[u][i] = b.streamID(n)
		}
		strMaps[u] = make([]uint32, len(w.strTab))
		for i, s := range w.strTab {
			strMaps[u][i] = b.str(strings.Clone(s))
		}
		fm := make([]uint32, len(w.frameTab))
		for i, f := range w.frameTab {
			f.Filename, f.Name = strings.Clone(f.Filename), strings.Clone(f.Name)
			fm[i] = b.frameID(f)
		}
		units[u].frameMap = fm
		sm := make([]uint32, len(w.stackTab))
		for i, refs := range w.stackTab {
			b.ids = b.ids[:0]
			for _, r := range refs {
				switch r & refMask {
				case refLocal:
					b.ids = append(b.ids, fm[r&^refMask])
				case refGlobal:
					b.ids = append(b.ids, r&^refMask)
				case refExt:
					v, _, ok := m.resolve(int(r &^ refMask))
					if !ok || v.k != wGFrame {
						return nil, nil, false, errMerge
					}
					b.ids = append(b.ids, uint32(v.n))
				default:
					return nil, nil, false, errMerge
				}
			}
			sm[i] = b.internStack()
		}
		units[u].stackMap = sm
	}
	return strMaps, streamMaps, hasTime, nil
}

// sizeColumns makes the builder's columns hold total more rows after n0:
// in place when every stretch filled its window of the builder's arrays
// at its final offset (it reports true), else new arrays the rows are
// copied into.
func (e *parEnv) sizeColumns(b *builder, n0, total int, units []unit, hasTime bool) (inPlace bool) {
	t := &b.entries
	inPlace = true
	for u := range units {
		inPlace = inPlace && units[u].w.t.inWindow(t, n0+units[u].rowOff)
	}
	if inPlace { // the windows lie within the capacity: it holds every row
		e.inPlace++
	} else {
		// New arrays: the windows may alias the old ones at other offsets.
		t.growTo(n0 + total)
	}
	t.HasTime = t.HasTime || hasTime
	t.Action = t.Action[:n0+total]
	t.Addr = t.Addr[:n0+total]
	t.Size = t.Size[:n0+total]
	t.Stream = t.Stream[:n0+total]
	t.TimeUS = t.TimeUS[:n0+total]
	t.Stack = t.Stack[:n0+total]
	t.CompileContext = t.CompileContext[:n0+total]
	t.UserMetadata = t.UserMetadata[:n0+total]
	return inPlace
}

// fillColumns writes each stretch's rows into t after n0, the stretches
// in parallel: copies of the plain columns (unless inPlace), the streams,
// stacks and strings mapped to the builder's ids. It reports whether a
// stretch held an id out of range.
func fillColumns(t *Trace, n0 int, units []unit, inPlace bool, strMaps, streamMaps [][]uint32) bool {
	var bad atomic.Bool
	parallel(len(units), len(units), func(u int) {
		defer func() {
			if recover() != nil {
				bad.Store(true)
			}
		}()
		w := units[u].w
		o := n0 + units[u].rowOff
		lt := &w.t
		n := lt.Len()
		if !inPlace {
			copy(t.Action[o:o+n], lt.Action)
			copy(t.Addr[o:o+n], lt.Addr)
			copy(t.Size[o:o+n], lt.Size)
			copy(t.TimeUS[o:o+n], lt.TimeUS)
		}
		sm, strm, stm := units[u].stackMap, strMaps[u], streamMaps[u]
		for i := range n {
			spillmem.Poll(t.arena, i)
			t.Stream[o+i] = stm[lt.Stream[i]]
			switch s := lt.Stack[i]; {
			case s == 0:
				t.Stack[o+i] = 0
			case s&(1<<31) != 0:
				t.Stack[o+i] = s &^ (1 << 31)
			default:
				t.Stack[o+i] = sm[s-1]
			}
			if c := lt.CompileContext[i]; c != 0 {
				t.CompileContext[o+i] = strm[c-1]
			} else {
				t.CompileContext[o+i] = 0
			}
			if c := lt.UserMetadata[i]; c != 0 {
				t.UserMetadata[o+i] = strm[c-1]
			} else {
				t.UserMetadata[o+i] = 0
			}
		}
	})
	return bad.Load()
}

// patch resolves the rows' actions and stacks that a stretch left as memo
// references (its patches) in t. It reports whether one cannot be.
func (m *mergeMemo) patch(t *Trace) (bad bool) {
	units, n0 := m.units, m.n0
	for u := range units {
		w := units[u].w
		o := n0 + units[u].rowOff
		for _, p := range w.actPatch {
			v, str, ok := m.resolve(p.slot)
			switch {
			case !ok:
				bad = true
			case v.k == wStr:
				t.Action[o+p.row] = ParseAction(str)
			case v.k == wInt || v.k == wNone || v.k == wEmptyList:
				t.Action[o+p.row] = ActionUnknown
			default:
				bad = true
			}
		}
		for _, p := range w.stackPatch {
			v, _, ok := m.resolve(p.slot)
			switch {
			case !ok:
				bad = true
			case v.k == wGStack:
				t.Stack[o+p.row] = uint32(v.n)
			case v.k == wInt || v.k == wNone || v.k == wEmptyList || v.k == wStr:
				t.Stack[o+p.row] = 0
			default:
				bad = true
			}
		}
	}
	return bad
}

// closeRun adds the rows before the last APPENDS MARK of the stretches
// (from n0) to run; it returns how many. The rest are the open batch, for
// the decoder's stack.
func closeRun(b *builder, run, n0 int, units []unit) (closed int) {
	for u := range units {
		if ls := units[u].w.lastSep; ls >= 0 {
			closed = units[u].rowOff + ls
		}
	}
	rn := &b.runs[run]
	if rn.rows == nil && rn.hi == n0 && rn.hi > rn.lo {
		rn.hi = n0 + closed
		rn.n += closed
		b.inRun.setRange(n0, n0+closed)
	} else {
		for i := range closed {
			b.addRow(rn, n0+i)
		}
	}
	return closed
}

// chainResolve keeps earlier regions' slots answerable after a later Skip.
func (e *parEnv) chainResolve(f func(int) (pickle.Value, bool)) func(int) (pickle.Value, bool) {
	prev := e.vmResolve
	lo := e.prefixLen
	e.vmResolve = func(i int) (pickle.Value, bool) {
		if i >= lo {
			return f(i)
		}
		if prev != nil {
			return prev(i)
		}
		return pickle.Value{}, false
	}
	return e.vmResolve
}
