package memory

import (
	"math/rand/v2"
	"testing"
)

// TestAddrTableAgainstMap runs random puts, gets and takes on the table and
// on a Go map; they must agree after every operation.
func TestAddrTableAgainstMap(t *testing.T) {
	for _, keySpace := range []uint64{8, 300, 1 << 20} {
		rng := rand.New(rand.NewPCG(1, keySpace))
		tab := newAddrTable(0)
		ref := map[uint64]int32{}
		for op := range 200_000 {
			k := rng.Uint64N(keySpace) * 512
			if keySpace == 8 {
				k = rng.Uint64() // full-width keys, collisions by chance only
				k = k%8 + k&^(1<<63-1)
			}
			switch rng.IntN(3) {
			case 0:
				v := int32(op)
				tab.put(k, v)
				ref[k] = v
			case 1:
				i, ok := tab.find(k)
				got := tab.vals[i]
				want, wok := ref[k]
				if ok != wok || (ok && got != want) {
					t.Fatalf("op %d get(%d) = %d,%v; map %d,%v", op, k, got, ok, want, wok)
				}
			case 2:
				got, ok := tab.take(k)
				want, wok := ref[k]
				delete(ref, k)
				if ok != wok || (ok && got != want) {
					t.Fatalf("op %d take(%d) = %d,%v; map %d,%v", op, k, got, ok, want, wok)
				}
			}
			if tab.n != len(ref) {
				t.Fatalf("op %d: %d entries, map has %d", op, tab.n, len(ref))
			}
		}
		seen := 0
		tab.each(func(k uint64, v int32) {
			if ref[k] != v {
				t.Fatalf("each: %d -> %d, map %d", k, v, ref[k])
			}
			seen++
		})
		if seen != len(ref) {
			t.Fatalf("each saw %d, map has %d", seen, len(ref))
		}
	}
}
