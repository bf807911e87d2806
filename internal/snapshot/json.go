package snapshot

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/ptscope/ptscope/internal/pickle"
)

// decodeJSON reads a JSON snapshot (the schema MemoryViz also accepts) into
// pickle values, calling the same hooks as the pickle path as each object or
// array closes, so both paths share one builder.
func decodeJSON(r io.Reader, onDict func(*pickle.Dict) (pickle.Value, bool), onList func(*pickle.List) (pickle.Value, bool)) (pickle.Value, error) {
	dec := json.NewDecoder(r)
	dec.UseNumber()
	type frame struct {
		v      pickle.Value
		isObj  bool
		key    pickle.Value
		hasKey bool
	}
	var stack []frame
	var root pickle.Value
	fail := func(msg string) error {
		return fmt.Errorf("offset %d: %s", dec.InputOffset(), msg)
	}
	add := func(v pickle.Value) error {
		if len(stack) == 0 {
			root = v
			return nil
		}
		top := &stack[len(stack)-1]
		if top.isObj {
			if !top.hasKey {
				return fail("expected an object key")
			}
			d := top.v.Dict()
			d.Keys = append(d.Keys, top.key)
			d.Vals = append(d.Vals, v)
			top.hasKey = false
			return nil
		}
		l := top.v.List()
		l.Items = append(l.Items, v)
		return nil
	}
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			if len(stack) > 0 {
				return pickle.Value{}, fail("unexpected end of JSON input")
			}
			return root, nil
		}
		if err != nil {
			var se *json.SyntaxError
			if errors.As(err, &se) {
				return pickle.Value{}, fmt.Errorf("offset %d: invalid JSON: %v", se.Offset, err)
			}
			return pickle.Value{}, fail("invalid JSON: " + err.Error())
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{':
				stack = append(stack, frame{v: pickle.NewDict(), isObj: true})
			case '[':
				stack = append(stack, frame{v: pickle.NewList()})
			case '}', ']':
				f := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				v := f.v
				if f.isObj {
					if nv, ok := onDict(v.Dict()); ok {
						v = nv
					}
				} else if l := v.List(); len(l.Items) > 0 {
					if nv, ok := onList(l); ok {
						v = nv
					}
				}
				if err := add(v); err != nil {
					return pickle.Value{}, err
				}
			}
			continue
		case string:
			if len(stack) > 0 && stack[len(stack)-1].isObj && !stack[len(stack)-1].hasKey {
				stack[len(stack)-1].key = pickle.Str(t)
				stack[len(stack)-1].hasKey = true
				continue
			}
			err = add(pickle.Str(t))
		case json.Number:
			err = add(jsonNumber(string(t)))
		case bool:
			err = add(pickle.Bool(t))
		case nil:
			err = add(pickle.None())
		}
		if err != nil {
			return pickle.Value{}, err
		}
		if len(stack) > 1<<12 {
			return pickle.Value{}, fail("JSON nested deeper than 4096 levels")
		}
	}
}

func jsonNumber(s string) pickle.Value {
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		return pickle.Int(i)
	}
	if u, err := strconv.ParseUint(s, 10, 64); err == nil {
		// Addresses above 2^63: keep all 64 bits.
		return pickle.Int(int64(u))
	}
	f, _ := strconv.ParseFloat(s, 64)
	return pickle.Float(f)
}
