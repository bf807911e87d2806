package pickle

import "unsafe"

// Protocols 0 and 1 open with no PROTO opcode. Protocol 0 fills a dict one
// SETITEM at a time and a list one APPEND at a time, with nothing to mark
// the last, and a hook (which tells what a dict is from its keys) must see
// the container whole. Such pickles are decoded without hooks and their
// containers offered afterwards by offerTree.

// hooksAfter reports whether a pickle opening with b is decoded first and
// offered to the hooks afterwards.
func hooksAfter(b []byte, opts Options) bool {
	return len(b) > 0 && b[0] != opProto && (opts.OnDict != nil || opts.OnList != nil)
}

// offerTree offers every dict and list reachable from root through dicts,
// lists and tuples to the hooks, innermost first and in document order, as
// a streaming decode offers each once filled, and puts what a hook returns
// in its place (every reference to a shared container gets the same value).
// It walks with its own stack, so a deeply nested pickle cannot exhaust
// the goroutine's.
func offerTree(root Value, opts Options) Value {
	type frame struct {
		v    Value
		kids []Value // the values to walk: a dict's values, a list's items
		i    int
		slot *Value // where v sits in its parent, nil for the root
	}
	kids := func(v Value) []Value {
		switch v.Kind() {
		case KindDict:
			return v.dict().Vals
		case KindList, KindTuple:
			return v.list().Items
		}
		return nil
	}
	container := func(v Value) bool {
		k := v.Kind()
		return k == KindDict || k == KindList || k == KindTuple
	}
	if !container(root) {
		return root
	}
	done := map[unsafe.Pointer]Value{} // offered, and what replaces it
	open := map[unsafe.Pointer]bool{}  // on the walk's stack (a cycle)
	out := root
	stack := []*frame{{v: root, kids: kids(root)}}
	open[root.p] = true
	for len(stack) > 0 {
		f := stack[len(stack)-1]
		if f.i < len(f.kids) {
			c := &f.kids[f.i]
			f.i++
			if !container(*c) || open[c.p] {
				continue
			}
			if r, ok := done[c.p]; ok {
				*c = r
				continue
			}
			open[c.p] = true
			stack = append(stack, &frame{v: *c, kids: kids(*c), slot: c})
			continue
		}
		stack = stack[:len(stack)-1]
		delete(open, f.v.p)
		r := f.v
		switch f.v.Kind() {
		case KindDict:
			if opts.OnDict != nil {
				if v, ok := opts.OnDict(f.v.dict()); ok {
					r = v
				}
			}
		case KindList:
			if opts.OnList != nil {
				if v, ok := opts.OnList(f.v.list()); ok {
					r = v
				}
			}
		}
		done[f.v.p] = r
		if f.slot != nil {
			*f.slot = r
		} else {
			out = r
		}
	}
	return out
}
