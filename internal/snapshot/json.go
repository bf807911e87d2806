package snapshot

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/ptscope/ptscope/internal/input"
	"github.com/ptscope/ptscope/internal/pickle"
)

// JSON limits. No allocator snapshot nests deeper than 10 levels (a legacy
// block's history frames), and none holds a string longer than a frame's
// file name or a user_metadata text; encoding/json buffers a whole string
// token before it can be measured, so its limit is checked on the raw
// bytes, before they are buffered.
const (
	maxJSONDepth  = 64
	maxJSONString = 16 << 20
)

// top-level keys the snapshot builder reads; the values of others are
// skipped without being built.
var jsonKeys = map[string]bool{"segments": true, "device_traces": true, "allocator_settings": true,
	"external_annotations": true}

// what a container's items must be (checked as each opens, so that a file
// of the wrong shape fails at its first wrong item)
const (
	wantAny = iota
	wantDict
	wantList
)

// decodeJSON reads a JSON snapshot (the schema MemoryViz also accepts) into
// pickle values, calling the same hooks as the pickle path as each object or
// array closes, so both paths share one builder.
func decodeJSON(r io.Reader, onDict func(*pickle.Dict) (pickle.Value, bool), onList func(*pickle.List) (pickle.Value, bool), src *input.Source) (pickle.Value, error) {
	g := &jsonGuard{r: r, src: src, maxString: min(src.MaxString(), maxJSONString), nextCheck: 16 << 20}
	dec := json.NewDecoder(g)
	dec.UseNumber()
	type frame struct {
		v      pickle.Value
		isObj  bool
		key    pickle.Value
		hasKey bool
		want   int    // what the items must be
		name   string // for messages: "segments", "device_traces[0]"...
		n      int    // items so far
	}
	var stack []frame
	var root pickle.Value
	skip := 0 // depth of a value being skipped (0: none)
	fail := func(msg string) error {
		return fmt.Errorf("offset %d: %s", dec.InputOffset(), msg)
	}
	// child checks a value of kind k (dict, list or a scalar) about to be
	// added to the top container, and says what its own items must be.
	child := func(k pickle.Kind) (want int, name string, err error) {
		if len(stack) == 0 {
			if k == pickle.KindList {
				return wantDict, "segments", nil // legacy: a bare list of segments
			}
			return wantAny, "", nil
		}
		top := &stack[len(stack)-1]
		if top.isObj {
			if len(stack) == 1 && top.hasKey {
				switch s, _ := top.key.Str(); s {
				case "segments":
					return wantDict, s, nil
				case "device_traces":
					return wantList, s, nil
				}
			}
			return wantAny, "", nil
		}
		i := top.n
		top.n++
		switch top.want {
		case wantDict:
			// A scalar in a device trace is counted as an invalid entry
			// (Trace.Invalid); a list where an entry or a segment should
			// be is refused here, before it is built.
			if k != pickle.KindDict && (k == pickle.KindList || top.name == "segments") {
				return 0, "", fail(fmt.Sprintf("%s[%d] is a %s, expected a dict", top.name, i, k))
			}
		case wantList:
			if k != pickle.KindList && k != pickle.KindNone {
				return 0, "", fail(fmt.Sprintf("%s[%d] is a %s, expected a list", top.name, i, k))
			}
			return wantDict, top.name + "[" + strconv.Itoa(i) + "]", nil
		}
		return wantAny, "", nil
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
			if len(stack) > 0 || skip > 0 {
				return pickle.Value{}, fail("unexpected end of JSON input")
			}
			return root, nil
		}
		if err != nil {
			if g.err != nil {
				return pickle.Value{}, g.err
			}
			var se *json.SyntaxError
			if errors.As(err, &se) {
				return pickle.Value{}, fmt.Errorf("offset %d: invalid JSON: %v", se.Offset+g.bom, err)
			}
			return pickle.Value{}, fail("invalid JSON: " + err.Error())
		}
		if skip > 0 {
			// The value of a key the builder does not read.
			if d, ok := tok.(json.Delim); ok {
				if d == '{' || d == '[' {
					skip++
				} else {
					skip--
				}
			}
			if skip == 1 {
				skip = 0
				stack[len(stack)-1].hasKey = false
			}
			continue
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{', '[':
				if len(stack) == 1 && stack[0].isObj && stack[0].hasKey {
					if k, _ := stack[0].key.Str(); !jsonKeys[k] {
						skip = 2
						continue
					}
				}
				k := pickle.KindList
				if t == '{' {
					k = pickle.KindDict
				}
				want, name, err := child(k)
				if err != nil {
					return pickle.Value{}, err
				}
				f := frame{want: want, name: name}
				if t == '{' {
					f.v, f.isObj = pickle.NewDict(), true
				} else {
					f.v = pickle.NewList()
				}
				stack = append(stack, f)
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
			if len(stack) == 1 && stack[0].isObj {
				if k, _ := stack[0].key.Str(); !jsonKeys[k] {
					stack[0].hasKey = false
					continue
				}
			}
			if _, _, err = child(pickle.KindString); err == nil {
				err = add(pickle.Str(t))
			}
		case json.Number:
			if _, _, err = child(pickle.KindInt); err == nil {
				err = add(jsonNumber(string(t)))
			}
		case bool:
			if _, _, err = child(pickle.KindBool); err == nil {
				err = add(pickle.Bool(t))
			}
		case nil:
			if _, _, err = child(pickle.KindNone); err == nil {
				err = add(pickle.None())
			}
		}
		if err != nil {
			return pickle.Value{}, err
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

// jsonGuard checks the raw bytes of a JSON document before encoding/json
// sees them: nesting depth, string length and the memory budget, each
// refused at its offset. It drops a leading UTF-8 byte order mark (which
// encoding/json rejects and some Windows tools write).
type jsonGuard struct {
	r         io.Reader
	off       int64 // bytes passed on
	bom       int64 // 3 if a BOM was dropped
	started   bool
	depth     int
	inStr     bool
	esc       bool
	strLen    int
	maxString int
	nextCheck int64
	src       *input.Source
	err       error
}

func (g *jsonGuard) Read(p []byte) (int, error) {
	if g.err != nil {
		return 0, g.err
	}
	n, err := g.r.Read(p)
	b := p[:n]
	if !g.started && n > 0 {
		if len(b) >= 3 && b[0] == 0xef && b[1] == 0xbb && b[2] == 0xbf {
			copy(b, b[3:])
			n -= 3
			b = b[:n]
			g.bom = 3
		}
		g.started = true
	}
	for i, c := range b {
		if g.inStr {
			switch {
			case g.esc:
				g.esc = false
			case c == '\\':
				g.esc = true
			case c == '"':
				g.inStr = false
				continue
			}
			if g.strLen++; g.strLen > g.maxString {
				return g.fail(i, fmt.Sprintf("a string longer than %d bytes exceeds the limit (no snapshot holds one)", g.maxString))
			}
			continue
		}
		switch c {
		case '"':
			g.inStr, g.strLen = true, 0
		case '{', '[':
			if g.depth++; g.depth > maxJSONDepth {
				return g.fail(i, fmt.Sprintf("JSON nested deeper than %d levels (no allocator snapshot nests deeper than 10)", maxJSONDepth))
			}
		case '}', ']':
			g.depth--
		}
	}
	g.off += int64(n)
	if g.off >= g.nextCheck {
		g.nextCheck = g.off + 16<<20
		if cerr := g.src.Check(); cerr != nil {
			g.err = fmt.Errorf("offset %d: %w", g.off+g.bom, cerr)
			return 0, g.err
		}
	}
	return n, err
}

func (g *jsonGuard) fail(i int, msg string) (int, error) {
	g.err = fmt.Errorf("offset %d: %s", g.off+int64(i)+g.bom, msg)
	return 0, g.err
}
