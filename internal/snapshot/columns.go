package snapshot

import "github.com/ptscope/ptscope/internal/spillmem"

// row is one trace entry on its way into the columns.
type row struct {
	action       Action
	addr         uint64
	size, timeUS int64
	stream       uint32
	stack        StackID
	cc, um       uint32
}

// appendRow appends r to every column (growing them together) and returns
// its index.
func (t *Trace) appendRow(r row) int {
	if len(t.Action) == cap(t.Action) {
		t.grow()
	}
	t.Action = append(t.Action, r.action)
	t.Addr = append(t.Addr, r.addr)
	t.Size = append(t.Size, r.size)
	t.Stream = append(t.Stream, r.stream)
	t.TimeUS = append(t.TimeUS, r.timeUS)
	t.Stack = append(t.Stack, r.stack)
	t.CompileContext = append(t.CompileContext, r.cc)
	t.UserMetadata = append(t.UserMetadata, r.um)
	return len(t.Action) - 1
}

// window makes t's columns empty views of dst's spare capacity [off,
// off+n): appends fill dst in place up to n rows, and move to arrays of
// their own past that. The parallel reader's workers decode into windows
// so that the merge need not copy their rows.
func (t *Trace) window(dst *Trace, off, n int) {
	hi := off + n
	t.Action, t.Addr, t.Size = dst.Action[off:off:hi], dst.Addr[off:off:hi], dst.Size[off:off:hi]
	t.Stream, t.TimeUS, t.Stack = dst.Stream[off:off:hi], dst.TimeUS[off:off:hi], dst.Stack[off:off:hi]
	t.CompileContext, t.UserMetadata = dst.CompileContext[off:off:hi], dst.UserMetadata[off:off:hi]
}

// inWindow reports whether t's rows lie in dst's arrays starting at row off
// (t was a window of dst that never outgrew it). The columns only ever move
// together (growTo), so the first one tells.
func (t *Trace) inWindow(dst *Trace, off int) bool {
	n := t.Len()
	return n == 0 || off+n <= cap(dst.Action) && &t.Action[0] == &dst.Action[:off+1][off]
}

// rowAt returns entry i.
func (t *Trace) rowAt(i int) row {
	return row{t.Action[i], t.Addr[i], t.Size[i], t.TimeUS[i], t.Stream[i], t.Stack[i], t.CompileContext[i], t.UserMetadata[i]}
}

// grow doubles the capacity of every column at once.
func (t *Trace) grow() { t.growTo(max(2*cap(t.Action), 1024)) }

// growTo sets the capacity of every column to n.
func (t *Trace) growTo(n int) {
	a := t.arena
	t.Action = append(spillmem.MakeCap[Action](a, 0, n), t.Action...)
	t.Addr = append(spillmem.MakeCap[uint64](a, 0, n), t.Addr...)
	t.Size = append(spillmem.MakeCap[int64](a, 0, n), t.Size...)
	t.Stream = append(spillmem.MakeCap[uint32](a, 0, n), t.Stream...)
	t.TimeUS = append(spillmem.MakeCap[int64](a, 0, n), t.TimeUS...)
	t.Stack = append(spillmem.MakeCap[StackID](a, 0, n), t.Stack...)
	t.CompileContext = append(spillmem.MakeCap[uint32](a, 0, n), t.CompileContext...)
	t.UserMetadata = append(spillmem.MakeCap[uint32](a, 0, n), t.UserMetadata...)
}
