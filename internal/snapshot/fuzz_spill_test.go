package snapshot

import (
	"bytes"
	"reflect"
	"runtime"
	"testing"

	"github.com/ptscope/ptscope/internal/spillmem"
)

// FuzzReadSpilled reads any input on the heap and with every slice in a
// spill arena (trimmed before the comparison): both fail, or both give the
// same snapshot.
func FuzzReadSpilled(f *testing.F) {
	if runtime.GOOS != "linux" {
		f.Skip("spilling is implemented on Linux only")
	}
	seedSnapshotCorpus(f)
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		want, werr := read(bytes.NewReader(data), 0, 2)
		a, err := spillmem.New(dir, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		a.SetMin(1)
		got, gerr := readIn(bytes.NewReader(data), 0, 2, a, nil)
		if (werr == nil) != (gerr == nil) || werr != nil && werr.Error() != gerr.Error() {
			t.Fatalf("heap: %v; spilled: %v", werr, gerr)
		}
		if werr != nil {
			return
		}
		a.Trim()
		if got.Arena() != a {
			t.Fatal("the snapshot does not name its arena")
		}
		g := *got
		g.arena = nil
		g.Traces = append([]Trace(nil), got.Traces...)
		for i := range g.Traces {
			if g.Traces[i].arena != a && g.Traces[i].Len() > 0 {
				t.Fatalf("trace %d does not name its arena", i)
			}
			g.Traces[i].arena = nil
		}
		if !reflect.DeepEqual(want, &g) {
			t.Fatal("the spilled snapshot differs")
		}
	})
}
