package pickle

// unwrapTorch reports whether g is a TorchScript wrapper whose result is its
// first argument.
func unwrapTorch(g *Global) bool {
	if g.Module != "torch.jit._pickle" {
		return false
	}
	switch g.Name {
	case "restore_type_tag", "build_intlist", "build_doublelist", "build_boollist", "build_tensorlist":
		return true
	}
	return false
}

func (d *decoder) reduce(callable Value, args []Value, kw Value) Value {
	if g := callable.Global(); g != nil {
		if unwrapTorch(g) && len(args) > 0 {
			return args[0]
		}
		if v, ok := builtinData(g, args); ok {
			return v
		}
	}
	d.held += containerCost
	return objectValue(&Object{Callable: callable, Args: args, Kwargs: kw})
}

// tupleItems returns the arguments of REDUCE and NEWOBJ. They share the
// tuple's array (capacity cut, so appends to a list never show through):
// copying them would make a pickle that REDUCEs one memoized long tuple
// again and again cost quadratic time and memory.
func tupleItems(v Value) []Value {
	if l := v.List(); l != nil {
		return l.Items[:len(l.Items):len(l.Items)]
	}
	return []Value{v}
}

// markShared stops hooks from converting a container that has more than one
// reference, so that every reference keeps seeing the same value.
func markShared(v Value) {
	switch v.Kind() {
	case KindList, KindTuple, KindSet:
		v.list().flags |= flagShared
	case KindDict:
		v.dict().flags |= flagShared
	}
}

// builtinData turns the REDUCE forms older protocols use for plain data
// (set, frozenset, bytes via _codecs.encode, bytearray) into values. This only
// builds data; nothing is looked up or called.
func builtinData(g *Global, args []Value) (Value, bool) {
	mod := g.Module
	if mod != "builtins" && mod != "__builtin__" && mod != "_codecs" {
		return Value{}, false
	}
	switch g.Name {
	case "set", "frozenset":
		if len(args) == 0 {
			return listValue(KindSet, &List{memo: -1}), true
		}
		if l := args[0].List(); l != nil && len(args) == 1 {
			return listValue(KindSet, &List{Items: l.Items[:len(l.Items):len(l.Items)], memo: -1}), true
		}
	case "encode", "bytearray", "bytes":
		if len(args) == 0 {
			return bytesValue(nil), true
		}
		if b, ok := args[0].Bytes(); ok && len(args) == 1 {
			return bytesValue(b), true
		}
		if s, ok := args[0].Str(); ok && len(args) == 2 {
			// latin1 text of a bytes object: each rune is one byte.
			if enc, _ := args[1].Str(); enc == "latin1" || enc == "latin-1" {
				out := make([]byte, 0, len(s))
				for _, r := range s {
					if r > 0xff {
						return Value{}, false
					}
					out = append(out, byte(r))
				}
				return bytesValue(out), true
			}
		}
	}
	return Value{}, false
}
