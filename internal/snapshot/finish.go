package snapshot

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unsafe"

	"github.com/ptscope/ptscope/internal/pickle"
)

// finish walks the top level (whose big parts the hooks already converted)
// and assembles the Snapshot.
func (b *builder) finish(root pickle.Value) error {
	s := b.s
	var segs pickle.Value
	switch {
	case root.Dict() != nil:
		d := root.Dict()
		segs, _ = d.Get("segments")
		if tr, ok := d.Get("device_traces"); ok {
			if err := b.traces(tr); err != nil {
				return err
			}
		}
		if st, ok := d.Get("allocator_settings"); ok {
			b.settings(st)
		}
		if an, ok := d.Get("external_annotations"); ok {
			b.annotations(an)
		}
		if _, ok := d.Get("segments"); !ok {
			if _, ok2 := d.Get("device_traces"); !ok2 {
				return errors.New("not an allocator snapshot: the top-level dict has neither 'segments' nor 'device_traces'")
			}
		}
	case root.Kind() == pickle.KindList:
		// Legacy (PyTorch 1.13) or torch.cuda.memory_snapshot(): a bare list of segments.
		segs = root
		s.Legacy = true
	default:
		return fmt.Errorf("not an allocator snapshot: the top level is a %s, expected a dict or a list of segments", root.Kind())
	}
	if l := segs.List(); l != nil {
		for i, it := range l.Items {
			d := it.Dict()
			if d == nil {
				return fmt.Errorf("segments[%d] is a %s, expected a dict", i, it.Kind())
			}
			if b.again(unsafe.Pointer(d)) {
				b.dropSegment(func() string {
					return fmt.Sprintf("segments[%d] is the same segment as an earlier one (a shared reference)", i)
				})
				continue
			}
			s.Segments = append(s.Segments, b.segment(i, d))
		}
	}
	sort.SliceStable(s.Segments, func(i, j int) bool {
		if s.Segments[i].Device != s.Segments[j].Device {
			return s.Segments[i].Device < s.Segments[j].Device
		}
		return s.Segments[i].Address < s.Segments[j].Address
	})
	b.blocks = nil
	return b.refuseInvalid()
}

func (b *builder) traces(v pickle.Value) error {
	l := v.List()
	if l == nil {
		return fmt.Errorf("device_traces is a %s, expected a list", v.Kind())
	}
	if len(l.Items) > 1<<16 {
		return fmt.Errorf("device_traces has %d devices", len(l.Items))
	}
	all := &b.entries
	for dev, it := range l.Items {
		t := Trace{Device: dev, HasTime: all.HasTime, arena: all.arena}
		var r run
		if h, ok := it.Handle(); ok && h&hMask == hRun && int(h&^hMask) < len(b.runs) {
			r = b.runs[h&^hMask]
		} else if dl := it.List(); dl != nil {
			for k, e := range dl.Items {
				if h, ok := e.Handle(); ok && h&hMask == hEntry {
					b.addRow(&r, int(h&^hMask))
				} else if d := e.Dict(); d != nil {
					b.addRow(&r, b.addEntry(d)) // a dict the hook did not see (shared)
				} else {
					r.n++
					t.Invalid.Dropped++
					t.Invalid.add(-1, func() string {
						return fmt.Sprintf("device_traces[%d][%d] is a %s, expected a dict", dev, k, kindName(e.Kind()))
					})
				}
			}
		}
		if r.dups > 0 {
			first := r.firstDup
			t.Invalid.add(-1, func() string {
				return fmt.Sprintf("device_traces[%d][%d] is the same entry as an earlier one (a shared reference)", dev, first)
			})
			t.Invalid.Count += r.dups - 1
			t.Invalid.Dropped += r.dups
		}
		rows := r.rows
		if rows == nil && r.hi > r.lo {
			// Rows are normally contiguous and in order: slice the columns.
			lo, hi := r.lo, r.hi
			t.Action, t.Addr, t.Size = all.Action[lo:hi:hi], all.Addr[lo:hi:hi], all.Size[lo:hi:hi]
			t.Stream, t.TimeUS, t.Stack = all.Stream[lo:hi:hi], all.TimeUS[lo:hi:hi], all.Stack[lo:hi:hi]
			t.CompileContext, t.UserMetadata = all.CompileContext[lo:hi:hi], all.UserMetadata[lo:hi:hi]
			b.validate(&t, func(i int) int { return lo + i })
		} else {
			for _, r := range rows {
				t.appendRow(all.rowAt(r))
			}
			b.validate(&t, func(i int) int { return rows[i] })
		}
		b.s.Traces = append(b.s.Traces, t)
	}
	return nil
}

