package pickle

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/ptscope/ptscope/internal/attack"
)

// FuzzDecode checks that no input makes the decoder panic, hang or allocate
// without bound; errors must be *Error with an offset inside the input.
func FuzzDecode(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/*.pickle")
	fix, _ := filepath.Glob("../../../shared/fixtures/*.pickle")
	for _, p := range append(seeds, fix...) {
		b, err := os.ReadFile(p)
		if err == nil {
			if len(b) > 1<<16 {
				b = b[:1<<16] // a prefix keeps the fuzzer fast; truncation is a case too
			}
			f.Add(b)
		}
	}
	for _, c := range attack.Cases() {
		if !c.Small {
			continue
		}
		if b := c.Make(); len(b) > 0 && b[0] == 0x80 {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		hook := func(d *Dict) (Value, bool) {
			if d.Len() == 2 {
				return Handle(uint64(d.Len())), true
			}
			return Value{}, false
		}
		lhook := func(l *List) (Value, bool) {
			if len(l.Items) == 1 {
				return Handle(1), true
			}
			return Value{}, false
		}
		// The scanner never refuses what the decoder accepts.
		if err := NewScanner(Options{}).Feed(b); err != nil {
			if _, derr := DecodeBytes(b, Options{}); derr == nil {
				t.Fatalf("the scanner refuses a pickle the decoder reads: %v", err)
			}
		}
		for _, opts := range []Options{{}, {OnDict: hook, OnList: lhook, MaxMemo: 1 << 16}} {
			v, err := Decode(bytes.NewReader(b), opts)
			if err != nil {
				pe, ok := err.(*Error)
				if !ok {
					t.Fatalf("error of type %T: %v", err, err)
				}
				if pe.Offset < 0 || pe.Offset > int64(len(b)) {
					t.Fatalf("offset %d outside input of %d bytes", pe.Offset, len(b))
				}
				continue
			}
			_ = v.String()
		}
	})
}
