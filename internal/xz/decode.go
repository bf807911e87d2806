package xz

import "errors"

var errCorrupt = errors.New("corrupt LZMA2 data")

// dict is the sliding window. It grows as bytes are decoded, up to the
// size the block header declared, then wraps: a stream that declares a
// large dictionary but holds little data never allocates it.
type dict struct {
	buf   []byte
	pos   int    // the next write index
	size  int    // the declared dictionary size
	total uint64 // bytes decoded since the last dictionary reset
}

func (d *dict) reset() {
	d.buf, d.pos, d.total = d.buf[:0], 0, 0
}

func (d *dict) put(b byte) {
	if d.pos == len(d.buf) { // growing: pos == len(d.buf) < size
		d.grow()
	}
	d.buf[d.pos] = b
	if d.pos++; d.pos == d.size {
		d.pos = 0
	}
	d.total++
}

// grow lengthens buf by one byte, doubling its capacity (from 64 KiB, up
// to size) when it is full: append's smaller steps for large slices cost
// more copying than the decoding itself.
func (d *dict) grow() {
	n := len(d.buf)
	if n == cap(d.buf) {
		nb := make([]byte, n, min(d.size, max(2*n, 1<<16)))
		copy(nb, d.buf)
		d.buf = nb
	}
	d.buf = d.buf[:n+1]
}

// repeat copies n bytes from dist+1 back (dist < len(d.buf)) to the end
// of the dictionary and to out.
func (d *dict) repeat(out []byte, dist uint32, n int) {
	src := d.pos - int(dist) - 1
	if src < 0 {
		src += len(d.buf)
	}
	for i := 0; i < n; i++ {
		b := d.buf[src]
		if src++; src == d.size {
			src = 0
		}
		d.put(b)
		out[i] = b
	}
}

// get is the byte dist+1 back (dist 0: the last one); dist < len(d.buf).
func (d *dict) get(dist uint32) byte {
	i := d.pos - int(dist) - 1
	if i < 0 {
		i += len(d.buf)
	}
	return d.buf[i]
}

// lzmaChunk decodes one LZMA chunk's symbols into out: at most left
// bytes in all (the chunk's unpacked size), as many as out takes per call.
type lzmaChunk struct {
	z    *lzma
	d    *dict
	rc   rangeDecoder
	left int // unpacked bytes of the chunk not yet decoded
}

// read decodes up to len(out) bytes. A match cut by the end of out is
// finished by the next call; one cut by the end of the chunk, a distance
// beyond the dictionary, or a read past the packed bytes is corrupt data.
func (c *lzmaChunk) read(out []byte) (int, error) {
	z, d, rc := c.z, c.d, &c.rc
	n := 0
	limit := min(len(out), c.left)
	if k := min(int(z.pendingLen), limit); k > 0 {
		d.repeat(out[:k], z.rep[0], k)
		n, z.pendingLen = k, z.pendingLen-uint32(k)
	}
	pbMask := uint32(1)<<z.pb - 1
	for n < limit && !rc.over {
		posState := uint32(d.total) & pbMask
		s2 := z.state<<4 | posState
		if rc.bit(&z.isMatch[s2]) == 0 {
			b := c.literal()
			d.put(b)
			out[n] = b
			n++
			continue
		}
		length := c.match(s2, posState)
		if rc.over || int(z.rep[0]) >= len(d.buf) {
			return n, errCorrupt
		}
		k := min(int(length), limit-n)
		d.repeat(out[n:n+k], z.rep[0], k)
		n += k
		z.pendingLen = length - uint32(k)
	}
	c.left -= n
	if rc.over || c.left == 0 && (z.pendingLen > 0 || rc.pos != len(rc.in) || rc.code != 0) {
		return n, errCorrupt
	}
	return n, nil
}

// match decodes the match that follows an isMatch bit of 1: a new
// distance, a short rep (one byte at rep[0]) or a long rep (rep[0..3]
// moved to the front). It leaves the distance in rep[0] and returns the
// length.
func (c *lzmaChunk) match(s2, posState uint32) uint32 {
	z, rc := c.z, &c.rc
	if rc.bit(&z.isRep[z.state]) == 0 {
		l := z.lenDec.decode(rc, posState)
		z.state = stateAfter(z.state, 7, 10)
		dist := c.distance(l)
		z.rep[3], z.rep[2], z.rep[1], z.rep[0] = z.rep[2], z.rep[1], z.rep[0], dist
		return l + matchMinLen
	}
	if rc.bit(&z.isRepG0[z.state]) == 0 {
		if rc.bit(&z.isRep0Long[s2]) == 0 {
			z.state = stateAfter(z.state, 9, 11)
			return 1
		}
	} else {
		var dist uint32
		if rc.bit(&z.isRepG1[z.state]) == 0 {
			dist = z.rep[1]
		} else {
			if rc.bit(&z.isRepG2[z.state]) == 0 {
				dist = z.rep[2]
			} else {
				dist = z.rep[3]
				z.rep[3] = z.rep[2]
			}
			z.rep[2] = z.rep[1]
		}
		z.rep[1], z.rep[0] = z.rep[0], dist
	}
	l := z.repLenDec.decode(rc, posState)
	z.state = stateAfter(z.state, 8, 11)
	return l + matchMinLen
}

// stateAfter is the state after a match, rep or short rep: ifLit after a
// literal state (below 7), else ifMatch.
func stateAfter(state, ifLit, ifMatch uint32) uint32 {
	if state < 7 {
		return ifLit
	}
	return ifMatch
}

// literal decodes one literal: plain after a literal, matched against
// the byte at rep[0] after a match.
func (c *lzmaChunk) literal() byte {
	z, d, rc := c.z, c.d, &c.rc
	var prev uint32
	if d.total > 0 {
		prev = uint32(d.get(0))
	}
	litState := (uint32(d.total)&(1<<z.lp-1))<<z.lc | prev>>(8-z.lc)
	probs := z.literal[literalCoderLen*litState:][:literalCoderLen]
	sym := uint32(1)
	if z.state >= 7 && int(z.rep[0]) < len(d.buf) {
		match := uint32(d.get(z.rep[0]))
		offs := uint32(0x100)
		for sym < 0x100 {
			match <<= 1
			bit := match & offs
			if rc.bit(&probs[offs+bit+sym]) == 0 {
				sym <<= 1
				offs &^= bit
			} else {
				sym = sym<<1 | 1
				offs &= bit
			}
		}
	} else {
		for sym < 0x100 {
			sym = sym<<1 | rc.bit(&probs[sym])
		}
	}
	switch {
	case z.state < 4:
		z.state = 0
	case z.state < 10:
		z.state -= 3
	default:
		z.state -= 6
	}
	return byte(sym)
}

// distance decodes a match's distance (0-based) for a length (0-based).
func (c *lzmaChunk) distance(length uint32) uint32 {
	z, rc := c.z, &c.rc
	slot := rc.tree(z.posSlot[min(length, lenToPosStates-1)][:], posSlotBits)
	if slot < startPosModel {
		return slot
	}
	direct := uint(slot>>1) - 1
	dist := (2 | slot&1) << direct
	if slot < endPosModel {
		return dist + rc.reverse(z.posSpecial[dist-slot:], direct)
	}
	dist += rc.direct(direct-alignBits) << alignBits
	return dist + rc.reverse(z.align[:], alignBits)
}