func getInt(d *pickle.Dict, key string) int64 {
	v, _ := d.Get(key)
	n, ok := v.Int()
	if !ok {
		if u, ok := v.Uint(); ok {
			return int64(u)
		}
	}
	return n
}

func (b *builder) segment(i int, d *pickle.Dict) Segment {
	g := Segment{Type: "large"}
	g.Device = int(getInt(d, "device"))
	if v, ok := d.Get("address"); ok {
		g.Address, _ = v.Uint()
	}
	g.TotalSize = getInt(d, "total_size")
	g.AllocatedSize = getInt(d, "allocated_size")
	g.ActiveSize = getInt(d, "active_size")
	g.RequestedSize = getInt(d, "requested_size")
	if v, ok := d.Get("stream"); ok {
		g.Stream = b.stream(v)
	}
	if v, ok := d.Get("segment_type"); ok {
		g.Type, _ = v.Str()
	}
	if v, ok := d.Get("segment_pool_id"); ok {
		if l := v.List(); l != nil && len(l.Items) == 2 {
			g.Pool[0], _ = l.Items[0].Int()
			g.Pool[1], _ = l.Items[1].Int()
		}
	}
	if v, ok := d.Get("is_expandable"); ok {
		g.Expandable, _ = v.Bool()
	}
	if v, ok := d.Get("frames"); ok {
		g.Stack = b.stack(v)
	}
	if v, ok := d.Get("blocks"); ok {
		if l := v.List(); l != nil && b.again(unsafe.Pointer(l)) {
			b.dropSegment(func() string {
				return fmt.Sprintf("segments[%d].blocks is the same list as an earlier segment's (a shared reference)", i)
			})
		} else if l != nil {
			addr := g.Address
			for j, it := range l.Items {
				var rb rawBlock
				if h, ok := it.Handle(); ok && h&hMask == hBlock && int(h&^hMask) < len(b.blocks) {
					if b.inSeg.testAndSet(int(h &^ hMask)) {
						b.dropSegment(func() string {
							return fmt.Sprintf("segments[%d].blocks[%d] is the same block as an earlier one (a shared reference)", i, j)
						})
						continue
					}
					rb = b.blocks[h&^hMask]
				} else if bd := it.Dict(); bd != nil {
					if b.again(unsafe.Pointer(bd)) {
						b.dropSegment(func() string {
							return fmt.Sprintf("segments[%d].blocks[%d] is the same block as an earlier one (a shared reference)", i, j)
						})
						continue
					}
					rb = b.block(bd)
				} else {
					continue
				}
				b.checkBlock(i, j, &rb)
				blk := rb.Block
				blk.Address = addr // recomputed as MemoryViz does
				addr += uint64(max(blk.Size, 0))
				g.Blocks = append(g.Blocks, blk)
				if rb.history.Kind() != pickle.KindNone {
					b.s.Legacy = true
				}
			}
		}
	}
	b.checkSegment(i, d, &g)
	// Legacy segments lack requested_size: derive it from the blocks.
	if _, ok := d.Get("requested_size"); !ok {
		for _, blk := range g.Blocks {
			if blk.State == BlockActiveAllocated {
				g.RequestedSize += blk.RequestedSize
			}
		}
	}
	return g
}

// again reports whether the segment dict, blocks list or block dict at p
// was read before, and marks it read.
func (b *builder) again(p unsafe.Pointer) bool {
	if b.seenSegs == nil {
		b.seenSegs = map[unsafe.Pointer]bool{}
	}
	if b.seenSegs[p] {
		return true
	}
	b.seenSegs[p] = true
	return false
}

