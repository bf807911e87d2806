package snapshot

import (
	"bytes"
	"encoding/binary"
	"reflect"
	"testing"

	"github.com/ptscope/ptscope/internal/snapshot/snapgen"
)

// reframe rewrites a framed pickle with FRAMEs of about size bytes (at
// opcode boundaries, as Python's pickler cuts them), so that small inputs
// split into many stretches. It returns nil for pickles it cannot walk.
func reframe(data []byte, size int) []byte {
	fr := frameChain(data)
	if len(data) < 2 || len(fr) == 0 {
		return nil
	}
	var body []byte
	for _, f := range fr {
		body = append(body, data[f.lo:f.hi]...)
	}
	body = append(body, data[fr[len(fr)-1].hi:]...)
	out := append([]byte(nil), data[:2]...)
	start, pos := 0, 0
	flush := func() {
		var h [9]byte
		h[0] = 0x95
		binary.LittleEndian.PutUint64(h[1:], uint64(pos-start))
		out = append(out, h[:]...)
		out = append(out, body[start:pos]...)
		start = pos
	}
	for pos < len(body) {
		op := body[pos]
		n := int(opArgLen[op])
		switch {
		case n == lenMemoize || n == lenEmptyDict:
			pos++
		case n > 0:
			pos += n
		case n == 0:
			return nil
		default:
			w := -n
			if pos+1+w > len(body) {
				return nil
			}
			var l uint64
			switch w {
			case 1:
				l = uint64(body[pos+1])
			case 4:
				l = uint64(binary.LittleEndian.Uint32(body[pos+1:]))
			case 8:
				l = binary.LittleEndian.Uint64(body[pos+1:])
			}
			if l > uint64(len(body)) {
				return nil
			}
			pos += 1 + w + int(l)
		}
		if pos > len(body) {
			return nil
		}
		if pos-start >= size || pos == len(body) {
			flush()
		}
	}
	return out
}

func TestParallelMatchesSequentialSmallFrames(t *testing.T) {
	inputs := fixtureBytes(t)
	var buf bytes.Buffer
	if err := snapgen.Write(&buf, snapgen.Options{Entries: 9000, Seed: 9}); err != nil {
		t.Fatal(err)
	}
	inputs["snapgen"] = buf.Bytes()
	for name, data := range inputs {
		for _, size := range []int{700, 4000} {
			rf := reframe(data, size)
			if rf == nil {
				continue
			}
			want, err := sequential(rf)
			if err != nil {
				t.Fatalf("%s reframed: %v", name, err)
			}
			for _, w := range []int{2, 7} {
				got, regions, err := parallelRead(rf, w)
				if err != nil {
					t.Fatalf("%s frames of %d, workers %d: %v", name, size, w, err)
				}
				if regions == 0 && want.Trace(0).Len() > 2000 {
					t.Errorf("%s frames of %d, workers %d: not decoded in parallel", name, size, w)
				}
				want.InputBytes = got.InputBytes
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("%s frames of %d, workers %d: differs (%s)", name, size, w, diff(got, want))
				}
			}
		}
	}
}

// FuzzParallelMatchesSequential: on any input the parallel reader either
// gives up (the caller then decodes sequentially) or agrees with the
// sequential reader exactly; ReadPickle's combined path always agrees.
func FuzzParallelMatchesSequential(f *testing.F) {
	var buf bytes.Buffer
	if err := snapgen.Write(&buf, snapgen.Options{Entries: 240, Seed: 3, Frames: 20, Stacks: 8}); err != nil {
		f.Fatal(err)
	}
	f.Add(reframe(buf.Bytes(), 1200))
	for _, data := range fixtureBytes(f) {
		if len(data) < 50_000 {
			if rf := reframe(data, 900); rf != nil {
				f.Add(rf)
			}
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 2 || data[0] != 0x80 {
			return
		}
		want, werr := sequential(data)
		got, _, gerr := readPickleParallelEnv(data, 3, 0, false)
		if gerr == nil {
			if werr != nil {
				t.Fatalf("parallel decoded what the sequential reader rejects: %v", werr)
			}
			want.InputBytes = got.InputBytes
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("parallel result differs (%s)", diff(got, want))
			}
		}
		both, berr := readPickleBytes(data, 3, false)
		if (berr == nil) != (werr == nil) {
			t.Fatalf("readPickleBytes error %v, sequential %v", berr, werr)
		}
		if berr == nil {
			want.InputBytes = both.InputBytes
			if !reflect.DeepEqual(both, want) {
				t.Fatalf("readPickleBytes differs (%s)", diff(both, want))
			}
		}
	})
}
