package fleetgen

import (
	"bytes"
	"testing"
)

// FuzzScaleSnapshot: any input gives an error or a pickle that rewrites to
// itself (frames rebuilt the same way), never a panic.
func FuzzScaleSnapshot(f *testing.F) {
	f.Add(readSnapshot(f, "oom_capacity.pickle.xz"), int64(640), int64(512))
	f.Add(readSnapshot(f, "legacy_list_history.pickle.xz"), int64(400), int64(700))
	f.Add([]byte{0x80, 0x04, 0x95, 0, 0, 0, 0, 0, 0, 0, 0, '.'}, int64(512), int64(512))
	// a negative address, the smallest int64 as a size
	f.Add([]byte("\x80\x05X\x04\x00\x00\x00addr\x8a\x0300\xfb."), int64(400), int64(700))
	f.Add([]byte("\x80\x05X\x04\x00\x00\x00size\x8a\x08\x00\x00\x00\x00\x00\x00\x00\x80."), int64(700), int64(512))
	f.Fuzz(func(t *testing.T, src []byte, size, time int64) {
		if size <= 0 || size > 1<<20 || time <= 0 || time > 1<<20 {
			return
		}
		var out bytes.Buffer
		if err := ScaleSnapshot(&out, src, Scale{size}, Scale{time}); err != nil {
			return
		}
		var again bytes.Buffer
		if err := ScaleSnapshot(&again, out.Bytes(), One, One); err != nil {
			t.Fatalf("the rewritten pickle does not rewrite: %v", err)
		}
		if !bytes.Equal(again.Bytes(), out.Bytes()) {
			t.Fatalf("rewriting with factor 1 changed %d bytes into %d", out.Len(), again.Len())
		}
	})
}
