package spillmem

import (
	"reflect"
	"runtime"
	"testing"
)

type rec struct {
	A uint64
	B int32
	C [2]uint8
}

// TestKeepsDataAcrossTrims writes slices in the arena, drops their pages
// and reads them back: the file must have kept every value.
func TestKeepsDataAcrossTrims(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("spilling is implemented on Linux only")
	}
	base := sharedBytes()
	a, err := New(t.TempDir(), 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	const n = 3 << 20
	xs := Make[int64](a, n)
	rs := MakeCap[rec](a, 0, n/4)
	if a.Size() < n*8 {
		t.Fatalf("arena holds %d bytes, want the %d of the first slice at least", a.Size(), n*8)
	}
	for i := range xs {
		if xs[i] != 0 {
			t.Fatalf("fresh slice [%d] = %d", i, xs[i])
		}
		xs[i] = int64(i) * 7
	}
	for i := range n / 4 {
		rs = append(rs, rec{A: uint64(i), B: int32(-i), C: [2]uint8{uint8(i), 1}})
	}
	for i := range xs { // touch every page again
		xs[i]++
		xs[i]--
	}
	a.Trim()
	if after := sharedBytes(); after > base+4<<20 {
		t.Errorf("resident shared bytes %d after a trim, %d before the arena: the pages were not dropped", after, base)
	}
	for i, v := range xs {
		if v != int64(i)*7 {
			t.Fatalf("after trim [%d] = %d, want %d", i, v, int64(i)*7)
		}
	}
	for i, r := range rs {
		if r.A != uint64(i) || r.B != int32(-i) || r.C != [2]uint8{uint8(i), 1} {
			t.Fatalf("after trim rec %d = %+v", i, r)
		}
	}
	if a.Err() != nil {
		t.Fatal(a.Err())
	}
}

// TestWatcherBoundsResident writes far more than the limit and checks that
// the watcher trimmed meanwhile.
func TestWatcherBoundsResident(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("spilling is implemented on Linux only")
	}
	a, err := New(t.TempDir(), 8<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	xs := Make[byte](a, 256<<20)
	for round := 0; round < 4 && a.Trims() == 0; round++ {
		for i := 0; i < len(xs); i += 4096 {
			xs[i] = byte(round + 1)
		}
		runtime.Gosched()
	}
	if a.Trims() == 0 {
		t.Fatalf("256 MiB written with an 8 MiB limit and no trim")
	}
}

func TestSmallAndNil(t *testing.T) {
	var a *Arena
	xs := Make[int64](a, 10)
	ys := MakeCap[uint32](nil, 3, 1<<20)
	if len(xs) != 10 || len(ys) != 3 || cap(ys) != 1<<20 {
		t.Fatalf("nil arena: len %d, len %d cap %d", len(xs), len(ys), cap(ys))
	}
}

func TestRefusesPointers(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("spilling is implemented on Linux only")
	}
	a, err := New(t.TempDir(), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	defer func() {
		if recover() == nil {
			t.Fatal("a slice of strings was placed in the arena")
		}
	}()
	_ = Make[string](a, 1<<20)
}

func TestHasPointers(t *testing.T) {
	for _, c := range []struct {
		v    any
		want bool
	}{{int64(0), false}, {rec{}, false}, {[3]uint16{}, false}, {"", true}, {[]int{}, true},
		{struct{ p *int }{}, true}, {map[int]int{}, true}, {[0]*int{}, false}} {
		if got := hasPointers(reflectType(c.v)); got != c.want {
			t.Errorf("hasPointers(%T) = %v, want %v", c.v, got, c.want)
		}
	}
}

func reflectType(v any) reflect.Type { return reflect.TypeOf(v) }
