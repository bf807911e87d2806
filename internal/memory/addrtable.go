package memory

import "math/bits"

// addrTable maps block addresses to allocation indices: an open-addressed
// hash table with linear probing and backward-shift deletion. The replay
// inserts and deletes once per trace entry; this is about twice as fast as
// a Go map for that pattern and allocates only when it grows.
type addrTable struct {
	keys  []uint64
	vals  []int32 // -1: empty slot
	n     int
	shift uint // 64 - log2(len(keys))
}

func newAddrTable(hint int) *addrTable {
	t := &addrTable{}
	t.init(max(16, 1<<bits.Len(uint(2*hint))))
	return t
}

func (t *addrTable) init(size int) {
	t.keys = make([]uint64, size)
	t.vals = make([]int32, size)
	for i := range t.vals {
		t.vals[i] = -1
	}
	t.n = 0
	t.shift = uint(64 - bits.TrailingZeros(uint(size)))
}

// home is the first slot probed for k (Fibonacci hashing: addresses are
// multiples of 512, so the low bits alone would collide).
func (t *addrTable) home(k uint64) int {
	return int((k * 0x9E3779B97F4A7C15) >> t.shift)
}

// find returns the slot of k, or the empty slot where it would go.
func (t *addrTable) find(k uint64) (int, bool) {
	mask := len(t.keys) - 1
	for i := t.home(k); ; i = (i + 1) & mask {
		if t.vals[i] < 0 {
			return i, false
		}
		if t.keys[i] == k {
			return i, true
		}
	}
}

// put sets k to v, replacing an existing value.
func (t *addrTable) put(k uint64, v int32) {
	if 2*(t.n+1) > len(t.keys) {
		t.grow()
	}
	i, ok := t.find(k)
	if !ok {
		t.keys[i] = k
		t.n++
	}
	t.vals[i] = v
}

// take removes k and returns its value.
func (t *addrTable) take(k uint64) (int32, bool) {
	i, ok := t.find(k)
	if !ok {
		return -1, false
	}
	v := t.vals[i]
	mask := len(t.keys) - 1
	// Backward shift: move later entries of the probe run into the hole
	// when the hole lies between their home and where they sit.
	for j := (i + 1) & mask; t.vals[j] >= 0; j = (j + 1) & mask {
		if (j-t.home(t.keys[j]))&mask >= (j-i)&mask {
			t.keys[i], t.vals[i] = t.keys[j], t.vals[j]
			i = j
		}
	}
	t.vals[i] = -1
	t.n--
	return v, true
}

func (t *addrTable) grow() {
	keys, vals := t.keys, t.vals
	t.init(2 * len(keys))
	for i, v := range vals {
		if v >= 0 {
			t.put(keys[i], v)
		}
	}
}

// each calls f for every entry, in slot order.
func (t *addrTable) each(f func(k uint64, v int32)) {
	for i, v := range t.vals {
		if v >= 0 {
			f(t.keys[i], v)
		}
	}
}