// dropSegment counts a segment, blocks list or block that was not kept.
func (b *builder) dropSegment(where func() string) {
	b.s.InvalidSegments.add(-1, where)
	b.s.InvalidSegments.Dropped++
}

func (b *builder) settings(v pickle.Value) {
	d := v.Dict()
	if d == nil {
		return
	}
	st := &b.s.Settings
	st.MaxSplitSize = -1
	for i, k := range d.Keys {
		ks, _ := k.Str()
		val := d.Vals[i]
		if len(st.All) < maxSettings {
			st.All = append(st.All, Setting{Key: ks[:min(len(ks), maxSettingBytes)], Value: render(val)})
		}
		switch ks {
		case "expandable_segments":
			st.ExpandableSegments, _ = val.Bool()
		case "max_split_size":
			st.MaxSplitSize, _ = val.Int()
		case "PYTORCH_CUDA_ALLOC_CONF":
			st.Conf, _ = val.Str()
		case "trace_alloc_overflowed":
			st.OverflowKnown = true
			if bv, ok := val.Bool(); ok {
				st.TraceOverflowed = bv
			} else if l := val.List(); l != nil {
				for _, it := range l.Items {
					if bv, _ := it.Bool(); bv {
						st.TraceOverflowed = true
					}
				}
			}
		case "trace_alloc_max_entries":
			st.TraceMaxEntries, _ = val.Int()
			if l := val.List(); l != nil && len(l.Items) > 0 {
				st.TraceMaxEntries, _ = l.Items[0].Int()
			}
		}
	}
}

// Bounds of the rendered allocator settings: PyTorch writes about ten
// keys of short values; a hostile file may hold a million keys, or a value
// shared 20 ways 8 levels deep.
const (
	maxSettings     = 256  // settings kept in Settings.All (all are parsed)
	maxSettingBytes = 1024 // a rendered key or value
)

// render prints a setting value compactly: {"1": 0, ...} maps become
// "1:0 2:0"; other values print as pickle.Value.Format does. The output
// and the work are bounded by maxSettingBytes whatever v holds: depth,
// length and a dict met again (shared or recursive) are cut.
func render(v pickle.Value) string {
	r := settingRenderer{seen: map[*pickle.Dict]bool{}}
	r.to(v, 0)
	return r.b.String()
}

type settingRenderer struct {
	b    strings.Builder
	seen map[*pickle.Dict]bool
}

func (r *settingRenderer) full() bool { return r.b.Len() >= maxSettingBytes }

func (r *settingRenderer) to(v pickle.Value, depth int) {
	if r.full() {
		return
	}
	if s, ok := v.Str(); ok {
		r.b.WriteString(s[:min(len(s), maxSettingBytes-r.b.Len())])
		return
	}
	if d := v.Dict(); d != nil {
		if depth > 6 || r.seen[d] {
			r.b.WriteString("...")
			return
		}
		r.seen[d] = true
		for i := range d.Keys {
			if r.full() {
				r.b.WriteString(" ...")
				return
			}
			if i > 0 {
				r.b.WriteString(" ")
			}
			r.to(d.Keys[i], depth+1)
			r.b.WriteString(":")
			r.to(d.Vals[i], depth+1)
		}
		return
	}
	if f, ok := v.Float(); ok && v.Kind() == pickle.KindFloat {
		r.b.WriteString(strconv.FormatFloat(f, 'g', -1, 64))
		return
	}
	r.b.WriteString(v.Format(max(maxSettingBytes-r.b.Len(), 16)))
}

func (b *builder) annotations(v pickle.Value) {
	l := v.List()
	if l == nil {
		return
	}
	for _, it := range l.Items {
		d := it.Dict()
		if d == nil {
			continue
		}
		var a Annotation
		a.Device = int(getInt(d, "device"))
		if n, ok := d.Get("name"); ok {
			a.Name, _ = n.Str()
		}
		if st, ok := d.Get("stage"); ok {
			a.Stage, _ = st.Str()
		}
		a.TimeUS = getInt(d, "time_us")
		b.s.Annotations = append(b.s.Annotations, a)
	}
}
